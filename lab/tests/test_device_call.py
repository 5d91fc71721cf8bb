"""The accelerator call's rehearsal (issue 66): ``device_call.sh --rehearsal``
runs every phase of the call on the CPU with one-layer models, in a scratch copy
of what would travel (``git archive HEAD``, so it runs the committed code, and
``pack.py --rehearsal``'s folders), TensorFlow unimportable; it exits 0, what it
leaves in $OUT fits the device's return limits, and every field of
``summary.json`` is there and a number, with no recompile. Once under this
environment's JAX, once under the device's Python 3.12 and JAX 0.11.2."""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from helpers.backends import needs_jax

pytestmark = [pytest.mark.slow, needs_jax]

REPO_DIR = Path(__file__).resolve().parents[2]
# The device's versions: a virtual environment of Python 3.12 with jax==0.11.2
# beside the repository (docs/training.md says how to make one), or $DEVICE_PYTHON.
DEVICE_PYTHON = Path(os.environ.get("DEVICE_PYTHON", REPO_DIR.parent / "venv312" / "bin" /
                                    "python"))
RUN_FIELDS = {"epochs", "best_epoch", "steps", "val_loss", "accuracy", "last_accuracy",
              "compile_seconds", "training_seconds", "first_epoch_seconds", "compiles",
              "recompiles", "target_tokens_per_second", "wall_seconds",
              "stopped_by_validation_loss", "stopped_by_deadline"}
SCORED = {"bleu", "whole_word_bleu", "checkpoints_averaged", "scoring_seconds"}
LOOP = {"loop_tokens_per_second", "step_tokens_per_second", "loop_over_step", "wall_seconds"}


def _numbers_only(record):
  return all(isinstance(value, (int, float)) and not isinstance(value, bool)
             for value in record.values())


def _rehearse(tmp_path, python):
  if not (REPO_DIR / ".git").exists():
    pytest.skip("the rehearsal copies `git archive HEAD`: this is not a git checkout")
  env = {**os.environ, "REHEARSAL_DIR": str(tmp_path / "rehearsal"), "PYTHON": str(python),
         "PACK_PYTHON": sys.executable, "PYTHONPATH": ""}
  result = subprocess.run(["bash", "lab/bench/accelerator/device_call.sh", "--rehearsal"],
                          cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=1200)
  assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])
  out = tmp_path / "rehearsal" / "out"
  files = [path for path in out.rglob("*") if path.is_file()]
  assert 0 < len(files) <= 8 and all(path.stat().st_size <= 16 * 2**20 for path in files)
  assert all(len(path.relative_to(out).parts) <= 3 for path in files)
  summary = json.loads((out / "summary.json").read_text())
  assert list(summary) == ["tutorial", "base", "loop", "arms", "table3"], summary
  assert set(summary["tutorial"]) == RUN_FIELDS, summary["tutorial"]
  assert set(summary["loop"]) == LOOP and _numbers_only(summary["loop"]), summary["loop"]
  assert set(summary["base"]) == RUN_FIELDS | SCORED, summary["base"]
  runs = [summary["tutorial"], summary["base"], *summary["arms"].values(),
          *summary["table3"].values()]
  assert len(summary["arms"]) == 2 and len(summary["table3"]) == 1, summary
  for record in (*summary["arms"].values(), *summary["table3"].values()):
    assert set(record) == RUN_FIELDS | SCORED, record
  for record in runs:
    assert _numbers_only(record), record
    assert record["recompiles"] == 0 and record["compiles"] >= 2, record
    # A compile the cache answers can print 0.0 s: the seconds are there, apart.
    assert record["compile_seconds"] >= 0 and record["training_seconds"] > 0, record
  # Stopped by the validation loss, not by the clock, each with what it averaged.
  assert all(record["stopped_by_validation_loss"] for record in runs), summary
  assert all(0 < record["checkpoints_averaged"] <= 2 for record in runs[1:]), summary
  # Only what averaging needs is kept of the runs, outside $OUT.
  for run in (tmp_path / "rehearsal" / "work" / "runs").iterdir():
    assert len(list((run / "checkpoints").glob("step-*"))) <= 2, run
  machine = json.loads((out / "machine.json").read_text())
  return result.stdout, machine


def test_the_rehearsal_passes_under_this_environments_jax(tmp_path):
  stdout, machine = _rehearse(tmp_path, sys.executable)
  assert machine["python"] == ".".join(map(str, sys.version_info[:3])), machine
  assert "within the return limits" in stdout


def test_the_rehearsal_passes_under_the_devices_python_and_jax(tmp_path):
  """The wheels pack.py gathered are installed there (Keras is missing), as on the device."""
  if not DEVICE_PYTHON.is_file():
    pytest.skip(f"no Python 3.12 environment with jax==0.11.2 at {DEVICE_PYTHON} (set "
                "DEVICE_PYTHON; docs/training.md says how to make one)")
  if not any((REPO_DIR / "prepared" / "wheels").glob("keras-*.whl")):
    pytest.skip("no wheels in prepared/wheels: run lab/bench/accelerator/pack.py first")
  stdout, machine = _rehearse(tmp_path, DEVICE_PYTHON)
  assert machine["python"].startswith("3.12.") and machine["jax"] == "0.11.2", machine
  assert "== installing keras-" in stdout, stdout[-3000:]
