"""The JAX trainer's state from step to step and across a resume, measured in
one child Python under KERAS_BACKEND=jax (tests/helpers/jax_trainer_checks.py):
the loss is the mean over the batch's real tokens, the dropout random state
moves on every step, an epoch trains its last, partial batch, and a resumed run restores the optimizer, the step and
the dropout state. train.py's JAX runs end to end: tests/backends/test_keras_loop.py."""

import collections
import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from helpers.backends import needs_jax
from helpers.prepared import random_prepared_folder

# A child Python that builds and trains tiny models: about 2 CPU minutes.
pytestmark = [pytest.mark.slow, needs_jax]

REPO_DIR = Path(__file__).resolve().parents[2]


# What each test reads of jax_trainer_checks.py's measurements.
MEASUREMENT = {
    "test_the_loss_is_the_mean_over_the_batchs_real_tokens": "step_on",
    "test_each_step_draws_new_dropout_masks": "dropout",
    "test_an_epoch_trains_its_last_partial_batch": "epoch",
    "test_a_resumed_run_repeats_the_uninterrupted_one": "resume",
    "test_eight_steps_a_dispatch_train_as_one_and_resume_mid_stack": "stacks",
    "test_each_shape_compiles_once_and_says_how_long_it_took": "stacks",
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory, request):
  """The measurements this session's tests of the module read, in one child
  Python: all of them in a whole run, one for a mutation's targeted test (the
  resume alone is most of the child's time)."""
  names = sorted({MEASUREMENT[item.originalname] for item in request.session.items
                  if item.path == request.path})
  folder = tmp_path_factory.mktemp("jax_engine")
  prepared = random_prepared_folder(folder / "prepared")  # 4 steps an epoch
  # Lengths up to 44: with bucketing, batches of 3 shapes.
  varied = random_prepared_folder(folder / "varied", pairs=200, max_length=45)
  # A compilation cache: the resume's three trainers compile the same step (the
  # mutation runner gives one that its runs share).
  cache = os.environ.get("JAX_COMPILATION_CACHE_DIR", str(folder / "jax_compilation_cache"))
  env = {**os.environ, "PYTHONPATH": f"{REPO_DIR}{os.pathsep}{REPO_DIR / 'tests'}",
         "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "2", "JAX_COMPILATION_CACHE_DIR": cache,
         "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
  result = subprocess.run(
      [sys.executable, str(REPO_DIR / "tests" / "helpers" / "jax_trainer_checks.py"),
       str(prepared), str(folder), str(varied), ",".join(names)], cwd=folder, env=env,
      capture_output=True, text=True, timeout=1500, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_loss_is_the_mean_over_the_batchs_real_tokens(measured):
  """The same batch twice over, or with rows of padding, moves the weights as
  the batch alone does (one SGD step): a mean over the real tokens."""
  step = measured["step_on"]
  assert step["largest_change"] > 1e-3, step
  assert step["twice_differs_by"] < 1e-6 and step["padded_differs_by"] < 1e-6, step


def test_each_step_draws_new_dropout_masks(measured):
  """At a learning rate of 0 the weights stay, so two steps on one batch lose
  the same only if they drop the same units."""
  first, second = measured["dropout"]["losses"]
  assert first != second


def test_an_epoch_trains_its_last_partial_batch(measured):
  epoch = measured["epoch"]
  assert epoch["pairs"] % epoch["batch_size"], epoch  # the last batch is partial
  assert epoch["complete"] and epoch["steps"] == -(-epoch["pairs"] // epoch["batch_size"])


def test_a_resumed_run_repeats_the_uninterrupted_one(measured):
  """Weights, Adam's moments and step, and the dropout random state (dropout
  on) are those of the run never stopped, bit for bit."""
  resume = measured["resume"]
  assert resume["steps"] == [4, 4]
  assert resume["differences"] == {"weights": 0.0, "optimizer": 0.0, "non_trainable": 0.0}


def test_eight_steps_a_dispatch_train_as_one_and_resume_mid_stack(measured):
  """An epoch of batches of 3 shapes at 8 steps a dispatch (stacks that the
  shapes' runs do not fill end in inactive steps) leaves the weights, Adam's
  state and the dropout random state of 1 step a dispatch, bit for bit; so
  does a run stopped after 5 steps, mid-stack, and resumed."""
  stacks = measured["stacks"]
  epoch_steps = len(stacks["batches"])
  assert epoch_steps > 8 and stacks["steps"] == [epoch_steps] * 3, stacks
  nothing = {"weights": 0.0, "optimizer": 0.0, "non_trainable": 0.0}
  assert stacks["eight"] == nothing and stacks["resumed"] == nothing, stacks
  assert stacks["record"]["complete"] and stacks["record"]["steps_in_epoch"] == epoch_steps
  # Stacks of 8 that runs of one shape do not fill: some steps were padding.
  assert any(count % 8 for count in collections.Counter(stacks["batches"]).values()), stacks


def test_each_shape_compiles_once_and_says_how_long_it_took(measured):
  """One line per training shape a trainer meets, at 1 and at 8 steps a
  dispatch, that names the shape and the seconds: the run at 8 meets every
  shape, the one stopped after 5 steps those of its first 5 batches, and its
  resumed run those of the rest."""
  stacks = measured["stacks"]
  shapes, batches = stacks["shapes"], stacks["batches"]
  assert len(shapes) == 3, shapes
  lines = stacks["compiled"]
  for shape in shapes:
    once = [line for line in lines if line.startswith(f"compiled the training step for {shape} in ")]
    eight = [line for line in lines
             if line.startswith(f"compiled the training step (8 a dispatch) for {shape} in ")]
    assert len(once) == 1, lines
    assert len(eight) == 1 + (shape in batches[:5]) + (shape in batches[5:]), lines
  assert all(line.endswith(" s") for line in lines), lines
