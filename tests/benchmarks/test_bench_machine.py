"""lab/bench/machine.py: what the benchmarks record about the process and machine."""

from pathlib import Path
import subprocess
import sys

from lab.bench import machine

ROOT = Path(__file__).resolve().parents[2]
MIB = 2 ** 20


def test_peak_memory_of_a_child_is_its_own():
  # A child started by a large process must not report the parent's size
  # (getrusage's ru_maxrss survives execve on Linux).
  ballast = b"\x01" * (800 * MIB)
  assert machine.peak_rss_bytes() >= 800 * MIB
  child = subprocess.run(
      [sys.executable, "-c", "from lab.bench import machine; print(machine.peak_rss_bytes())"],
      cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
  del ballast
  assert 0 < int(child.stdout) < 200 * MIB
