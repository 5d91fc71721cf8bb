"""Strategy choice, and distributed training equal to single-device training.

The multi-device tests run in subprocesses: logical CPU devices must be set up
before TensorFlow initializes its devices, and multi-worker training needs one
process per worker. Subprocesses are time-bound so that a hang fails the test.
"""

import json
from pathlib import Path
import socket
import subprocess
import textwrap

import numpy as np
import pytest

from helpers.replica_scripts import SMALL_CONFIG, TWO_CPU_DEVICES, script_output, start_script
from transformer.training import tf_distribute
from transformer.run.errors import UsageError


# ------------------------------------------------------------ choice and flags

@pytest.mark.parametrize("name,tpu,gpus,expected", [
    ("auto", None, 0, "default"),
    ("auto", None, 1, "default"),
    ("auto", None, 2, "mirrored"),
    ("auto", "grpc://10.0.0.2:8470", 0, "tpu"),
    ("auto", "my-tpu", 8, "tpu"),
    ("default", None, 4, "default"),
    ("mirrored", None, 0, "mirrored"),
    ("tpu", None, 0, "tpu"),
    ("tpu", "local", 0, "tpu"),
    ("multi_worker", None, 0, "multi_worker"),
])
def test_resolve_strategy_name(name, tpu, gpus, expected):
  assert tf_distribute.resolve_strategy_name(name, tpu, gpus) == expected


# ------------------------------------------------------------ input

class _ClusterStrategy:
  """Stands for a strategy with a cluster resolver; hands the dataset back."""
  cluster_resolver = object()

  @staticmethod
  def experimental_distribute_dataset(dataset):
    return dataset


def test_datasets_are_sharded_by_data_only_across_workers():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  dataset = tf.data.Dataset.range(6).batch(2)
  data_policy = tf.data.experimental.AutoShardPolicy.DATA
  across_workers = tf_distribute.distribute_dataset(_ClusterStrategy(), dataset)
  assert across_workers.options().experimental_distribute.auto_shard_policy == data_policy
  # One worker: the same batches, no sharding option.
  one_worker = tf_distribute.distribute_dataset(tf.distribute.get_strategy(), dataset)
  assert [b.numpy().tolist() for b in one_worker] == [[0, 1], [2, 3], [4, 5]]
  assert dataset.options() == tf.data.Options()
  assert one_worker.options().experimental_distribute.auto_shard_policy != data_policy


def test_datasets_run_without_the_tf_data_autotuner():
  # Any dataset, not only the pipeline's: a benchmark's generator of batches
  # once paid the autotuner's stall (pipeline.without_autotuner) per chunk.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  dataset = tf.data.Dataset.from_generator(lambda: iter([[1, 2]]),
                                           output_signature=tf.TensorSpec([2], tf.int32))
  assert dataset.options().autotune.enabled is not False
  for strategy in (_ClusterStrategy(), tf.distribute.get_strategy()):
    assert tf_distribute.distribute_dataset(strategy, dataset).options().autotune.enabled is False


@pytest.mark.parametrize("name,tpu,precision,message", [
    ("nccl", None, "none", "unknown strategy 'nccl'"),
    ("default", "grpc://10.0.0.2:8470", "none", "TPU address .* with strategy 'default'"),
    ("mirrored", "my-tpu", "none", "with strategy 'mirrored'"),
    ("tpu", "my-tpu", "mixed_float16", "mixed_float16 is for GPUs"),
    ("auto", "my-tpu", "mixed_float16", "mixed_float16 is for GPUs"),
    ("default", None, "float8", "unknown mixed precision"),
])
def test_contradictory_flags_are_refused(name, tpu, precision, message):
  with pytest.raises(UsageError, match=message):
    tf_distribute.check_strategy_flags(name, tpu, precision)


@pytest.mark.parametrize("name,tpu,precision", [
    ("tpu", "my-tpu", "mixed_bfloat16"), ("auto", None, "mixed_float16"),
    ("mirrored", None, "mixed_float16"), ("multi_worker", None, "none")])
def test_consistent_flags_are_accepted(name, tpu, precision):
  tf_distribute.check_strategy_flags(name, tpu, precision)


def test_default_strategy():
  strategy = tf_distribute.get_strategy("default")
  assert strategy.num_replicas_in_sync == 1
  assert tf_distribute.is_chief(strategy)


# ------------------------------------------------------------ subprocess runs

_COMMON = SMALL_CONFIG + """
import numpy as np
import tensorflow as tf

def config():
  c = small_config()
  c.model.output_weights = "untied"
  c.training.label_smoothing = 0.1
  return c

def batches():
  # Global batches of 4 rows; a 2-replica strategy gives rows 0-1 to one
  # replica and rows 2-3 to the other. The halves hold very different numbers
  # of real target tokens (11 vs 2, 3 vs 9, 14 vs 4), so averaging the loss per
  # replica would give other gradients than the global token average.
  rng = np.random.default_rng(0)
  out = []
  for target_lengths in ([6, 5, 1, 1], [1, 2, 4, 5], [7, 7, 3, 1]):
    source = rng.integers(4, VOCAB, size=(4, 7))
    source[2:, 4:] = 0
    target = np.zeros((4, 8), np.int64)
    for row, n in enumerate(target_lengths):
      target[row, :n + 1] = rng.integers(4, VOCAB, size=n + 1)
    out.append(((source, target[:, :-1]), target[:, 1:]))
  def gen():
    yield from out
  spec = ((tf.TensorSpec([None, None], tf.int64), tf.TensorSpec([None, None], tf.int64)),
          tf.TensorSpec([None, None], tf.int64))
  return tf.data.Dataset.from_generator(gen, output_signature=spec)
"""


def _two_replica_run(body: str, cwd: Path) -> str:
  """Runs ``body`` after ``_COMMON`` with the CPU split into two logical
  devices, to its end (4 minutes at most); returns its output."""
  script = TWO_CPU_DEVICES + _COMMON + textwrap.dedent(body)
  return script_output(start_script(script, cwd), 240, "the 2-replica run")


@pytest.mark.slow
def test_two_replicas_match_one_device(tmp_path):
  body = """
  single = TensorFlowTrainer(config(), input_vocab_size=VOCAB, target_vocab_size=VOCAB,
                   progress=False)
  initial = single.model.get_weights()
  mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  assert mirrored.num_replicas_in_sync == 2
  double = TensorFlowTrainer(config(), input_vocab_size=VOCAB, target_vocab_size=VOCAB,
                   strategy=mirrored, progress=False)
  double.model.set_weights(initial)
  one = single.engine.train_on_batches(batches())
  two = double.engine.train_on_batches(batches())
  np.savez("out.npz", loss1=[r["loss"] for r in one], loss2=[r["loss"] for r in two],
           tokens1=[r["tokens"] for r in one], tokens2=[r["tokens"] for r in two],
           **{f"w1_{i}": w for i, w in enumerate(single.model.get_weights())},
           **{f"w2_{i}": w for i, w in enumerate(double.model.get_weights())},
           **{f"w0_{i}": w for i, w in enumerate(initial)},
           names=[w.path for w in single.model.weights])
  print("steps", single.step, double.step)
  """
  output = _two_replica_run(body, tmp_path)
  assert "steps 3 3" in output
  out = np.load(tmp_path / "out.npz")
  np.testing.assert_allclose(out["tokens1"], [13, 12, 18])
  np.testing.assert_allclose(out["tokens1"], out["tokens2"])
  np.testing.assert_allclose(out["loss1"], out["loss2"], rtol=1e-5, atol=1e-6)
  names = list(out["names"])
  count = len(names)
  assert count == len([k for k in out.files if k.startswith("w1_")])
  moved = 0
  for i, name in enumerate(names):
    if name.endswith("key/bias"):
      # Softmax ignores a bias added to every key, so its gradient is 0 up to
      # float noise, which Adam's normalization blows up to full-size steps:
      # not comparable between any two runs.
      continue
    np.testing.assert_allclose(out[f"w1_{i}"], out[f"w2_{i}"], rtol=1e-5, atol=1e-5,
                               err_msg=name)
    moved += not np.allclose(out[f"w0_{i}"], out[f"w1_{i}"])
  assert moved > count // 2  # the steps really changed the weights


@pytest.mark.slow
def test_time_budget_plans_alike_under_two_replicas(tmp_path):
  # The budget's cooldown variables are mirrored and the epoch seconds agreed
  # over replicas (tf_distribute.mean_over_replicas); each epoch is reported as
  # 10 s, so 1 minute with a third cooling down is 6 epochs, as on one device
  # (tests/integration/test_trainer_runs.py).
  body = """
  from transformer.training import tf_distribute, loop, summaries
  class TenSeconds(summaries.EpochClock):
    def run_seconds(self, now=None):
      return 10.0
  loop.EpochClock = TenSeconds
  mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  assert tf_distribute.mean_over_replicas(mirrored, 2.5) == 2.5
  c = config()
  c.training.update(epochs=100, time_budget_minutes=1.0, cooldown_fraction=1 / 3)
  trainer = TensorFlowTrainer(c, input_vocab_size=VOCAB, target_vocab_size=VOCAB,
                    strategy=mirrored, progress=False)
  result = trainer.fit(lambda epoch: batches())
  print("epochs", result.epoch, "steps", result.step, "last rate", trainer.learning_rate,
        "planned", [r["planned_epochs"] for r in result.history])
  """
  output = _two_replica_run(body, tmp_path)
  assert "epochs 6 steps 18 last rate 0.0 planned [6, 6, 6, 6, 6, 6]" in output, output[-3000:]


def _free_ports(n):
  sockets = [socket.socket() for _ in range(n)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


# Generous: on a loaded machine the workers' first traces and collective setup
# can take minutes of wall time; the bound is only there so that a hang fails.
WORKER_TIMEOUT = 900


@pytest.mark.slow
def test_multi_worker_mirrored_matches_one_device(tmp_path):
  ports = _free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
  model_dir = tmp_path / "model"
  script = _COMMON + f"""
import os
from transformer.training import tf_distribute
strategy = tf_distribute.get_strategy("multi_worker")
assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
c = config()
c.training.train_steps = 3
c.training.checkpoint_every_steps = 2
trainer = TensorFlowTrainer(c, input_vocab_size=VOCAB, target_vocab_size=VOCAB,
                  model_dir={str(model_dir)!r}, strategy=strategy, progress=False)
task = tf_distribute.tf_config_task()[1]
np.savez(f"initial_{{task}}.npz", *trainer.model.get_weights())
result = trainer.fit(lambda epoch: batches())
np.savez(f"weights_{{task}}.npz", *trainer.model.get_weights())
print("done", task, result.step, tf_distribute.is_chief(strategy))
"""
  procs = []
  for index in range(2):
    work = tmp_path / f"w{index}"
    work.mkdir()
    tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
    procs.append((work, start_script(script, work, env={"TF_CONFIG": json.dumps(tf_config)})))
  outputs = []
  try:
    for work, proc in procs:
      outputs.append(proc.communicate(timeout=WORKER_TIMEOUT)[0])
  except subprocess.TimeoutExpired:
    for _, proc in procs:
      proc.kill()
    pytest.fail(f"multi-worker training hung (killed after {WORKER_TIMEOUT} s)")
  for (work, proc), output in zip(procs, outputs):
    assert proc.returncode == 0, output[-3000:]
  assert "done 0 3 True" in outputs[0]
  assert "done 1 3 False" in outputs[1]
  w0 = np.load(tmp_path / "w0" / "weights_0.npz")
  w1 = np.load(tmp_path / "w1" / "weights_1.npz")
  assert len(w0.files) == len(w1.files) > 10
  for key in w0.files:
    np.testing.assert_array_equal(w0[key], w1[key], err_msg=key)
  # The all-reduce makes the workers agree whatever each one computed, so
  # compare worker 0 with one device on the same global batches from the same
  # initial weights: they differ if a worker normalized its loss by its own
  # token count instead of the global one.
  single = _COMMON + f"""
c = config()
c.training.train_steps = 3
trainer = TensorFlowTrainer(c, input_vocab_size=VOCAB, target_vocab_size=VOCAB,
                  progress=False)
initial = np.load({str(tmp_path / "w0" / "initial_0.npz")!r})
trainer.model.set_weights([initial[k] for k in initial.files])
assert trainer.fit(lambda epoch: batches()).step == 3
np.savez("single.npz", *trainer.model.get_weights(),
         names=[w.path for w in trainer.model.weights])
"""
  work = tmp_path / "single"
  work.mkdir()
  script_output(start_script(single, work), WORKER_TIMEOUT, "the single-device run")
  one = np.load(work / "single.npz")
  initial = np.load(tmp_path / "w0" / "initial_0.npz")
  names = list(one["names"])
  assert len(names) == len(w0.files)
  moved = 0
  for i, name in enumerate(names):
    if name.endswith("key/bias"):
      continue  # a zero gradient up to float noise (see the test above)
    np.testing.assert_allclose(w0[f"arr_{i}"], one[f"arr_{i}"], rtol=1e-5, atol=1e-5,
                               err_msg=name)
    moved += not np.allclose(initial[f"arr_{i}"], one[f"arr_{i}"])
  assert moved > len(names) // 2  # the steps really changed the weights
  # Only the chief's checkpoints are kept; the other worker's are removed.
  assert (model_dir / "checkpoints" / "ckpt-3.index").is_file()
  assert not (model_dir / ".worker_1").exists()
