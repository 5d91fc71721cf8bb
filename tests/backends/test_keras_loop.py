"""train.py on prepared shards under KERAS_BACKEND=jax (transformer/training/jax_engine.py)
apart from the whole chain (tests/test_jax_chain.py): its checkpoints, data
parallel training on two devices, and the command lines it refuses."""

import json
import os
from pathlib import Path
import re
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

from helpers import jax_checkpoints
from helpers.backends import needs_jax
from helpers.prepared import random_prepared_folder
from transformer.run import keras_checkpoints

REPO_DIR = Path(__file__).resolve().parents[2]
# Training runs under JAX; the checkpoint tests run on any backend.


def train(*args, keras_backend="jax", devices=1):
  env = {**os.environ, "PYTHONPATH": str(REPO_DIR), "KERAS_BACKEND": keras_backend,
         "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
  return subprocess.run([sys.executable, "train.py", "--config=configs/tiny.py", *args],
                        cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=600)


def small_model():
  return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])


def save(directory, step, model, keep=2):
  return keras_checkpoints.save(directory, step, model, [np.array(step)], [], {"step": step},
                                keep=keep)


def test_checkpoints_keep_the_newest_and_restore_past_an_unreadable_one(tmp_path):
  model = small_model()
  for step in (1, 2, 3):
    save(tmp_path, step, model)
  assert [p.name for p in keras_checkpoints.checkpoint_dirs(tmp_path)] == ["step-2", "step-3"]
  (tmp_path / ".step-4.partial").mkdir()  # a save a kill interrupted
  weights = tmp_path / "step-3" / keras_checkpoints.WEIGHTS_FILE
  weights.write_bytes(weights.read_bytes()[:100])  # cut short
  path, optimizer_values, _, state = keras_checkpoints.restore(tmp_path, model)
  assert path.name == "step-2" and state == {"step": 2} and optimizer_values[0] == 2
  assert (tmp_path / "unreadable" / "step-3").is_dir()
  assert not (tmp_path / ".step-4.partial").exists()


def test_checkpoint_of_another_model_is_refused_and_kept(tmp_path):
  save(tmp_path, 1, small_model())
  other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(5)])
  with pytest.raises(keras_checkpoints.CheckpointError, match="different model"):
    keras_checkpoints.restore(tmp_path, other)
  assert (tmp_path / "step-1").is_dir()


def test_the_last_checkpoints_weights_average(tmp_path):
  model = small_model()
  kernels = []
  for step in (1, 2):
    model.layers[0].kernel.assign(np.full((3, 2), float(step)))
    kernels.append(model.layers[0].kernel.numpy())
    save(tmp_path, step, model)
  paths = keras_checkpoints.last_weights(tmp_path, 2)
  assert [p.parent.name for p in paths] == ["step-1", "step-2"]
  keras_checkpoints.load_weights(model, paths)
  np.testing.assert_allclose(model.layers[0].kernel.numpy(), np.full((3, 2), 1.5))
  with pytest.raises(keras_checkpoints.CheckpointError, match="last 3 checkpoints"):
    keras_checkpoints.last_weights(tmp_path, 3)


def test_prepared_shards_are_refused_under_the_tensorflow_backend(tmp_path):
  result = train(f"--data={random_prepared_folder(tmp_path / 'prepared')}",
                 f"--model_dir={tmp_path / 'run'}", keras_backend="tensorflow")
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      f"train.py: error: --data={tmp_path / 'prepared'} is a prepare.py folder, which trains "
      "under KERAS_BACKEND=jax (now tensorflow); set it, or pass the folder of the TED HRLR "
      "files"]


@needs_jax
def test_jax_backend_asks_for_prepared_shards(tmp_path):
  result = train(f"--data={tmp_path}", f"--model_dir={tmp_path / 'run'}")
  assert result.returncode == 1
  assert "run prepare.py first" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
@needs_jax
def test_two_devices_train_as_one(tmp_path):
  """DataParallel over two (CPU) devices: the same losses as one device, the
  batches split on their rows (dropout off: its masks are drawn per shard)."""
  prepared = random_prepared_folder(tmp_path / "prepared")
  records = {}
  for strategy in ("default", "mirrored"):
    result = train(f"--data={prepared}", f"--model_dir={tmp_path / strategy}",
                   f"--strategy={strategy}", "--config.training.train_steps=3",
                   "--config.model.dropout_rate=0", "--export=false", devices=2)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ("on 1 cpu device\n" if strategy == "default" else "on 2 cpu devices\n") in result.stderr
    records[strategy] = json.loads((tmp_path / strategy / "metrics.jsonl").read_text())
  for key in ("train_loss", "val_loss", "val_accuracy"):
    assert records["mirrored"][key] == pytest.approx(records["default"][key], rel=1e-5), key


@pytest.mark.slow
@needs_jax
def test_a_non_finite_loss_stops_the_run_before_a_checkpoint(tmp_path):
  # A learning rate 1e30 times the schedule's: the weights, then the loss, overflow.
  result = train(f"--data={random_prepared_folder(tmp_path / 'prepared')}",
                 f"--model_dir={tmp_path / 'run'}", "--config.training.learning_rate_scale=1e30",
                 "--config.training.train_steps=6", "--config.training.checkpoint_every_steps=2")
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert re.match(r"train.py: error: the training loss is (nan|-?inf) at step [12] \(epoch 1\); "
                  r"stopping without saving\. The last good checkpoint is kept: none was written "
                  "yet", last), last
  assert not (tmp_path / "run" / "checkpoints").exists()


def checkpoint_arrays(step_dir: Path) -> dict:
  """Every array of a checkpoint: the weights file's datasets and the npz files'."""
  import h5py  # pylint: disable=g-import-not-at-top
  arrays = {}
  with h5py.File(step_dir / keras_checkpoints.WEIGHTS_FILE, "r") as weights:
    weights.visititems(lambda name, item: arrays.__setitem__(name, item[()])
                       if isinstance(item, h5py.Dataset) else None)
  for name in ("optimizer.npz", "non_trainable.npz"):
    with np.load(step_dir / name) as npz:
      arrays.update({f"{name}/{key}": npz[key] for key in npz.files})
  return arrays


@pytest.mark.slow
@needs_jax
def test_a_resumed_run_repeats_the_uninterrupted_one_bitwise(tmp_path):
  """Stopped inside its first epoch and resumed, a run ends with the weights,
  Adam moments and dropout random states of the run never stopped (dropout on),
  and the epoch's record counts its seconds before the stop too."""
  prepared = random_prepared_folder(tmp_path / "prepared")  # 4 steps an epoch
  for model_dir, stops in (("straight", [8]), ("resumed", [2, 8])):
    for steps in stops:
      result = train(f"--data={prepared}", f"--model_dir={tmp_path / model_dir}",
                     f"--config.training.train_steps={steps}", "--export=false")
      assert result.returncode == 0, result.stderr[-3000:]
      if steps == 2:  # as if the first 2 steps had taken 1,000 s
        state_file = tmp_path / model_dir / "checkpoints" / "step-2" / "state.json"
        state = json.loads(state_file.read_text())
        state["epoch_sums"]["seconds"] = 1000.0
        state_file.write_text(json.dumps(state))
        jax_checkpoints.record_edit(state_file)
  assert "(in epoch 1, after its first 2 batches)" in result.stderr
  records = [json.loads(line) for line in
             (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
  (first,) = [record for record in records if record["epoch"] == 1 and record["complete"]]
  assert 1000.0 < first["seconds"] < 1000.0 + 600, records
  straight = checkpoint_arrays(tmp_path / "straight" / "checkpoints" / "step-8")
  resumed = checkpoint_arrays(tmp_path / "resumed" / "checkpoints" / "step-8")
  assert straight.keys() == resumed.keys() and len(straight) > 10
  for name, array in straight.items():
    np.testing.assert_array_equal(resumed[name], array, err_msg=name)
  # Once more: the run had ended, and says only that.
  again = train(f"--data={prepared}", f"--model_dir={tmp_path / 'straight'}",
                "--config.training.train_steps=8", "--export=false")
  assert again.returncode == 0, again.stderr[-3000:]
  assert "nothing more to train" in again.stderr, again.stderr[-3000:]
  assert "training from step" not in again.stderr, again.stderr[-3000:]


@pytest.mark.slow
@needs_jax
def test_the_time_budget_plans_the_epochs_and_cools_the_rate_to_zero(tmp_path):
  # A minute for at most 3 epochs of 4 steps: the first epoch (the step's
  # compilation) takes seconds, so 3 fit and the last ones cool down.
  result = train(f"--data={random_prepared_folder(tmp_path / 'prepared')}",
                 f"--model_dir={tmp_path / 'run'}", "--config.training.time_budget_minutes=1",
                 "--config.training.cooldown_fraction=0.5", "--config.training.epochs=3",
                 "--export=false")
  assert result.returncode == 0, result.stderr[-3000:]
  metrics = (tmp_path / "run" / "metrics.jsonl").read_text()
  records = [json.loads(line) for line in metrics.splitlines()]
  assert len(records) == records[-1]["planned_epochs"] >= 2, records
  assert records[-1]["learning_rate"] == 0.0 < records[0]["learning_rate"]
  assert "the learning rate falls to zero over the last" in result.stderr


@pytest.mark.slow
@needs_jax
def test_a_kill_between_an_epochs_record_and_its_checkpoint_writes_the_record_once(tmp_path):
  """The loop appends an epoch's record before the checkpoint that closes the
  epoch: with that checkpoint lost, the same command drops the record, redoes
  the epoch's end from the checkpoint before, and writes the same record once."""
  args = (f"--data={random_prepared_folder(tmp_path / 'prepared')}",
          f"--model_dir={tmp_path / 'run'}", "--config.training.epochs=1",
          "--config.training.checkpoint_every_steps=1", "--export=false")
  assert train(*args).returncode == 0
  metrics = tmp_path / "run" / "metrics.jsonl"
  (record,) = [json.loads(line) for line in metrics.read_text().splitlines()]
  closing = tmp_path / "run" / "checkpoints" / f"step-{record['step']}"
  shutil.rmtree(closing)  # as if killed before the closing checkpoint was in place
  again = train(*args)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "dropping the records of epoch 1" in again.stderr
  (redone,) = [json.loads(line) for line in metrics.read_text().splitlines()]
  for name in ("epoch", "step", "steps_in_epoch", "train_loss", "train_accuracy", "val_loss"):
    assert redone[name] == record[name], name
  assert closing.is_dir()
