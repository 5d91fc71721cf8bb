"""The training-time budget (transformer/training/budget.py): whole epochs that fit, the
last ones cooling down, the plan kept across a resume."""

import os
import signal

import pytest

from transformer.training import budget
from transformer.training.trainer import Trainer
from transformer.config import ConfigError, validate_config
from transformer.optimization import WarmupInverseSquareRoot


@pytest.mark.parametrize("used, done, per_epoch, max_epochs, expected", [
    (10, 1, 10, 100, 6),    # 50 s left: 5 more epochs of 10 s
    (41, 4, 10, 100, 5),    # 19 s left: 1 more whole epoch
    (70, 7, 10, 100, 7),    # over the budget: none more
    (10, 1, 10, 3, 3),      # the configured epochs cap the plan
])
def test_planned_epochs_counts_whole_epochs_that_fit(used, done, per_epoch, max_epochs,
                                                     expected):
  assert budget.planned_epochs(60, used, done, per_epoch, max_epochs) == expected


@pytest.mark.parametrize("total, fraction, expected", [
    (12, 1 / 3, 4), (11, 1 / 3, 4), (6, 1 / 3, 2), (1, 1 / 3, 1), (12, 0.0, 0), (0, 0.5, 0)])
def test_cooldown_epochs_round_up(total, fraction, expected):
  assert budget.cooldown_epochs(total, fraction) == expected


def _schedule(plan=None):
  """The schedule alone, or with ``plan``'s cooldown variables."""
  cooldown = (plan.cooldown_steps, plan.cooldown_end_step) if plan else (0, 0)
  return WarmupInverseSquareRoot(64, 4, 1.0, *cooldown)


def test_plan_stays_open_until_the_cooldown_must_begin_then_is_fixed():
  plan = budget.TimeBudget(1, 1 / 3, 100)  # 60 s; epochs of 10 s, 3 steps
  schedule = _schedule(plan)
  for done in range(1, 5):
    plan.add_seconds(10)
    plan.epoch_end(epochs_done=done, epoch_seconds=10, steps_per_epoch=3, step=3 * done)
    # 6 epochs fit; the last 2 cool down, so the plan is fixed after the 4th.
    assert int(plan.planned.numpy()) == (6 if done == 4 else 0)
    assert not plan.finished(done)
  assert (int(schedule.cooldown_steps.numpy()), int(schedule.cooldown_end_step.numpy())) == (6, 18)
  # Saved with the model (Keras serialization) as the values the plan fixed.
  assert WarmupInverseSquareRoot.from_config(schedule.get_config()).get_config() == {
      "d_model": 64, "warmup_steps": 4, "scale": 1.0, "cooldown_steps": 6,
      "cooldown_end_step": 18}
  assert plan.finished(6) and not plan.finished(5)
  # A slower epoch after the plan is fixed changes nothing.
  plan.add_seconds(30)
  plan.epoch_end(epochs_done=5, epoch_seconds=30, steps_per_epoch=3, step=15)
  assert int(plan.planned.numpy()) == 6
  plain = _schedule()
  assert float(schedule(11)) == float(plain(11))                    # before the cooldown
  assert float(schedule(15)) == pytest.approx(0.5 * float(plain(15)))  # half way down
  assert float(schedule(18)) == 0.0


def test_a_machine_that_slows_down_ends_without_a_cooldown_and_says_so(caplog):
  plan = budget.TimeBudget(1, 1 / 3, 100)
  schedule = _schedule(plan)
  plan.add_seconds(10)
  plan.epoch_end(epochs_done=1, epoch_seconds=10, steps_per_epoch=3, step=3)
  assert int(plan.planned.numpy()) == 0
  plan.add_seconds(45)  # 55 s used: no epoch of 45 s fits any more
  with caplog.at_level("WARNING"):
    plan.epoch_end(epochs_done=2, epoch_seconds=45, steps_per_epoch=3, step=6)
  assert plan.finished(2)
  assert int(schedule.cooldown_steps.numpy()) == 0
  assert float(schedule(6)) == float(_schedule()(6))
  assert "used up after 2 epochs, before a cooldown could begin" in caplog.text


@pytest.mark.parametrize("field, value, message", [
    ("time_budget_minutes", -1.0, r"time_budget_minutes: must be >= 0"),
    ("cooldown_fraction", 1.0, r"cooldown_fraction: must be in \[0, 1\)"),
    ("train_steps", 100, r"time_budget_minutes: plans the run's length"),
    ("cooldown_steps", 10, r"time_budget_minutes: plans the run's length"),
])
def test_contradictory_budget_settings_are_refused(field, value, message):
  from configs import tiny  # pylint: disable=g-import-not-at-top
  config = tiny.get_config()
  config.training.time_budget_minutes = 1.0
  config.training.cooldown_end_step = 20
  config.training[field] = value
  with pytest.raises(ConfigError, match=message):
    validate_config(config)


def test_turning_the_budget_on_or_off_is_a_resume_difference():
  from transformer.config import default_config, resume_differences  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  stored = json.loads(default_config().to_json_best_effort())
  current = json.loads(default_config().to_json_best_effort())
  current["training"]["time_budget_minutes"] = 115.0
  assert resume_differences(stored, current, built_tokenizer=False) == [
      "field training.time_budget_minutes was 0.0, now 115.0"]


# The Trainer with the budget, on synthetic batches: 3 steps per epoch, each
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
  run_epoch = Trainer._run_epoch  # pylint: disable=protected-access

  def timed(self, *args, **kwargs):
    record, _ = run_epoch(self, *args, **kwargs)
    record["seconds"] = 10.0
    return record, 10.0
  monkeypatch.setattr(Trainer, "_run_epoch", timed)


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
  assert float(second._budget.used_seconds.numpy()) == 70.0  # pylint: disable=protected-access
