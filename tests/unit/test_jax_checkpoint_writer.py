"""The JAX trainer's checkpoints are written on a thread of their own
(:class:`transformer.training.jax_checkpointing.Checkpoints`): the caller goes
on at once, one write at a time, and a failed write is the caller's error at
its next poll or wait. A stand-in model whose weights file waits for a signal
holds a write open."""

import errno
import json
import threading

import numpy as np
import pytest

from transformer.run.errors import CheckpointError
from transformer.training import jax_checkpointing


class _Model:
  """Writes its weights file once ``release`` is set (or fails, given ``error``)."""

  def __init__(self, error=None):
    self.release, self.error, self.threads = threading.Event(), error, []

  def save_weights(self, path):
    self.threads.append(threading.current_thread())
    assert self.release.wait(30)
    if self.error:
      raise self.error
    with open(path, "wb") as f:
      f.write(b"weights")


def _save(checkpoints, step, filled):
  checkpoints.save(step, lambda: filled.append(threading.current_thread()),
                   [np.full(3, step, np.float32)], [np.zeros(2, np.int64)],
                   {"step": step, "epoch": 0, "step_in_epoch": step, "budget": {}})


def test_the_caller_goes_on_while_the_checkpoint_is_written(tmp_path):
  model, filled = _Model(), []
  checkpoints = jax_checkpointing.Checkpoints(tmp_path, model, None, keep=5)
  _save(checkpoints, 3, filled)
  # Back before the weights are written: nothing is in place yet, and a poll does not wait.
  checkpoints.poll()
  assert checkpoints.latest() is None
  assert not (tmp_path / "checkpoints" / "step-3").exists()
  model.release.set()
  checkpoints.wait()
  folder = tmp_path / "checkpoints" / "step-3"
  assert checkpoints.latest() == folder
  assert json.loads((folder / "state.json").read_text()) == {
      "epoch": 0, "step_in_epoch": 3, "step": 3, "budget": {}}
  with np.load(folder / "optimizer.npz") as npz:
    np.testing.assert_array_equal(npz["arr_0"], np.full(3, 3, np.float32))
  # The weights went into the model and were written on the writer's thread.
  assert filled and model.threads and filled[0] is model.threads[0]
  assert model.threads[0] is not threading.main_thread()


def test_the_next_save_waits_for_the_one_before(tmp_path):
  model, filled = _Model(), []
  checkpoints = jax_checkpointing.Checkpoints(tmp_path, model, None, keep=5)
  _save(checkpoints, 3, filled)
  second = threading.Thread(target=_save, args=(checkpoints, 6, filled))
  second.start()
  second.join(0.5)
  assert second.is_alive() and len(model.threads) == 1  # still waiting for step-3
  model.release.set()
  second.join(30)
  checkpoints.wait()
  assert [p.name for p in sorted((tmp_path / "checkpoints").iterdir())] == ["step-3", "step-6"]


def test_a_failed_write_is_the_callers_error_naming_the_checkpoint(tmp_path):
  model = _Model(OSError(errno.ENOSPC, "No space left on device"))
  checkpoints = jax_checkpointing.Checkpoints(tmp_path, model, None, keep=5)
  _save(checkpoints, 3, [])
  model.release.set()
  with pytest.raises(CheckpointError, match=r"cannot write the checkpoint .*step-3: .*No space "
                     r"left on device.*none \(none was written yet\)"):
    checkpoints.wait()
  assert not list((tmp_path / "checkpoints").glob("*"))  # nothing half written
  checkpoints.wait()  # said once: the error is not raised again
