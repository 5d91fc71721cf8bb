"""The training-time budget (transformer/training/budget.py): whole epochs that fit, the
last ones cooling down. The Trainer running to its plan and keeping it across a
resume: tests/integration/test_trainer_runs.py."""

import pytest

from transformer.training import budget
from transformer.config import ConfigError, validate_config
from transformer.model.optimization import WarmupInverseSquareRoot


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
  """The schedule alone, or with the cooldown ``plan`` has fixed (as the loop gives its engine)."""
  cooldown = (plan.cooldown_steps, plan.cooldown_end_step) if plan else (0, 0)
  return WarmupInverseSquareRoot(64, 4, 1.0, *cooldown)


def test_plan_stays_open_until_the_cooldown_must_begin_then_is_fixed():
  plan = budget.TimeBudget(1, 1 / 3, 100)  # 60 s; epochs of 10 s, 3 steps
  for done in range(1, 5):
    plan.add_seconds(10)
    plan.epoch_end(epochs_done=done, epoch_seconds=10, steps_per_epoch=3, step=3 * done)
    # 6 epochs fit; the last 2 cool down, so the plan is fixed after the 4th.
    assert plan.planned == (6 if done == 4 else 0)
    assert not plan.finished(done)
  assert (plan.cooldown_steps, plan.cooldown_end_step) == (6, 18)
  schedule = _schedule(plan)
  # Saved with the model (Keras serialization) as the values the plan fixed.
  assert WarmupInverseSquareRoot.from_config(schedule.get_config()).get_config() == {
      "d_model": 64, "warmup_steps": 4, "scale": 1.0, "cooldown_steps": 6,
      "cooldown_end_step": 18}
  assert plan.finished(6) and not plan.finished(5)
  # A slower epoch after the plan is fixed changes nothing.
  plan.add_seconds(30)
  plan.epoch_end(epochs_done=5, epoch_seconds=30, steps_per_epoch=3, step=15)
  assert plan.planned == 6
  plain = _schedule()
  assert float(schedule(11)) == float(plain(11))                    # before the cooldown
  assert float(schedule(15)) == pytest.approx(0.5 * float(plain(15)))  # half way down
  assert float(schedule(18)) == 0.0


def test_the_epoch_count_shown_is_unknown_then_estimated_then_fixed():
  """What both trainers label their epochs with: "Epoch 1", "Epoch 2/~6", "Epoch 5/6"."""
  plan = budget.TimeBudget(1, 1 / 3, 100)  # 60 s
  assert plan.epochs(epochs_done=0) == (None, False)
  plan.add_seconds(10)
  plan.epoch_end(epochs_done=1, epoch_seconds=10, steps_per_epoch=3, step=3)
  assert plan.epochs(epochs_done=1) == (6, True)
  for done in range(2, 5):
    plan.add_seconds(10)
    plan.epoch_end(epochs_done=done, epoch_seconds=10, steps_per_epoch=3, step=3 * done)
  assert plan.epochs(epochs_done=4) == (6, False)


def test_a_resumed_run_estimates_from_its_whole_epochs_mean():
  """Right after a resume in epoch 3: of the 44 s used, 14 s went to epoch 3,
  so the 2 whole epochs took 15 s each and the 16 s left fit one more (at
  22 s an epoch, counting epoch 3's part, none would)."""
  plan = budget.TimeBudget(1, 1 / 3, 100)
  plan.used_seconds = 44.0
  assert plan.epochs(epochs_done=2, current_epoch_seconds=14) == (3, True)


def test_a_machine_that_slows_down_ends_without_a_cooldown_and_says_so(caplog):
  plan = budget.TimeBudget(1, 1 / 3, 100)
  plan.add_seconds(10)
  plan.epoch_end(epochs_done=1, epoch_seconds=10, steps_per_epoch=3, step=3)
  assert plan.planned == 0
  plan.add_seconds(45)  # 55 s used: no epoch of 45 s fits any more
  with caplog.at_level("WARNING"):
    plan.epoch_end(epochs_done=2, epoch_seconds=45, steps_per_epoch=3, step=6)
  assert plan.finished(2)
  assert plan.cooldown_steps == 0
  assert float(_schedule(plan)(6)) == float(_schedule()(6))
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
