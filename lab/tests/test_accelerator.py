"""lab/bench/accelerator/run.py, the one command for an accelerator, in its --small
setting on the CPU: both runs train under JAX and the summary says what they did;
step_speed.py; and converge.py --small, trained, stopped, averaged and scored."""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from helpers.backends import needs_jax
from helpers.prepared import random_prepared_folder

pytestmark = [
    pytest.mark.slow,
    needs_jax,
]

REPO_DIR = Path(__file__).resolve().parents[2]


def test_small_runs_of_the_tutorial_and_base_configurations(tmp_path):
  prepared = random_prepared_folder(tmp_path / "prepared", pairs=128)
  output = tmp_path / "runs"
  result = subprocess.run([sys.executable, "lab/bench/accelerator/run.py", f"--data={prepared}",
                           f"--output={output}", "--small"], cwd=REPO_DIR, capture_output=True,
                          text=True, timeout=900, env={**os.environ, "PYTHONPATH": ""})
  assert result.returncode == 0, result.stderr[-3000:]
  summary = json.loads((output / "summary.json").read_text())
  assert [run["run"] for run in summary] == ["tutorial", "tutorial_warm", "base"]
  printed = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
  assert printed == summary
  for run in summary:
    assert run["epochs"] == 2 and run["target_tokens_per_second"] > 0 and run["val_loss"] > 0
    assert run["wall_seconds"] > run["training_seconds"]
  # The GPU configurations: length buckets, 8 steps a dispatch, a cache of the run's own.
  tutorial = json.loads((output / "tutorial" / "config.json").read_text())
  assert tutorial["data"]["bucket_lengths"] == [16, 32]
  assert tutorial["training"]["steps_per_dispatch"] == 8
  assert any((output / "jax_cache").iterdir())
  # Shards of separate vocabularies: base's three-way sharing becomes a tied output.
  config = json.loads((output / "base" / "config.json").read_text())
  assert config["model"]["output_weights"] == "tied" and config["data"]["tokens_per_batch"] == 1024
  # The epoch lines of train.py, with validation and tokens/s.
  assert result.stdout.count(" | val loss ") == 6 and result.stdout.count(" tok/s | ") == 6


def test_step_speed_times_both_arms(tmp_path):
  output = tmp_path / "step_speed.json"
  result = subprocess.run([sys.executable, "lab/bench/accelerator/step_speed.py", "--small",
                           "--warmup=1", "--steps=3", f"--output={output}"], cwd=REPO_DIR,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": ""})
  assert result.returncode == 0, result.stderr[-3000:]
  records = json.loads(output.read_text())
  assert [r["arm"] for r in records] == ["tutorial_2021", "base_bf16"]
  for record in records:
    rows, length = record["batch"]
    assert record["target_tokens_per_second"] == pytest.approx(
        record["steps"] * rows * length / record["seconds"])
    assert record["ratio_to_issue_47"] == pytest.approx(
        record["target_tokens_per_second"] / record["issue_47_tokens_per_second"])


def test_converge_small_trains_stops_on_validation_loss_and_scores(
    tmp_path, ted_data_dir, tutorial_tokenizer_path):
  """converge.py --small on real shards: the base run and one arm, each
  stopped at its lowest validation loss, averaged, and scored by the JAX
  evaluation in both scorings, with 20 samples."""
  prepared = tmp_path / "prepared"
  prepare = subprocess.run(
      [sys.executable, "prepare.py", "--config=configs/tiny.py", f"--data={ted_data_dir}",
       f"--tokenizer={tutorial_tokenizer_path}", f"--output={prepared}",
       "--train_examples=256", "--validation_examples=64", "--test_examples=32"],
      cwd=REPO_DIR, capture_output=True, text=True, timeout=600,
      env={**os.environ, "PYTHONPATH": str(REPO_DIR)})
  assert prepare.returncode == 0, prepare.stderr[-3000:]
  output = tmp_path / "converged"
  result = subprocess.run(
      [sys.executable, "lab/bench/accelerator/converge.py", f"--data={prepared}",
       f"--output={output}", "--small", "--arms=base,A_h1", "--minutes=30",
       "--base_share=0.02", "--arm_minutes=0.5", "--average=2"],
      cwd=REPO_DIR, capture_output=True, text=True, timeout=900,
      env={**os.environ, "PYTHONPATH": ""})
  assert result.returncode == 0, result.stderr[-3000:]
  summary = json.loads((output / "summary.json").read_text())
  assert [run["run"] for run in summary] == ["base", "A_h1"], summary
  assert all(run["epochs"] == 3 for run in summary), summary  # losses to stop on
  for run in summary:
    record = json.loads((output / run["run"] / "result.json").read_text())
    losses = [epoch["val_loss"] for epoch in record["epochs"]]
    assert run["val_loss"] == min(losses) and record["stopped_at"]["val_loss"] == min(losses)
    steps = [int(name.split("-")[1]) for name in record["checkpoints_averaged"]]
    assert 1 <= len(steps) <= 2 and max(steps) == record["stopped_at"]["step"]
    assert record["record"]["checkpoints"] and len(record["record"]["checkpoints"]) == len(steps)
    assert record["split"] == "test" and record["record"]["num_sentences"] == 24
    assert 0 <= run["bleu"] <= 100 and 0 <= run["whole_word_bleu"] <= 100
    assert (output / run["run"] / "samples.txt").read_text().count("  reference: ") == 20


def test_loop_speed_the_whole_loop_costs_no_more_than_the_compiled_step(tmp_path):
  """loop_speed.py --small on a one-layer model: the JAX trainer's whole loop
  at 8 steps a dispatch takes at most 1.05 times the CPU seconds per step of
  the compiled step alone, one step a call (medians of 3 alternating rounds in
  one process, so that other load weighs on both; 0.63 times on the 2-core
  development VM)."""
  output = tmp_path / "loop_speed.json"
  result = subprocess.run([sys.executable, "lab/bench/accelerator/loop_speed.py", "--small",
                           "--pairs=512", "--rounds=3", f"--output={output}"], cwd=REPO_DIR,
                          capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PYTHONPATH": ""})
  assert result.returncode == 0, result.stderr[-3000:]
  record = json.loads(output.read_text())
  assert record["steps"] >= 32 and record["shapes"] >= 2, record
  for arm in ("step_1", "step_8", "loop_8"):
    assert record[arm]["target_tokens_per_second"] == pytest.approx(
        record["real_target_tokens"] / (record[arm]["seconds_per_step"] * record["steps"]))
  assert record["loop_over_step_1"]["cpu_seconds"] <= 1.05, record
  # A checkpoint a round: the loop's wait for it, then the write done on its thread.
  rounds = record["checkpoint"]["rounds"]
  assert len(rounds) == 3 and all(0 < waits <= written for waits, written in rounds), record


def test_converge_refuses_a_folder_prepared_without_the_test_split(tmp_path):
  """It scores the test split: a folder of an older prepare.py (train and
  validation only, as random_prepared_folder writes) is one line, before any training."""
  prepared = random_prepared_folder(tmp_path / "prepared")
  result = subprocess.run(
      [sys.executable, "lab/bench/accelerator/converge.py", f"--data={prepared}",
       f"--output={tmp_path / 'converged'}", "--small"],
      cwd=REPO_DIR, capture_output=True, text=True, timeout=300,
      env={**os.environ, "PYTHONPATH": ""})
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      f"converge.py: error: {prepared} holds no test split (prepared by an older prepare.py, "
      "which wrote train and validation only); run prepare.py again with the same flags to "
      "write it"]
  assert not (tmp_path / "converged").exists()
