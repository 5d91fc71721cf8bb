"""The accelerator drivers under faults (issue 67, case 1): run.py,
converge.py and call.py (device_call.sh's) hand SIGINT/SIGTERM to their train.py, wait for its checkpoint,
leave no lock, say in one line where the run stopped, and the same command
resumes; their flags are refused before any work."""

import json
import os
from pathlib import Path
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from helpers.backends import needs_jax
from helpers.prepared import random_prepared_folder

REPO_DIR = Path(__file__).resolve().parents[2]
RUN = "lab/bench/accelerator/run.py"
CONVERGE = "lab/bench/accelerator/converge.py"
CALL = "lab/bench/accelerator/call.py"
ENV = {**os.environ, "PYTHONPATH": "", "PYTHONUNBUFFERED": "1"}


def _refused(args):
  return subprocess.run([sys.executable, *args], cwd=REPO_DIR, capture_output=True, text=True,
                        timeout=120, env=ENV)


@pytest.mark.parametrize("small", [[], ["--small"]])
def test_run_refuses_zero_base_epochs_before_any_work(tmp_path, small):
  prepared = random_prepared_folder(tmp_path / "prepared")
  result = _refused([RUN, f"--data={prepared}", f"--output={tmp_path / 'runs'}",
                     "--base_epochs=0", *small])
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      "run.py: error: --base_epochs must be >= 1, got 0"]
  assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("average", ["0", "-1"])
def test_converge_refuses_an_average_of_no_checkpoints(tmp_path, average):
  prepared = random_prepared_folder(tmp_path / "prepared")
  result = _refused([CONVERGE, f"--data={prepared}", f"--output={tmp_path / 'out'}",
                     f"--average={average}"])
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      f"converge.py: error: --average must be >= 1, got {average}"]
  assert not (tmp_path / "out").exists()


def test_a_rerun_with_another_command_is_refused(tmp_path):
  prepared = random_prepared_folder(tmp_path / "prepared")
  output = tmp_path / "runs"
  output.mkdir()
  (output / "command.json").write_text(json.dumps(
      {"data": str(prepared.resolve()), "base_epochs": 3, "small": True}))
  result = _refused([RUN, f"--data={prepared}", f"--output={output}", "--small"])
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      f"run.py: error: --output={output} holds runs of another command (--base_epochs was 3, "
      "now 2); rerun that command to resume them, or choose a new --output"]


class _Driver:
  """A driver started with its output (stdout and stderr) read as it comes."""

  def __init__(self, args):
    self.process = subprocess.Popen([sys.executable, *args], cwd=REPO_DIR, env=ENV, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    self.lines = []
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def _read(self):
    for line in self.process.stdout:
      self.lines.append(line.rstrip("\n"))

  def wait_for(self, pattern, timeout=600):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
      if any(re.search(pattern, line) for line in list(self.lines)):
        return
      if self.process.poll() is not None:
        break
      time.sleep(0.1)
    raise AssertionError(f"no line matching {pattern!r}:\n" + "\n".join(self.lines[-40:]))

  def finish(self, timeout=900):
    code = self.process.wait(timeout=timeout)
    self._reader.join(timeout=10)
    return code, "\n".join(self.lines)


def _children_of(pid):
  """The PIDs whose parent is ``pid`` (from /proc)."""
  found = []
  for entry in Path("/proc").iterdir():
    if entry.name.isdigit():
      try:
        fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
      except OSError:
        continue
      if int(fields[1]) == pid:
        found.append(int(entry.name))
  return found


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  stat = Path(f"/proc/{pid}/stat")
  return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _stopped_and_clean(driver, signum, script, run_dir):
  """Sends ``signum`` to the driver once its train.py trains, and checks that
  the child saved a checkpoint and exited, with no lock left and one line."""
  driver.wait_for(r"^training from step 0")
  trainers = _children_of(driver.process.pid)
  driver.process.send_signal(signum)
  code, text = driver.finish()
  assert code == 128 + signum, text[-3000:]
  assert "Traceback" not in text, text[-3000:]
  name = signal.Signals(signum).name
  lines = [line for line in text.splitlines() if line.startswith(f"{script}: ")]
  assert len(lines) == 1 and re.fullmatch(
      rf"{re.escape(script)}: stopped by {name}: {run_dir.name} stopped at step \d+ \(\d+ "
      r"epochs? recorded\); rerun the same command to resume", lines[0]), text[-3000:]
  assert not any(_alive(pid) for pid in trainers), "train.py outlived its driver"
  assert not (run_dir / "train.lock").exists()
  assert any((run_dir / "checkpoints").glob("step-*")), text[-3000:]


@pytest.mark.slow
@needs_jax
def test_sigterm_to_run_py_stops_its_train_py_cleanly_and_the_same_command_resumes(tmp_path):
  prepared = random_prepared_folder(tmp_path / "prepared", pairs=128)
  output = tmp_path / "runs"
  args = [RUN, f"--data={prepared}", f"--output={output}", "--small", "--base_epochs=3"]
  _stopped_and_clean(_Driver(args), signal.SIGTERM, "run.py", output / "tutorial")
  code, text = _Driver(args).finish()
  assert code == 0, text[-3000:]
  assert "restored checkpoint" in text, text[-3000:]
  summary = json.loads((output / "summary.json").read_text())
  assert [run["run"] for run in summary] == ["tutorial", "tutorial_warm", "base"]
  assert [run["epochs"] for run in summary] == [2, 2, 3]


@pytest.mark.slow
@needs_jax
def test_ctrl_c_to_converge_py_stops_its_train_py_cleanly_and_the_same_command_resumes(
    tmp_path):
  prepared = random_prepared_folder(tmp_path / "prepared", pairs=128, test_pairs=24)
  output = tmp_path / "converged"
  args = [CONVERGE, f"--data={prepared}", f"--output={output}", "--small", "--arms=base",
          "--average=2"]
  _stopped_and_clean(_Driver(args), signal.SIGINT, "converge.py", output / "runs" / "base")
  code, text = _Driver(args).finish()
  assert code == 0, text[-3000:]
  assert "restored checkpoint" in text, text[-3000:]
  summary = json.loads((output / "summary.json").read_text())
  assert [run["run"] for run in summary] == ["base"] and summary[0]["epochs"] == 3


@pytest.mark.slow
@needs_jax
def test_sigterm_to_the_calls_driver_stops_its_train_py_cleanly_and_the_same_command_resumes(
    tmp_path):
  """call.py, which device_call.sh becomes: the run stopped is resumed by the
  same command and then stopped by its validation loss."""
  prepared = random_prepared_folder(tmp_path / "prepared", pairs=128, test_pairs=24)
  work = tmp_path / "work"
  args = [CALL, f"--out={tmp_path / 'out'}", f"--work={work}", "--tiny", "--phases=tutorial",
          f"--tutorial_data={prepared}", f"--base_data={prepared}", "--patience=1",
          "--min_run_seconds=5", "--seconds=900"]
  _stopped_and_clean(_Driver(args), signal.SIGTERM, "call.py", work / "runs" / "tutorial")
  code, text = _Driver(args).finish()
  assert code == 0, text[-3000:]
  assert "restored checkpoint" in text, text[-3000:]
  tutorial = json.loads((tmp_path / "out" / "summary.json").read_text())["tutorial"]
  assert tutorial["stopped_by_validation_loss"] == 1 and tutorial["recompiles"] == 0, tutorial
