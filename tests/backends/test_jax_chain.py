"""Trained on Keras and JAX without TensorFlow, served by TensorFlow, on the tiny
configuration: prepare.py -> train.py under KERAS_BACKEND=jax with TensorFlow
unimportable -> SIGKILL at a checkpoint -> the same command resumes ->
evaluate.py (BLEU) exporting the translator -> translate.py. Each step reads
the previous one's real output. Then scoring under JAX: evaluate.py on the
prepared folder without TensorFlow gives what evaluate.py on TensorFlow gives."""

import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import pytest

from helpers import jax_checkpoints
from helpers.backends import needs_jax
from helpers.no_tensorflow import BLOCK_TENSORFLOW

pytestmark = [
    pytest.mark.slow,
    needs_jax,
]

REPO_DIR = Path(__file__).resolve().parents[2]
# Runs a script (argv[1]) with TensorFlow impossible to import, and writes the
# imports it tried to $TRIED_IMPORTS_FILE when it exits.
BLOCKING_RUNNER = BLOCK_TENSORFLOW + """
import atexit, json, os, runpy
atexit.register(lambda: open(os.environ["TRIED_IMPORTS_FILE"], "w").write(
    json.dumps(TENSORFLOW_IMPORTS_TRIED)))
sys.argv = sys.argv[1:]
sys.path.insert(0, os.getcwd())
runpy.run_path(sys.argv[0], run_name="__main__")
"""
TRAIN_PAIRS, BATCH = 96, 16  # 6 steps an epoch
CHECKPOINT_EVERY = 3


def environment(**extra):
  return {**os.environ, "PYTHONPATH": str(REPO_DIR), **extra}


def run(script, *args, env=None):
  result = subprocess.run([sys.executable, script, *args], cwd=REPO_DIR, capture_output=True,
                          text=True, timeout=600, env=env or environment())
  assert result.returncode == 0, f"{script} failed:\n{result.stderr[-3000:]}"
  return result


def test_prepare_train_on_jax_kill_resume_then_evaluate_and_translate_on_tensorflow(
    tmp_path, ted_data_dir, tutorial_tokenizer_path):
  prepared, model_dir = tmp_path / "prepared", tmp_path / "run"
  run("prepare.py", "--config=configs/tiny.py", f"--data={ted_data_dir}",
      f"--tokenizer={tutorial_tokenizer_path}", f"--output={prepared}",
      f"--train_examples={TRAIN_PAIRS}", "--validation_examples=16")
  manifest = json.loads((prepared / "manifest.json").read_text())
  assert manifest["splits"]["train"]["pairs"] == TRAIN_PAIRS
  assert manifest["dtype"] == "int16" and manifest["max_tokens"] == 64

  runner = tmp_path / "blocking_runner.py"
  runner.write_text(BLOCKING_RUNNER)
  tried = tmp_path / "tried_imports.json"
  env = environment(KERAS_BACKEND="jax", TRIED_IMPORTS_FILE=str(tried))
  # max_tokens 16 (trimming the shards again): every batch has one shape, so
  # XLA compiles the step once per process.
  command = [sys.executable, str(runner), "train.py", "--config=configs/tiny.py",
             f"--data={prepared}", f"--model_dir={model_dir}", "--config.training.epochs=2",
             "--config.data.max_tokens=16", f"--config.data.batch_size={BATCH}",
             f"--config.training.checkpoint_every_steps={CHECKPOINT_EVERY}",
             "--log_every_steps=2"]
  first = subprocess.Popen(command, cwd=REPO_DIR, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
  checkpoint = model_dir / "checkpoints" / f"step-{CHECKPOINT_EVERY}"
  deadline = time.monotonic() + 300
  while not checkpoint.is_dir() and first.poll() is None and time.monotonic() < deadline:
    time.sleep(0.02)
  first.send_signal(signal.SIGKILL)
  output = first.communicate()[0]
  assert checkpoint.is_dir() and first.returncode == -signal.SIGKILL, output[-3000:]
  assert not (model_dir / "export").exists(), "killed too late: the run had finished"

  resumed = subprocess.run(command, cwd=REPO_DIR, env=env, capture_output=True, text=True,
                           timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "restored checkpoint" in resumed.stderr, resumed.stderr[-3000:]
  assert "xla_bridge" not in resumed.stderr  # JAX's own INFO lines: only with --verbose
  # Not even tried (keras.utils.set_random_seed would: jax_engine hides TensorFlow from it).
  assert json.loads(tried.read_text()) == []
  records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
  assert [r["epoch"] for r in records] == [1, 2]
  assert all(r["complete"] and r["steps_in_epoch"] == TRAIN_PAIRS // BATCH for r in records)
  assert records[-1]["step"] == 2 * TRAIN_PAIRS // BATCH
  assert records[-1]["val_loss"] < records[0]["val_loss"] < 10, records
  assert list((model_dir / "logs" / "train").glob("events.out.tfevents.*"))
  assert (model_dir / "export" / "transformer.weights.h5").is_file()

  # TensorFlow loads what JAX trained: BLEU, then the translator SavedModel.
  translator = model_dir / "export" / "translator"
  evaluated = run("evaluate.py", f"--model_dir={model_dir}", f"--data={ted_data_dir}",
                  "--split=validation", "--max_sentences=16", "--method=greedy",
                  f"--export_dir={translator}")
  record = json.loads(evaluated.stdout)
  assert record["num_sentences"] == 16 and record["bleu"] >= 0
  assert record["checkpoints"] == [str(model_dir / "checkpoints" / "step-12" /
                                       "model.weights.h5")]
  # The same 16 validation pairs: TensorFlow's teacher-forced loss of the
  # loaded weights is the last val_loss JAX measured (float32 sums in another
  # order, other padding: 1e-4 apart at most).
  assert abs(record["teacher_forced"]["loss"] - records[-1]["val_loss"]) < 1e-4, (
      record["teacher_forced"], records[-1])
  translated = run("translate.py", f"--export_dir={translator}", "--method=greedy",
                   "este é um problema que temos que resolver .")
  assert translated.stdout.strip(), translated.stderr[-2000:]



def move_weights_off(model_dir: Path, vocab_sizes: dict) -> None:
  """Adds noise to the run's last weights: a few training steps give the same
  few tokens for every sentence, noisy weights translations that differ."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from transformer.model import Transformer  # pylint: disable=g-import-not-at-top
  config = ml_collections.ConfigDict(json.loads((model_dir / "config.json").read_text()))
  model = Transformer.from_model_config(config.model, vocab_sizes["pt"], vocab_sizes["en"])
  model.build(((None, None), (None, None)))
  weights = sorted((model_dir / "checkpoints").glob("step-*/model.weights.h5"))[-1]
  model.load_weights(weights)
  rng = np.random.default_rng(3)
  for variable in model.weights:
    variable.assign(np.asarray(variable) + rng.normal(0.0, 0.3, variable.shape))
  model.save_weights(weights)
  jax_checkpoints.record_edit(weights)


def test_evaluation_under_jax_from_the_prepared_folder_matches_tensorflows(
    tmp_path, ted_data_dir, tutorial_tokenizer_path):
  """evaluate.py --data=<prepared folder> under JAX, TensorFlow unimportable:
  the same translations, BLEU (both scorings) and record as evaluate.py on
  TensorFlow from the TED files, for the same weights and sentences, greedy on
  the validation split and beam on the test split, which prepare.py writes whole."""
  prepared, model_dir = tmp_path / "prepared", tmp_path / "run"
  run("prepare.py", "--config=configs/tiny.py", f"--data={ted_data_dir}",
      f"--tokenizer={tutorial_tokenizer_path}", f"--output={prepared}",
      f"--train_examples={BATCH}", "--validation_examples=64",
      # Cut where TensorFlow's translator cuts (tiny's max_position): the test
      # split's 40 first sentences hold one longer than tiny's max_tokens of 64.
      "--config.data.max_tokens=256")
  test_pairs = len((ted_data_dir / "en.test").read_text(encoding="utf-8").splitlines())
  splits = json.loads((prepared / "manifest.json").read_text())["splits"]
  assert splits["test"]["pairs"] == test_pairs and splits["validation"]["pairs"] == 64, splits
  runner = tmp_path / "blocking_runner.py"
  runner.write_text(BLOCKING_RUNNER)
  tried = tmp_path / "tried_imports.json"
  env = environment(KERAS_BACKEND="jax", TRIED_IMPORTS_FILE=str(tried))
  run(str(runner), "train.py", "--config=configs/tiny.py", f"--data={prepared}",
      f"--model_dir={model_dir}", "--config.training.epochs=1", "--config.data.max_tokens=16",
      f"--config.data.batch_size={BATCH}", "--train_examples=16", "--validation_examples=16",
      env=env)
  move_weights_off(model_dir, json.loads((prepared / "manifest.json").read_text())["vocab_sizes"])

  for method, split in (("greedy", "validation"), ("beam", "test")):
    flags = [f"--split={split}", "--max_sentences=40", f"--method={method}"]
    on_jax = json.loads(run(str(runner), "evaluate.py", f"--model_dir={model_dir}",
                            f"--data={prepared}", f"--output_dir={tmp_path / 'jax'}", *flags,
                            env=env).stdout)
    assert json.loads(tried.read_text()) == []
    on_tensorflow = json.loads(run("evaluate.py", f"--model_dir={model_dir}",
                                   f"--data={ted_data_dir}", f"--output_dir={tmp_path / 'tf'}",
                                   *flags).stdout)
    translations = Path(on_jax["hypotheses_file"]).read_text().splitlines()
    assert translations == Path(on_tensorflow["hypotheses_file"]).read_text().splitlines()
    assert len(set(translations)) > 30, translations  # sentences of their own
    for record in (on_jax, on_tensorflow):
      record.pop("hypotheses_file")
    # float32 sums in another order, other padding.
    assert on_jax.pop("teacher_forced") == pytest.approx(on_tensorflow.pop("teacher_forced"),
                                                         rel=1e-4)
    assert on_jax == on_tensorflow, method
    assert on_jax["split"] == split
    assert on_jax["partial"] and on_jax["references"] == "tokenizer round trip"
