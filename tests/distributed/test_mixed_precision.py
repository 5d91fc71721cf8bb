"""Mixed precision on two replicas equals one device, overflow included (issue #14).

Dynamic loss scaling (``mixed_float16``) skips a step whose float16 gradients
overflow and halves the loss scale. Under ``MirroredStrategy`` the decision must
be the one of the SUMMED gradients, the same on every replica: when only one
replica overflows, the step must still be skipped everywhere.

One subprocess per policy (two logical CPU devices must be set up before
TensorFlow initializes its devices, and a second ``MirroredStrategy`` in one
process collides on collective keys) trains, for each output layer (tied,
shared, untied), a one-device and a two-replica ``TensorFlowTrainer`` from the same
weights on the same three global batches:

1. a normal step;
2. a step whose first half (replica 0) holds no real target token, so that its
   gradients are exactly zero and cannot overflow, while the second half
   (replica 1) overflows under a forced loss scale of 2**30 (float16 only);
3. a normal step, back at the initial loss scale.
"""

import json

import numpy as np
import pytest

from helpers.replica_scripts import SMALL_CONFIG, TWO_CPU_DEVICES, script_output, start_script

pytestmark = pytest.mark.slow

OUTPUT_WEIGHTS = ("tied", "shared", "untied")
FORCED_SCALE = 2.0 ** 30
# The two runs round differently (each replica sums its half of the batch in
# low precision before the float32 all-reduce), so their updates agree only up
# to the policy's precision: 32 unit roundoffs (2**-11 for float16, 2**-8 for
# bfloat16) of a weight's largest update, for gradients that are sums of many
# rounded, partly cancelling terms (seen: up to 18 for float16, 5 for
# bfloat16). A loss normalized per replica changes the updates by far more.
TOLERANCE = {"mixed_float16": 32 * 2.0 ** -11, "mixed_bfloat16": 32 * 2.0 ** -8}
# Wall time: a two-replica step's first trace can take minutes on a loaded core.
TIMEOUT = 1200

_SCRIPT = TWO_CPU_DEVICES + SMALL_CONFIG + """
import json
import sys
import numpy as np

POLICY, FORCED_SCALE = sys.argv[1], float(sys.argv[2])


def config(output_weights):
  c = small_config()
  c.model.output_weights = output_weights
  c.data.vocabulary = "joint"  # needed by output_weights="shared"
  # Adam divides by |gradient| + epsilon: with the paper's 1e-9 a gradient
  # element that is rounding noise (near 0) gets a full +-lr step whose sign
  # depends on the rounding. epsilon = 1 keeps these first updates about
  # lr * gradient, so rounding differences stay rounding-sized.
  c.training.adam_epsilon = 1.0
  return c


def batch(seed, target_lengths):
  # Rows 0-1 go to replica 0, rows 2-3 to replica 1.
  rng = np.random.default_rng(seed)
  source = rng.integers(4, VOCAB, size=(4, 7))
  target = np.zeros((4, 8), np.int64)
  target[:, 0] = 2  # a start token on every row, so every row has an input
  for row, n in enumerate(target_lengths):
    target[row, 1:n + 1] = rng.integers(4, VOCAB, size=n)
  return ((source, target[:, :-1]), target[:, 1:])


BATCHES = [batch(0, [6, 5, 2, 1]), batch(1, [0, 0, 7, 6]), batch(2, [1, 2, 5, 7])]
SPEC = ((tf.TensorSpec([None, None], tf.int64),) * 2, tf.TensorSpec([None, None], tf.int64))


def dataset(b):
  return tf.data.Dataset.from_generator(lambda: iter([b]), output_signature=SPEC)


def replica_weights(trainer):
  # [replica][weight]: every replica's own copy.
  per_weight = [[v.numpy() for v in trainer.engine.strategy.experimental_local_results(w.value)]
                for w in trainer.model.trainable_weights]
  return [list(r) for r in zip(*per_weight)]


def scale(trainer):
  opt = trainer.engine.optimizer
  return float(opt.dynamic_scale.numpy()) if hasattr(opt, "dynamic_scale") else None


def step(trainer, b):
  return trainer.engine.train_on_batches(dataset(b))[0]["loss"]


mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
out = {}
for output_weights in ("tied", "shared", "untied"):
  initial = None
  for name, strategy in (("one", None), ("two", mirrored)):
    trainer = TensorFlowTrainer(config(output_weights), input_vocab_size=VOCAB,
                      target_vocab_size=VOCAB, strategy=strategy,
                      mixed_precision=POLICY, progress=False)
    if initial is None:
      initial = trainer.model.get_weights()
    trainer.model.set_weights(initial)
    losses = [step(trainer, BATCHES[0])]
    before = replica_weights(trainer)
    if scale(trainer) is not None:
      trainer.engine.optimizer.dynamic_scale.assign(FORCED_SCALE)
    losses.append(step(trainer, BATCHES[1]))
    after = replica_weights(trainer)
    record = {
        "overflow_step": trainer.step, "overflow_scale": scale(trainer),
        "moved_in_overflow_step": [
            sum(not np.array_equal(a, b) for a, b in zip(rb, ra))
            for rb, ra in zip(before, after)],
        "finite_after_overflow": [all(np.isfinite(w).all() for w in r) for r in after]}
    if scale(trainer) is not None:
      trainer.engine.optimizer.dynamic_scale.assign(trainer.engine.optimizer.initial_scale)
    losses.append(step(trainer, BATCHES[2]))
    final = replica_weights(trainer)
    record.update(losses=losses, final_step=trainer.step,
                  names=[w.path for w in trainer.model.trainable_weights])
    out[f"{output_weights}_{name}"] = record
    for replica, weights in enumerate(final):
      np.savez(f"{output_weights}_{name}_{replica}.npz", *weights)
  np.savez(f"{output_weights}_initial.npz", *initial)
with open("out.json", "w") as f:
  json.dump(out, f)
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """policy -> (folder, records): the policy's runs, each made once per module."""
  done = {}

  def run(policy):
    if policy not in done:
      work = tmp_path_factory.mktemp(policy)
      script_output(start_script(_SCRIPT, work, policy, str(FORCED_SCALE)), TIMEOUT,
                    f"the {policy} runs")
      done[policy] = work, json.loads((work / "out.json").read_text())
    return done[policy]
  return run


def _assert_two_replicas_match_one_device(work, out, policy, output_weights):
  """Losses, and every replica's weight updates, equal one device's."""
  one, two = out[f"{output_weights}_one"], out[f"{output_weights}_two"]
  where = f"{policy}, output_weights={output_weights}"
  tolerance = TOLERANCE[policy]
  assert all(np.isfinite(two["losses"])), where
  np.testing.assert_allclose(two["losses"], one["losses"], rtol=tolerance, err_msg=where)
  initial = np.load(work / f"{output_weights}_initial.npz")
  single = np.load(work / f"{output_weights}_one_0.npz")
  for replica in (0, 1):
    weights = np.load(work / f"{output_weights}_two_{replica}.npz")
    assert len(weights.files) == len(single.files) == len(one["names"]) > 10, where
    for i, name in enumerate(one["names"]):
      key = f"arr_{i}"
      assert np.isfinite(weights[key]).all(), f"{where}, replica {replica}: {name}"
      update = single[key] - initial[key]
      if name.endswith("key/bias"):
        continue  # softmax ignores it: its update is float noise (test_distribute)
      assert np.abs(update).max() > 0, f"{where}: {name} never moved"
      np.testing.assert_allclose(
          weights[key] - initial[key], update, rtol=0,
          atol=tolerance * np.abs(update).max(),
          err_msg=f"{where}, replica {replica}: {name}")


@pytest.mark.parametrize("output_weights", OUTPUT_WEIGHTS)
def test_float16_overflow_on_one_replica_skips_the_step_everywhere(runs, output_weights):
  work, out = runs("mixed_float16")
  one, two = out[f"{output_weights}_one"], out[f"{output_weights}_two"]
  # One device: the forced scale overflows, the step is skipped (the step
  # counter stays at 1) and the scale halves.
  assert (one["overflow_step"], one["overflow_scale"]) == (1, FORCED_SCALE / 2)
  assert one["moved_in_overflow_step"] == [0]
  # Two replicas: only replica 1 overflows; still skipped on both, nothing
  # moved or became non-finite, the scale halved.
  assert (two["overflow_step"], two["overflow_scale"]) == (1, FORCED_SCALE / 2)
  assert two["moved_in_overflow_step"] == [0, 0]
  assert two["finite_after_overflow"] == [True, True]
  assert one["final_step"] == two["final_step"] == 2
  _assert_two_replicas_match_one_device(work, out, "mixed_float16", output_weights)


@pytest.mark.parametrize("output_weights", OUTPUT_WEIGHTS)
def test_bfloat16_two_replicas_match_one_device(runs, output_weights):
  # bfloat16 has float32's range: no loss scale and nothing to skip; the step
  # with an empty half is applied like any other.
  work, out = runs("mixed_bfloat16")
  one, two = out[f"{output_weights}_one"], out[f"{output_weights}_two"]
  assert one["overflow_scale"] is two["overflow_scale"] is None
  assert one["overflow_step"] == two["overflow_step"] == 2
  assert one["final_step"] == two["final_step"] == 3
  assert two["finite_after_overflow"] == [True, True]
  _assert_two_replicas_match_one_device(work, out, "mixed_bfloat16", output_weights)
