"""What the tests that train on two replicas in a child Python share: the child's
set-up as script text, and starting and waiting for the child.

Two logical CPU devices must be set up before TensorFlow initializes its
devices, and a second ``MirroredStrategy`` in one process collides on
collective keys, so each such run is a script of its own.
"""

import os
from pathlib import Path
import subprocess
import sys
import textwrap

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]

# Splits the CPU into two logical devices: a MirroredStrategy's two replicas.
TWO_CPU_DEVICES = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
"""

# configs/tiny.py made narrower; the runs compared must agree.
SMALL_CONFIG = """
from configs import tiny
from transformer.training.tf_engine import TensorFlowTrainer

VOCAB = 40

def small_config():
  c = tiny.get_config()
  c.model.d_model = 16
  c.model.dff = 32
  c.model.num_heads = 2
  c.model.dropout_rate = 0.0  # no randomness: the runs must agree
  c.training.warmup_steps = 4  # large steps, so a wrong gradient shows
  return c
"""


def start_script(script: str, cwd: Path, *args: str, env=None) -> subprocess.Popen:
  """Starts ``script`` in its own Python process in ``cwd``; stdout and stderr as one."""
  path = cwd / "script.py"
  path.write_text(textwrap.dedent(script))
  full_env = {**os.environ, "PYTHONPATH": str(REPO_DIR), "TF_CPP_MIN_LOG_LEVEL": "2",
              **(env or {})}
  return subprocess.Popen([sys.executable, str(path), *args], cwd=cwd, env=full_env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def script_output(proc: subprocess.Popen, timeout: float, what: str) -> str:
  """Waits for ``proc`` and returns its output; fails the test if it hangs or fails."""
  try:
    output, _ = proc.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    proc.kill()
    pytest.fail(f"{what} hung (killed after {timeout} s)")
  assert proc.returncode == 0, output[-3000:]
  return output
