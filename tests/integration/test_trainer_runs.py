"""The TensorFlowTrainer fitting whole epochs of random batches, in this process
(transformer/training/): a time budget run to its plan and kept across a
resume, an epoch's seconds across a resume, length-grouped and XLA-compiled
steps against plain ones. The parts: tests/unit/test_budget.py,
tests/unit/test_console_plan.py, tests/unit/test_steps.py."""

import json
import os
import signal
import time
import types

import numpy as np
import pytest
import tensorflow as tf

from helpers.fixtures import fixed_epoch_clock
from transformer.training import loop
from transformer.training.tf_engine import TensorFlowTrainer
from transformer.model.optimization import WarmupInverseSquareRoot
from transformer.training import tf_step

VOCAB = 50  # uneven_batch's ids are 1..49
sub_batch = tf_step.sub_batch


# The TensorFlowTrainer with the budget, on synthetic batches: 3 steps per epoch, each
# epoch reported as 10 training seconds, 1 minute of budget, the last third
# cooling down: 6 epochs, the cooldown over steps 12-18.


@pytest.fixture
def budget_run(tiny_config, make_trainer, random_dataset):
  """(``trainer(model_dir)``, the dataset of 3 batches of 2 random pairs)."""
  config = tiny_config(output_weights="untied")
  config.training.update(epochs=100, time_budget_minutes=1.0, cooldown_fraction=1 / 3,
                         warmup_steps=4, checkpoint_every_steps=100)
  dataset = random_dataset(2, rows=6, source_length=9, target_length=10, vocab=50)
  return lambda model_dir: make_trainer(config, (60, 60), model_dir), dataset


@pytest.fixture
def ten_second_epochs(monkeypatch):
  monkeypatch.setattr(loop, "EpochClock", fixed_epoch_clock(lambda epoch: 10.0))


@pytest.mark.slow
def test_trainer_runs_the_epochs_that_fit_and_ends_at_rate_zero(tmp_path, budget_run,
                                                                ten_second_epochs):
  # pylint: disable=unused-argument
  trainer, dataset = budget_run
  result = trainer(tmp_path).fit(lambda epoch: dataset)
  assert (result.epoch, result.step) == (6, 18)
  assert [record["planned_epochs"] for record in result.history] == [6] * 6
  rates = [record["learning_rate"] for record in result.history]
  plain = WarmupInverseSquareRoot(d_model=32, warmup_steps=4)
  assert rates[3] == pytest.approx(float(plain(12)))  # the cooldown starts after epoch 4
  assert rates[4] == pytest.approx(0.5 * float(plain(15)))
  assert rates[5] == 0.0


@pytest.mark.slow
def test_a_resumed_run_keeps_its_plan_and_its_seconds(tmp_path, budget_run, ten_second_epochs):
  # pylint: disable=unused-argument
  trainer, dataset = budget_run

  def stop_in_epoch_5(step, loss):  # pylint: disable=unused-argument
    if step == 14:
      os.kill(os.getpid(), signal.SIGTERM)
  first = trainer(tmp_path)
  stopped = first.fit(lambda epoch: dataset, step_callback=stop_in_epoch_5)
  assert stopped.interrupted_by == signal.SIGTERM and stopped.step == 14
  rate_at_stop = first.learning_rate

  second = trainer(tmp_path)
  assert second.restore() == 14
  assert second.learning_rate == pytest.approx(rate_at_stop)  # the cooldown came back
  result = second.fit(lambda epoch: dataset)
  assert (result.epoch, result.step) == (6, 18)
  assert result.history[-1]["learning_rate"] == 0.0
  # 4 whole epochs, the cut one, and the two finished here: 70 s.
  assert second.budget.used_seconds == 70.0


@pytest.mark.slow
def test_an_epochs_seconds_are_its_wall_time_across_a_resume(tmp_path, monkeypatch):
  # The loop's clock (summaries.EpochClock) jumps 1000 s inside the first run's part of epoch 1;
  # the resumed run's record of that epoch must hold them.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from configs import tiny  # pylint: disable=g-import-not-at-top
  from transformer.training.tf_engine import TensorFlowTrainer  # pylint: disable=g-import-not-at-top
  from transformer.training import summaries  # pylint: disable=g-import-not-at-top
  offset = [0.0]
  monkeypatch.setattr(summaries, "time",
                      types.SimpleNamespace(monotonic=lambda: time.monotonic() + offset[0]))
  config = tiny.get_config()
  config.model.output_weights = "untied"
  config.training.update(epochs=1, warmup_steps=4, checkpoint_every_steps=100)
  rng = np.random.default_rng(0)
  source, target = rng.integers(4, 50, (8, 9)), rng.integers(4, 50, (8, 10))
  dataset = tf.data.Dataset.from_tensor_slices(
      ((source, target[:, :-1]), target[:, 1:])).batch(2)

  def make():
    return TensorFlowTrainer(config, input_vocab_size=60, target_vocab_size=60,
                            model_dir=tmp_path, progress=False)

  def stop_at_step_2(step, loss):  # pylint: disable=unused-argument
    if step == 1:
      offset[0] += 1000.0
    if step == 2:
      os.kill(os.getpid(), signal.SIGTERM)
  stopped = make().fit(lambda epoch: dataset, step_callback=stop_at_step_2)
  assert stopped.interrupted_by == signal.SIGTERM and not stopped.history
  resumed = make()
  assert resumed.restore() == 2
  (record,) = resumed.fit(lambda epoch: dataset).history
  assert record["complete"] and record["steps_in_epoch"] == 4
  assert 1000.0 < record["seconds"] < 1000.0 + 600, record
  logged = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
  assert logged["seconds"] == record["seconds"]


# Length groups and XLA: the same training as plain steps.


@pytest.mark.slow
def test_trainer_steps_with_groups_match_whole_batches(tiny_config, make_trainer, uneven_batch,
                                                      monkeypatch):
  config = tiny_config(dropout_rate=0.0)
  dataset = tf.data.Dataset.from_tensors(
      ((uneven_batch[0], uneven_batch[1]), uneven_batch[2])).repeat(3)
  traced_sub_batches = []
  monkeypatch.setattr(tf_step, "sub_batch", lambda *args: traced_sub_batches.append(args[-1])
                      or sub_batch(*args))
  losses = {}
  for groups in (1, 2):
    config.training.length_groups = groups
    trainer = make_trainer(config, (VOCAB, VOCAB))
    losses[groups] = [r["loss"] for r in trainer.engine.train_on_batches(dataset)]
  # The grouped TensorFlowTrainer did split its batches, in a loop traced once.
  assert len(traced_sub_batches) == 1
  np.testing.assert_allclose(losses[2], losses[1], rtol=1e-4)
  assert losses[1][2] < losses[1][0]  # Three real updates, not the same step thrice.


@pytest.mark.slow
def test_xla_compiled_steps_match_plain_steps(tiny_config, make_trainer, uneven_batch):
  # train.py --jit_compile, the other speed switch: the same losses and weights.
  config = tiny_config(dropout_rate=0.0)
  config.training.length_groups = 1
  dataset = tf.data.Dataset.from_tensors(
      ((uneven_batch[0], uneven_batch[1]), uneven_batch[2])).repeat(3)
  losses, logits = {}, {}
  for jit_compile in (False, True):
    trainer = make_trainer(config, (VOCAB, VOCAB), jit_compile=jit_compile)
    losses[jit_compile] = [r["loss"] for r in trainer.engine.train_on_batches(dataset)]
    logits[jit_compile] = trainer.model((uneven_batch[0], uneven_batch[1]), training=False).numpy()
  np.testing.assert_allclose(losses[True], losses[False], rtol=1e-4)
  assert losses[False][2] < losses[False][0]
  # Compared through the trained model's logits, not weight by weight: Adam
  # moves a weight whose gradient is ~0 by about the learning rate either way.
  np.testing.assert_allclose(logits[True], logits[False], rtol=1e-3, atol=1e-3)
