"""The bench scripts that read run folders (lab/bench/cli.py): a damaged file, a
missing folder or a signal is one line on stderr, with the conventional exit
status, as for train.py, evaluate.py and translate.py."""

import json
import os
from pathlib import Path
import signal
import subprocess
import sys

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]


def run(args, **kwargs):
  env = {**os.environ, "PYTHONPATH": str(REPO_DIR), "TF_CPP_MIN_LOG_LEVEL": "3"}
  return subprocess.run([sys.executable, *args], cwd=REPO_DIR, env=env, capture_output=True,
                        text=True, timeout=300, **kwargs)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_is_one_line_and_128_plus_its_number(signum):
  # SIGINT as a foreground command has it, also when pytest runs under `nohup ... &`
  # (which starts it ignored, and an ignored signal stays ignored).
  stopped = run(["-c", (
      "import os, sys, time\n"
      "sys.argv = ['probe.py']\n"
      "from lab.bench import cli\n"
      "def main(argv):\n"
      f"  os.kill(os.getpid(), {int(signum)})\n"
      "  time.sleep(30)\n"
      "cli.run(main)\n")], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  assert stopped.returncode == 128 + signum, stopped.stderr
  assert stopped.stderr == f"probe.py: stopped by {signal.Signals(signum).name}\n"


def test_a_missing_run_folder_is_one_line_naming_it(tmp_path):
  missing = tmp_path / "no_such_run"
  compared = run(["lab/bench/compare_runs.py", f"--run=a:{missing}", f"--output={tmp_path}/c"])
  assert compared.returncode == 1
  # Before it: TensorFlow's start-up lines, which the bench scripts do not hide.
  assert "Traceback" not in compared.stderr
  assert compared.stderr.splitlines()[-1] == (
      f"compare_runs.py: error: FileNotFoundError: --run 'a:{missing}': no metrics.jsonl in "
      f"{missing}"), compared.stderr


@pytest.mark.slow  # imports TensorFlow for the TensorBoard events
def test_a_damaged_bleu_record_is_one_line_naming_it(tmp_path):
  model_dir = tmp_path / "run"
  (model_dir / "bleu").mkdir(parents=True)
  record = {"complete": True, "epoch": 1, "learning_rate": 6.6e-4, "seconds": 343.4, "step": 656,
            "steps_in_epoch": 656, "tokens_per_second": 3334.1, "train_accuracy": 0.17,
            "train_loss": 6.32, "val_accuracy": 0.25, "val_loss": 5.36}
  (model_dir / "metrics.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
  (model_dir / "config.json").write_text('{"training": {"warmup_steps": 100}}\n', encoding="utf-8")
  damaged = model_dir / "bleu" / "test.beam.json"
  damaged.write_text('{"bleu": 3', encoding="utf-8")  # a write cut short
  reported = run(["lab/bench/run_report.py", f"--model_dir={model_dir}",
                  f"--results_dir={tmp_path / 'results'}"])
  assert reported.returncode == 1, reported.stderr
  assert "Traceback" not in reported.stderr
  assert reported.stderr.splitlines()[-1].startswith(
      f"run_report.py: error: {damaged}: not valid JSON (line 1:"), reported.stderr
