"""The training loop (transformer/training/loop.py) over a fake engine: what it
owns for both engines, tested once. The checkpoint cadence, the order of an
epoch's record and its checkpoint (one crash-safety protocol for
metrics.jsonl), reading a chunk's sums a chunk late, the NaN/Inf stop and a
resume in the middle of an epoch. The real engines under it:
tests/integration/test_training.py, tests/backends/test_keras_loop.py."""

import copy
import json
import math
import os
import re
import signal

import ml_collections
import pytest

from transformer.model import losses
from transformer.run.errors import NonFiniteLossError, TrainingError
from transformer.training import loop


class FakeEngine:
  """Batches are numbers; batch ``b`` has loss sum ``b``, 1 token, 1 correct.
  A chunk is ``steps_per_chunk`` batches; what happens is logged in ``events``."""

  def __init__(self, steps_per_chunk=1, nan_at_step=None):
    self.model, self.events, self.saved = None, [], []
    self._step, self._size, self._nan_at = 0, steps_per_chunk, nan_at_step

  @property
  def step(self):
    return self._step

  def learning_rate(self, step):
    return 1.0 / (step + 1)

  def describe(self):
    return "a fake device"

  def epoch_batches(self, train_data, epoch, skip, length):
    del length
    batches, size = train_data(epoch), self._size

    class Batches:
      length = len(batches)

      def chunks(self, last):
        for first in range(skip, last, size):
          chunk = batches[first:min(first + size, last)]
          yield len(chunk), chunk
    return Batches()

  def train(self, chunk):
    self._step += len(chunk)
    nan = self._nan_at is not None and self._step - len(chunk) < self._nan_at <= self._step
    self.events.append(("train", self._step))
    return (self._step, [math.nan if nan else float(b) for b in chunk])

  def read(self, trained):
    self.events.append(("read", [step for step, _ in trained]))
    return [(sum(values), float(len(values)), float(len(values))) for _, values in trained]

  def non_finite(self, trained):
    _, values = trained
    bad = next(i for i, v in enumerate(values) if not math.isfinite(v))
    return bad, values[bad]

  def evaluate(self, validation):
    return losses.TokenMetrics(2.0, 4.0, 1.0)

  def set_cooldown(self, steps, end_step):
    self.events.append(("cooldown", steps, end_step))

  def agree(self, seconds):
    return seconds

  def save(self, state):
    self.events.append(("save", state["step"]))
    self.saved.append(copy.deepcopy(state))

  def restore(self):
    if not self.saved:
      return None
    self._step = self.saved[-1]["step"]
    return copy.deepcopy(self.saved[-1])

  def latest_checkpoint(self):
    return f"step-{self.saved[-1]['step']}" if self.saved else None

  def poll(self):
    pass

  def finish(self):
    pass


def config(**training):
  return ml_collections.ConfigDict({"training": {
      "train_steps": 0, "epochs": 2, "time_budget_minutes": 0.0, "cooldown_fraction": 0.0,
      "checkpoint_every_steps": 4, "cooldown_steps": 0, "cooldown_end_step": 0, **training}})


def six_batches(epoch):
  return [10 * epoch + b for b in range(1, 7)]


def test_checkpoints_come_an_interval_after_the_last_and_at_each_epochs_end(tmp_path):
  engine = FakeEngine()
  result = loop.Trainer(config(), engine, model_dir=tmp_path, progress=False).fit(six_batches)
  assert (result.step, result.epoch) == (12, 2)
  # Step 4 (the interval), 6 (epoch 1's end), 10 (4 after it), 12 (epoch 2's end).
  assert [e[1] for e in engine.events if e[0] == "save"] == [4, 6, 10, 12]


def test_a_position_is_saved_once(tmp_path):
  engine = FakeEngine()
  trainer = loop.Trainer(config(epochs=1), engine, model_dir=tmp_path, progress=False)
  trainer.fit(six_batches)
  trainer.save_checkpoint()  # the epoch's close saved this position
  resumed = loop.Trainer(config(epochs=1), engine, model_dir=tmp_path, progress=False)
  assert resumed.restore() == 6
  resumed.save_checkpoint()  # nor is a restored one written again
  assert [e[1] for e in engine.events if e[0] == "save"] == [4, 6]
  # The same step at another position is.
  resumed.epoch, resumed.step_in_epoch = 1, 2
  resumed.save_checkpoint()
  assert [e[1] for e in engine.events if e[0] == "save"] == [4, 6, 6]


def test_the_record_is_written_before_the_checkpoint_that_closes_its_epoch(tmp_path):
  engine = FakeEngine()
  records_at_save = []
  save = engine.save

  def save_and_look(state):
    path = tmp_path / "metrics.jsonl"
    records_at_save.append(len(path.read_text().splitlines()) if path.exists() else 0)
    save(state)
  engine.save = save_and_look
  loop.Trainer(config(), engine, model_dir=tmp_path, progress=False).fit(six_batches)
  assert records_at_save == [0, 1, 1, 2]  # each epoch's close sees its own record


def test_a_kill_between_the_record_and_the_checkpoint_redoes_the_epochs_end_once(tmp_path):
  engine = FakeEngine()
  loop.Trainer(config(epochs=1), engine, model_dir=tmp_path, progress=False).fit(six_batches)
  engine.saved.pop()  # the kill came before epoch 1's closing checkpoint
  resumed = loop.Trainer(config(epochs=1), engine, model_dir=tmp_path, progress=False)
  assert resumed.restore() == 4
  resumed.fit(six_batches)
  records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [(r["epoch"], r["step"], r["train_loss"]) for r in records] == [(1, 6, 3.5)]


def test_a_chunks_sums_are_read_once_the_next_is_dispatched():
  engine = FakeEngine(steps_per_chunk=2)
  loop.Trainer(config(epochs=1, checkpoint_every_steps=100), engine,
               progress=False).fit(six_batches)
  # The first chunk is read after the second is dispatched; the last at once.
  assert engine.events[:6] == [("train", 2), ("read", []), ("train", 4), ("read", [2]),
                               ("train", 6), ("read", [4, 6])]


def test_a_stop_mid_epoch_then_a_resume_trains_the_batches_left_once(tmp_path):
  straight = loop.Trainer(config(epochs=1), FakeEngine(), model_dir=tmp_path / "straight",
                          progress=False).fit(six_batches)
  engine = FakeEngine()
  stopped = loop.Trainer(config(epochs=1), engine, model_dir=tmp_path / "run", progress=False)
  result = stopped.fit(six_batches, step_callback=lambda step, loss: step == 3 and os.kill(
      os.getpid(), signal.SIGTERM))
  assert (result.interrupted_by, result.step, result.history) == (signal.SIGTERM, 3, [])
  assert engine.saved[-1]["step_in_epoch"] == 3
  resumed = loop.Trainer(config(epochs=1), engine, model_dir=tmp_path / "run", progress=False)
  assert resumed.restore() == 3
  (record,) = resumed.fit(six_batches).history
  assert [e for e in engine.events if e[0] == "train"][3:] == [("train", 4), ("train", 5),
                                                              ("train", 6)]
  for name in ("step", "steps_in_epoch", "train_loss", "train_accuracy", "complete"):
    assert record[name] == straight.history[0][name], name


def test_a_non_finite_loss_stops_before_any_save_naming_its_step():
  engine = FakeEngine(steps_per_chunk=2, nan_at_step=3)
  with pytest.raises(NonFiniteLossError, match=r"is nan at step 3 \(epoch 1\)"):
    loop.Trainer(config(checkpoint_every_steps=100), engine, progress=False).fit(six_batches)
  assert engine.saved == []


def test_off_a_terminal_a_line_every_log_every_steps(capsys):
  """stdout in a pipe (pytest's capture): a plain line at steps 4 and 8 of the
  12, none on the epochs' last steps, where the summaries come."""
  loop.Trainer(config(), FakeEngine(), log_every_steps=4).fit(six_batches)
  lines = capsys.readouterr().out.splitlines()
  assert [line.split(" Epoch")[0] for line in lines if line.startswith("step ")] == [
      "step 4", "step 8"]
  assert "\r" not in "".join(lines) and "[" not in "".join(
      line for line in lines if line.startswith("step "))
  assert re.match(r"step 4 Epoch 1/2 4/6 .*ETA .*\| loss 2\.5000 acc 1\.0000", lines[0])


@pytest.mark.parametrize("stopped_at", [3, 6])
def test_a_resume_on_data_of_another_epoch_length_is_refused(tmp_path, stopped_at):
  """Another --train_examples: the epoch stopped at batch 3 (or ended at 6) had
  6 batches, the data now gives 5; training on would skip or repeat batches."""
  engine = FakeEngine()
  loop.Trainer(config(epochs=2, train_steps=stopped_at), engine, model_dir=tmp_path,
               progress=False).fit(six_batches)
  resumed = loop.Trainer(config(epochs=2), engine, model_dir=tmp_path, progress=False)
  assert resumed.restore() == stopped_at
  with pytest.raises(TrainingError, match=r"^the training data gives 5 batches an epoch, and "
                                          r"this run had 6 \(its checkpoint is at batch "):
    resumed.fit(lambda epoch: six_batches(epoch)[:5])
  assert engine.step == stopped_at


def test_without_the_tensorboard_package_training_goes_on_without_scalars(
    tmp_path, monkeypatch, caplog):
  """An accelerator machine with Keras and JAX alone: one warning, no logs/, the
  records and checkpoints as ever."""
  import builtins  # pylint: disable=g-import-not-at-top
  real_import = builtins.__import__

  def no_tensorboard(name, *args, **kwargs):
    if name.startswith("tensorboard"):
      raise ImportError(f"No module named {name!r}")
    return real_import(name, *args, **kwargs)
  monkeypatch.setattr(builtins, "__import__", no_tensorboard)
  with caplog.at_level("WARNING"):
    result = loop.Trainer(config(), FakeEngine(), model_dir=tmp_path, log_every_steps=1,
                          progress=False).fit(six_batches, validation=[])
  assert result.step == 12 and "no TensorBoard scalars: the tensorboard package" in caplog.text
  assert not (tmp_path / "logs").exists() and (tmp_path / "metrics.jsonl").is_file()
