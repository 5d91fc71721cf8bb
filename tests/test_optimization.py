"""The learning-rate schedule and Adam settings of §5.3."""

import math

import numpy as np
import pytest

import configs.base
import configs.tutorial
from transformer.optimization import WarmupInverseSquareRoot, make_optimizer


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


@pytest.mark.parametrize("config_module", [configs.base, configs.tutorial])
def test_optimizer_uses_the_papers_adam_settings(config_module):
  config = config_module.get_config()
  optimizer = make_optimizer(config)
  assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
  expected = config.model.d_model ** -0.5 * 1 * config.training.warmup_steps ** -1.5
  assert float(optimizer.learning_rate) == pytest.approx(expected, rel=1e-5)
  assert math.isfinite(float(optimizer.learning_rate))
