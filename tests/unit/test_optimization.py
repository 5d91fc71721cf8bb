"""The learning-rate schedule and Adam settings of §5.3."""

import math
import re

import keras
import numpy as np
import pytest

import configs.base
import configs.tiny
import configs.tutorial
from transformer.config import ConfigError, validate_config
from transformer.model.optimization import WarmupInverseSquareRoot, cooldown_mismatch, make_optimizer


@pytest.mark.parametrize("step, expected", [
    # 512^-0.5 * step * 4000^-1.5 during warm-up ...
    (1, 0.04419417 * 1 * 3.952847e-06),
    (2000, 0.04419417 * 2000 * 3.952847e-06),
    # ... the peak at step = warmup_steps ...
    (4000, 0.04419417 / 63.245553),
    # ... then 512^-0.5 * step^-0.5.
    (16000, 0.04419417 / 126.491106),
    (100000, 0.04419417 / 316.227766),
])
def test_schedule_matches_hand_computed_values(step, expected):
  schedule = WarmupInverseSquareRoot(d_model=512, warmup_steps=4000)
  # The optimizer passes its iteration count, which is step - 1.
  assert float(schedule(step - 1)) == pytest.approx(expected, rel=1e-5)


def test_schedule_peaks_at_warmup():
  schedule = WarmupInverseSquareRoot(d_model=128, warmup_steps=4000)
  rates = np.array([float(schedule(i)) for i in range(0, 20000, 50)])
  assert np.argmax(rates) * 50 + 1 == pytest.approx(4000, abs=50)
  assert rates.max() == pytest.approx(128 ** -0.5 * 4000 ** -0.5, rel=1e-3)


def test_scale_multiplies_the_whole_schedule():
  plain = WarmupInverseSquareRoot(d_model=256, warmup_steps=100)
  scaled = WarmupInverseSquareRoot(d_model=256, warmup_steps=100, scale=2.5)
  for iteration in (0, 50, 99, 1000):
    assert float(scaled(iteration)) == pytest.approx(2.5 * float(plain(iteration)), rel=1e-6)


def test_optimizer_takes_the_configured_scale():
  config = configs.base.get_config()
  config.training.learning_rate_scale = 3.0
  expected = 3.0 * config.model.d_model ** -0.5 * config.training.warmup_steps ** -1.5
  assert float(make_optimizer(config).learning_rate) == pytest.approx(expected, rel=1e-5)


def test_schedule_round_trips_through_its_config():
  schedule = WarmupInverseSquareRoot(d_model=256, warmup_steps=100, scale=1.7)
  clone = WarmupInverseSquareRoot.from_config(schedule.get_config())
  assert float(clone(37)) == float(schedule(37))


def test_cooldown_falls_linearly_to_zero_at_its_end_step():
  plain = WarmupInverseSquareRoot(d_model=256, warmup_steps=100, scale=2.0)
  cooled = WarmupInverseSquareRoot(d_model=256, warmup_steps=100, scale=2.0,
                                   cooldown_steps=400, cooldown_end_step=1000)
  # The paper's rate until the cooldown starts ...
  for iteration in (0, 99, 350, 600):
    assert float(cooled(iteration)) == pytest.approx(float(plain(iteration)), rel=1e-6)
  # ... then the paper's rate times the fraction of the cooldown left ...
  for iteration, left in ((700, 0.75), (900, 0.25), (999, 1 / 400)):
    assert float(cooled(iteration)) == pytest.approx(left * float(plain(iteration)), rel=1e-5)
  # ... and nothing from the end step on.
  assert float(cooled(1000)) == 0.0 and float(cooled(5000)) == 0.0


def test_cooldown_round_trips_and_reaches_the_optimizer():
  config = configs.tiny.get_config()
  config.training.cooldown_steps, config.training.cooldown_end_step = 30, 50
  # The optimizer's own config holds the schedule, as a saved optimizer does.
  clone = keras.optimizers.schedules.deserialize(make_optimizer(config).get_config()["learning_rate"])
  assert (clone.cooldown_steps, clone.cooldown_end_step) == (30, 50)
  assert float(clone(35)) == pytest.approx(
      0.5 * float(WarmupInverseSquareRoot(config.model.d_model, config.training.warmup_steps,
                                          config.training.learning_rate_scale)(35)), rel=1e-5)


@pytest.mark.parametrize("cooldown", [(0, 0), (3000, 9000), (500, 700)])
def test_the_rate_on_the_host_is_the_schedules(cooldown):
  """The JAX trainer's console and TensorBoard rate (plain Python) is the
  schedule's ``keras.ops`` rate at every step: warm-up, peak, decay, cooldown
  and the zeros after it."""
  schedule = WarmupInverseSquareRoot(d_model=128, warmup_steps=400, scale=1.3,
                                     cooldown_steps=cooldown[0], cooldown_end_step=cooldown[1])
  iterations = np.arange(0, 12000, 7)
  expected = keras.ops.convert_to_numpy(schedule(iterations))
  on_host = np.array([schedule.rate_on_host(int(i)) for i in iterations])
  np.testing.assert_allclose(on_host, expected, rtol=1e-6, atol=1e-12)
  assert (on_host == 0).sum() == (expected == 0).sum()


def test_cooldown_end_step_before_its_length_is_refused():
  config = configs.tiny.get_config()
  config.training.cooldown_steps, config.training.cooldown_end_step = 300, 200
  with pytest.raises(ConfigError, match=r"config\.training\.cooldown_end_step: 200 must be >= "
                     r"cooldown_steps=300"):
    validate_config(config)


@pytest.mark.parametrize("epochs, train_steps, cooldown_end_step, message", [
    (3, 0, 30, None),                       # 3 epochs of 10 steps end at step 30
    (3, 25, 25, None),                      # train_steps, when set, is the run's length
    (4, 0, 30, r"is 30 but this run ends at step 40 \(10 steps per epoch\): the steps "
               r"after the cooldown train at a learning rate of 0"),
    (2, 0, 30, r"ends at step 20 .*: the run stops before the rate reaches 0"),
])
def test_cooldown_mismatch_says_where_the_run_ends(epochs, train_steps, cooldown_end_step,
                                                   message):
  training = configs.tiny.get_config().training
  training.epochs, training.train_steps = epochs, train_steps
  training.cooldown_steps, training.cooldown_end_step = 10, cooldown_end_step
  found = cooldown_mismatch(training, steps_per_epoch=10)
  if message is None:
    assert found is None
  else:
    assert found is not None and re.search(message, found), found


def test_no_cooldown_never_mismatches():
  training = configs.tiny.get_config().training
  assert training.cooldown_steps == 0
  assert cooldown_mismatch(training, steps_per_epoch=7) is None



@pytest.mark.parametrize("config_module", [configs.base, configs.tutorial])
def test_optimizer_uses_the_papers_adam_settings(config_module):
  config = config_module.get_config()
  optimizer = make_optimizer(config)
  assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
  expected = config.model.d_model ** -0.5 * 1 * config.training.warmup_steps ** -1.5
  assert float(optimizer.learning_rate) == pytest.approx(expected, rel=1e-5)
  assert math.isfinite(float(optimizer.learning_rate))
