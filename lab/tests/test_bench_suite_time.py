"""lab/bench/suite_time.py: it times a tier through pytest and records what ran."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

# Runs the script, which loads TensorFlow and starts pytest.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _time(tmp_path, *args):
  output = tmp_path / "suite_time.json"
  result = subprocess.run([sys.executable, "lab/bench/suite_time.py", "--tiers=quick",
                           f"--output={output}", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
  return result, json.loads(output.read_text(encoding="utf-8"))


def test_a_tier_is_timed_with_its_counts_and_cpu_seconds(tmp_path):
  result, record = _time(tmp_path, "--pytest_args=tests/unit/test_config.py,-n,0")
  assert result.returncode == 0, result.stderr[-3000:]
  tier = record["tiers"]["quick"]
  assert tier["command"] == ["python", "-m", "pytest", "-m", "not slow",
                             "tests/unit/test_config.py", "-n", "0"]
  assert tier["exit_code"] == 0 and tier["counts"]["passed"] > 5, tier["summary"]
  assert tier["wall_seconds"] > 0 and tier["cpu_seconds"] > 0
  slowest = tier["slowest_tests"]
  assert len(slowest) == min(15, tier["counts"]["passed"]) and slowest[0]["test"].startswith(
      "tests.unit.test_config::") and slowest[0]["seconds"] >= slowest[-1]["seconds"]
  assert tier["failed_tests"] == []
  assert "load_average" in tier["other_activity_before"]
  assert record["machine"]["cores"] >= 1
  assert result.stdout.startswith("quick: ") and "min wall" in result.stdout
  # Only its own progress on stderr: none of TensorFlow's start-up lines.
  assert result.stderr.splitlines() == ["quick: running ..."], result.stderr[-3000:]


def test_a_tier_that_does_not_pass_is_one_error_line(tmp_path):
  result, record = _time(tmp_path, "--pytest_args=tests/unit/test_config.py,-n,0,-k,no_such_test")
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      "suite_time.py: error: quick did not pass; see ")
  assert record["tiers"]["quick"]["counts"]["deselected"] > 5


def test_the_tests_that_fail_are_named(tmp_path):
  tests = tmp_path / "test_one_fails.py"
  tests.write_text("def test_passes():\n  pass\n\n\ndef test_fails():\n  assert False\n")
  result, record = _time(tmp_path, f"--pytest_args={tests},-n,0")
  assert result.returncode == 1
  tier = record["tiers"]["quick"]
  assert tier["counts"] == {"failed": 1, "passed": 1}, tier["summary"]
  assert [name.split("::")[-1] for name in tier["failed_tests"]] == ["test_fails"]
