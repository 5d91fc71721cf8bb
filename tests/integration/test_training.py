"""The training loop: learning, NaN stop, corrupt and mismatched checkpoints.

Real data (``../shared/data``) with the tutorial's tokenizer; the tiny config
with an untied output layer (fastest on CPU).
"""

import math
import shutil
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_config(tiny_config):
  """``run_config(**training_fields)``: the tiny config with an untied output
  layer, a checkpoint every 5 steps, 10 kept, and those ``config.training`` fields."""
  def make(**training_fields):
    config = tiny_config(output_weights="untied")
    config.training.checkpoint_every_steps = 5
    config.training.keep_checkpoints = 10
    config.training.update(training_fields)
    return config
  return make


@pytest.fixture(scope="module")
def vocab_sizes(tutorial_tokenizers):
  """(pt, en) vocabulary sizes of the tutorial's tokenizers."""
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  return tokenizers.vocab_sizes(tutorial_tokenizers)


@pytest.fixture(scope="module")
def batches(train_pairs, tutorial_tokenizers):
  """make_batches(epoch) over the first 192 real pairs (12 batches of 16)."""
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  dataset = ted.pairs_to_dataset(train_pairs[:192])

  def make(epoch=0):
    return pipeline.make_batches(dataset, tutorial_tokenizers, max_tokens=64,
                                 batch_size=16, shuffle=True, shuffle_buffer=1000,
                                 seed=epoch)
  return make


@pytest.fixture(scope="module")
def trained_dir(run_config, make_trainer, tmp_path_factory, batches, vocab_sizes):
  """A model_dir with checkpoints at steps 5 and 10 of the tiny config."""
  model_dir = tmp_path_factory.mktemp("trained")
  trainer = make_trainer(run_config(train_steps=10), vocab_sizes, model_dir)
  result = trainer.fit(batches)
  assert result.step == 10
  return model_dir


def test_loss_goes_down_on_real_pairs(run_config, make_trainer, batches, vocab_sizes):
  # Measured: 8.85 at the first step, 6.36 averaged over steps 33-36 (3 epochs
  # of 12 batches, lr warming up over 100 steps); the bound (first - 1.5)
  # leaves about 1 nat of margin.
  trainer = make_trainer(run_config(train_steps=36), vocab_sizes)
  losses = []
  result = trainer.fit(batches, step_callback=lambda step, loss: losses.append(loss))
  assert result.step == 36 and len(losses) == 36
  first, last = losses[0], float(np.mean(losses[-4:]))
  assert first > 8.5, losses[:3]             # ~ln(7010): an untrained model
  assert last < first - 1.5, (first, last)
  assert all(math.isfinite(x) for x in losses)


def test_resume_restores_step_and_optimizer_state(run_config, make_trainer, trained_dir,
                                                  vocab_sizes, tmp_path):
  model_dir = tmp_path / "run"
  shutil.copytree(trained_dir, model_dir)
  trainer = make_trainer(run_config(train_steps=10), vocab_sizes, model_dir)
  assert trainer.restore() == 10
  assert trainer.step == 10
  # The schedule continues from step 10, not from the start.
  from transformer.model import optimization  # pylint: disable=g-import-not-at-top
  expected = float(optimization.WarmupInverseSquareRoot(32, 100)(10))
  assert trainer.learning_rate == pytest.approx(expected)
  # Adam's moments came back (they are zero in a fresh optimizer).
  assert any(np.abs(v.numpy()).sum() > 0 for v in trainer.engine.optimizer.variables
             if "momentum" in v.path)
  # Training is done: fit does nothing more.
  result = trainer.fit(lambda epoch: pytest.fail("no data should be read"))
  assert result.step == 10


def test_nan_loss_stops_and_keeps_last_good_checkpoint(run_config, make_trainer, trained_dir,
                                                       batches, vocab_sizes, tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer.run.errors import NonFiniteLossError  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "run"
  shutil.copytree(trained_dir, model_dir)
  trainer = make_trainer(run_config(train_steps=20), vocab_sizes, model_dir)
  assert trainer.restore() == 10
  # Poison one weight: every later forward pass gives NaN logits.
  kernel = trainer.model.final_layer.kernel
  kernel.assign(np.full(kernel.shape, np.nan, np.float32))
  with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 11.*"
                     r"last good checkpoint is kept: .*ckpt-10"):
    trainer.fit(batches)
  assert tf.train.latest_checkpoint(str(model_dir / "checkpoints")).endswith("ckpt-10")
  reader = tf.train.load_checkpoint(str(model_dir / "checkpoints"))
  for name in reader.get_variable_to_shape_map():
    if "final_layer" in name and "OPTIMIZER" not in name:
      assert np.all(np.isfinite(reader.get_tensor(name))), name


def test_corrupt_checkpoint_falls_back_then_fails_clearly(run_config, make_trainer, trained_dir,
                                                          vocab_sizes, tmp_path):
  """Garbage in the newest checkpoint: the one before it is used; garbage in
  every one: refused, naming them (issue #32)."""
  from transformer.run.checkpoint_files import CheckpointError  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "run"
  shutil.copytree(trained_dir, model_dir)
  for step in (10, 5):
    data_file = model_dir / "checkpoints" / f"ckpt-{step}.data-00000-of-00001"
    data_file.write_bytes(b"\x5a" * data_file.stat().st_size)  # same size, garbage content
  (model_dir / "checkpoints" / "ckpt-10.data-00000-of-00001").write_bytes(b"")  # truncated
  with pytest.raises(CheckpointError, match=r"no intact checkpoint left in .*"
                     r"ckpt-10 \(.*; ckpt-5 \("):
    make_trainer(run_config(train_steps=20), vocab_sizes, model_dir).restore()


def test_mismatched_checkpoint_fails_clearly(run_config, make_trainer, trained_dir, vocab_sizes,
                                             tmp_path):
  from transformer.run.checkpoint_files import CheckpointError  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "run"
  shutil.copytree(trained_dir, model_dir)
  config = run_config(train_steps=20)
  config.model.d_model = 16
  trainer = make_trainer(config, vocab_sizes, model_dir)
  with pytest.raises(CheckpointError,
                     match=r"ckpt-10: it is corrupt or was written by a different model"):
    trainer.restore()
  assert trainer.step == 0


@pytest.fixture
def float32_after():
  """The TensorFlowTrainer sets Keras' global dtype policy; give later tests float32 back."""
  yield
  import keras  # pylint: disable=g-import-not-at-top
  keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("policy,loss_scaled", [("mixed_float16", True),
                                                ("mixed_bfloat16", False)])
def test_mixed_precision_trains_and_resumes(run_config, make_trainer, random_dataset, tmp_path,
                                            policy, loss_scaled, float32_after):
  import keras  # pylint: disable=g-import-not-at-top
  dataset = random_dataset(4, rows=8, source_length=9, target_length=10, vocab=50)
  config = run_config(train_steps=4, checkpoint_every_steps=2)

  def trainer():
    return make_trainer(config, (60, 60), tmp_path, mixed_precision=policy)
  first = trainer()
  assert isinstance(first.engine.optimizer, keras.optimizers.LossScaleOptimizer) == loss_scaled
  assert first.model.final_layer.compute_dtype == policy.split("_")[1]
  result = first.fit(lambda epoch: dataset)
  assert result.step == 4
  assert all(math.isfinite(r["train_loss"]) for r in result.history)
  second = trainer()
  assert second.restore() == 4
  assert second.learning_rate == pytest.approx(first.learning_rate)


def test_checkpoints_follow_the_interval_from_the_last_one(run_config, make_trainer, random_dataset,
                                                           tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # 3 steps per epoch
  dataset = random_dataset(2, rows=6, source_length=9, target_length=10, vocab=50)
  config = run_config(train_steps=0, epochs=2, checkpoint_every_steps=2)
  trainer = make_trainer(config, (60, 60), tmp_path)
  assert trainer.fit(lambda epoch: dataset).step == 6
  saved = tf.train.get_checkpoint_state(str(tmp_path / "checkpoints"))
  steps = [int(path.rsplit("-", 1)[1]) for path in saved.all_model_checkpoint_paths]
  # Two steps after each save, and each epoch's end (3, 6); never 4, one step
  # after the end of the first epoch.
  assert steps == [2, 3, 5, 6]


def test_epoch_summary_line():
  from transformer.run import progress  # pylint: disable=g-import-not-at-top
  record = {"epoch": 3, "step": 1200, "complete": True, "steps_in_epoch": 400,
            "train_loss": 4.12346, "train_accuracy": 0.31204, "learning_rate": 1e-3,
            "tokens_per_second": 12345.6, "seconds": 95.24}
  assert progress.epoch_summary(record) == (
      "Epoch 3 (step 1200): train loss 4.1235 acc 0.3120 | 12346 tok/s | 95.2 s")
  record.update(val_loss=3.9, val_accuracy=0.34)
  assert progress.epoch_summary(record, 20) == (
      "Epoch 3/20 (step 1200): train loss 4.1235 acc 0.3120 | val loss 3.9000 acc 0.3400"
      " | 12346 tok/s | 95.2 s")


def test_a_cooldown_that_ends_before_the_run_is_warned(run_config, make_trainer, batches,
                                                       vocab_sizes, caplog):
  # One epoch is 12 batches; a cooldown ending at step 8 leaves 4 steps at rate 0.
  trainer = make_trainer(run_config(epochs=1, cooldown_steps=4, cooldown_end_step=8),
                         vocab_sizes)
  with caplog.at_level("WARNING"):
    trainer.fit(batches)
  assert "cooldown_end_step is 8 but this run ends at step 12 (12 steps per epoch)" in caplog.text


def test_first_epochs_progress_bar_knows_its_length(run_config, batches, vocab_sizes, capsys,
                                                    monkeypatch):
  from transformer.training.tf_engine import TensorFlowTrainer  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # the bar is drawn on terminals
  trainer = TensorFlowTrainer(run_config(epochs=1), input_vocab_size=vocab_sizes[0],
                    target_vocab_size=vocab_sizes[1], progress=True)
  trainer.fit(batches)
  out = capsys.readouterr().out
  # 12 batches: the bar shows "12/12" (and so an ETA), never "Unknown".
  assert "12/12" in out and "Unknown" not in out, out
