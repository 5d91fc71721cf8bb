"""Checkpoints on a small Keras model: the position they hold, restore, no folder, a lost index."""

import pytest

from helpers.checkpoints import small_checkpoints


def _restored(model_dir):
  """(step, epoch, step_in_epoch, weights) of the latest checkpoint in ``model_dir``."""
  checkpoints, model, optimizer, (epoch, step_in_epoch, _) = small_checkpoints(model_dir)
  step = checkpoints.restore()
  assert step == int(optimizer.iterations.numpy())
  return step, int(epoch.numpy()), int(step_in_epoch.numpy()), model.get_weights()


def test_a_checkpoint_holds_its_position(tmp_path):
  checkpoints, model, optimizer, (epoch, step_in_epoch, _) = small_checkpoints(tmp_path)
  optimizer.iterations.assign(7)
  step_in_epoch.assign(7)
  saved = model.get_weights()
  path = checkpoints.save()
  assert path.endswith("ckpt-7") and checkpoints.latest() == path
  step, *position, weights = _restored(tmp_path)
  assert (step, *position) == (7, 0, 7)
  assert all((got == want).all() for got, want in zip(weights, saved))
  # The end of the epoch: the same step at another position replaces it.
  model.set_weights([w + 1 for w in saved])
  epoch.assign(1)
  step_in_epoch.assign(0)
  assert checkpoints.save() == path
  step, *position, weights = _restored(tmp_path)
  assert (step, *position) == (7, 1, 0)
  assert all((got == want + 1).all() for got, want in zip(weights, saved))


def test_without_a_model_dir_nothing_is_kept(tmp_path):
  checkpoints = small_checkpoints(None)[0]
  assert checkpoints.save() is None and checkpoints.latest() is None
  assert checkpoints.restore() == 0


def test_checkpoint_files_without_an_index_are_resumed_from(tmp_path):
  """A lost 'checkpoint' index file loses nothing: the files are listed again (#32)."""
  checkpoints, _, optimizer, _ = small_checkpoints(tmp_path)
  optimizer.iterations.assign(7)
  checkpoints.save()
  (tmp_path / "checkpoints" / "checkpoint").unlink()
  assert _restored(tmp_path)[0] == 7
  assert (tmp_path / "checkpoints" / "checkpoint").is_file()


def test_checkpoints_of_both_trainers_are_named_and_numbered():
  from transformer.run.checkpoint_files import checkpoint_name, checkpoint_step  # pylint: disable=g-import-not-at-top
  # train.py's tf.train.Checkpoint prefix, and the JAX path's weights file.
  assert checkpoint_name("run/checkpoints/ckpt-30") == "ckpt-30"
  assert checkpoint_step("run/checkpoints/ckpt-30") == 30
  assert checkpoint_name("run/checkpoints/step-12/model.weights.h5") == "step-12"
  assert checkpoint_step("run/checkpoints/step-12/model.weights.h5") == 12
