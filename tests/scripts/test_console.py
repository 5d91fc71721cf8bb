"""What translate.py prints: what a person needs, not TensorFlow's own log lines
(C++ start-up messages, SavedModel details), unless --verbose; and how the
scripts start TensorFlow (threads, allocator). train.py's console:
test_console_truth.py, which shares its runs."""

import functools
import logging
import os
from pathlib import Path
import subprocess
import sys

import pytest

from helpers.tf_log_lines import CPP_LOG_LINE
from helpers.tf_log_lines import TF_PYTHON_LOG_LINE

# Each test runs a script or a TensorFlow import in a fresh Python.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = ["este é um problema que temos que resolver .", "olá ."]


def run_script(script, *args):
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  return subprocess.run([sys.executable, script, *map(str, args)], cwd=ROOT,
                        env={**env, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                        capture_output=True, timeout=600, check=False)


def test_translate_prints_only_the_translations(tiny_translator_dir):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  result = run_script("translate.py", f"--export_dir={tiny_translator_dir}", *SENTENCES)
  assert result.returncode == 0, result.stderr.decode()[-3000:]
  assert result.stderr == b""
  translator = tf.saved_model.load(str(tiny_translator_dir))
  expected = translator.translate(tf.constant(SENTENCES)).numpy()
  assert result.stdout == b"".join(t + b"\n" for t in expected)


def test_translate_verbose_shows_tensorflow_logs(tiny_translator_dir):
  result = run_script("translate.py", f"--export_dir={tiny_translator_dir}", "--verbose",
                      "olá .")
  assert result.returncode == 0
  stderr = result.stderr.decode()
  assert CPP_LOG_LINE.search(stderr) or TF_PYTHON_LOG_LINE.search(stderr), stderr[-3000:]
  assert len(result.stdout.splitlines()) == 1


def test_export_drops_the_signature_renaming_notices(tiny_config, make_model, tutorial_tokenizers,
                                                     tmp_path, monkeypatch, caplog):
  from transformer.inference import export  # pylint: disable=g-import-not-at-top

  def save_logging_as_tensorflow_does(obj, export_dir, signatures):
    del obj, export_dir, signatures
    for module in ("signature_serialization", "builder_impl"):
      logging.getLogger("absl").handle(logging.LogRecord(
          "absl", logging.INFO, f"tensorflow/python/saved_model/{module}.py", 1,
          f"a record of {module}", None, None))

  model = make_model(vocab_sizes=(7765, 7010))
  monkeypatch.setattr(export.tf.saved_model, "save", save_logging_as_tensorflow_does)
  export.export_translator(model, tutorial_tokenizers, tmp_path, tiny_config().decoding)
  assert [r.getMessage() for r in caplog.records] == ["a record of builder_impl"]


# How TensorFlow starts: train.py, evaluate.py and translate.py through
# runtime.import_tensorflow; a benchmark by importing bench.machine first and
# then modules of transformer/ that import TensorFlow (lab/bench/sweep.py's order).
STARTS = {
    "script": "from transformer.run import runtime\ntf = runtime.import_tensorflow(verbose=False)",
    "benchmark": "from lab.bench import machine\nfrom transformer.training.tf_engine import TensorFlowTrainer\nimport tensorflow as tf",
}
# Pinned to one core, as `taskset -c 0` does.
PINNED = "import os\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
# After the start: set_cpu_threads(argv[1]) if given, then the pools' threads
# and which allocator CPU tensors use. Only a BFC allocator counts the bytes it
# hands out: with malloc TensorFlow raises on some CPUs and reports a peak of 0
# on others (an AVX-512 EPYC).
PROBE = """
import sys
from transformer.run import runtime
if len(sys.argv) > 1:
  runtime.set_cpu_threads(tf, int(sys.argv[1]))
print(tf.config.threading.get_intra_op_parallelism_threads(),
      tf.config.threading.get_inter_op_parallelism_threads())
tf.linalg.matmul(tf.ones([64, 64]), tf.ones([64, 64]))
try:
  peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
except ValueError:
  peak = 0
print("bfc" if peak > 0 else "malloc")
"""
# The probes the thread and allocator tests ask: (start, set_cpu_threads'
# argument or None, environment). Each answers a thread test and an allocator
# test, as TensorFlow loads once per process and TF_NUM_* and
# TF_CPU_ALLOCATOR_USE_BFC do not touch each other.
PROBES = {
    "script": ("script", None, {}),
    "script, thread variables, no BFC": (
        "script", None, {"TF_NUM_INTRAOP_THREADS": "3", "TF_NUM_INTEROP_THREADS": "2",
                         "TF_CPU_ALLOCATOR_USE_BFC": "0"}),
    "benchmark --threads=3": (
        "benchmark", 3, {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}),
    "benchmark, no BFC": ("benchmark", None, {"TF_CPU_ALLOCATOR_USE_BFC": "0"}),
}


@functools.cache
def _probe(name):
  """PROBES[name] in a fresh Python pinned to one core: [intra-op threads,
  inter-op threads, "bfc" or "malloc"]."""
  start, threads, env = PROBES[name]
  clean = {k: v for k, v in os.environ.items()
           if not k.startswith("TF_NUM_") and k != "TF_CPU_ALLOCATOR_USE_BFC"}
  result = subprocess.run([sys.executable, "-c", PINNED + STARTS[start] + PROBE,
                           *([] if threads is None else [str(threads)])], cwd=ROOT,
                          env={**clean, "PYTHONPATH": str(ROOT), **env},
                          capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout.split()


def test_threads_follow_the_cores_the_process_may_use():
  # Pinned to one core (as `taskset -c 0` does), TensorFlow's default would
  # still be one thread per machine core.
  assert _probe("script")[:2] == ["1", "1"]


def test_thread_environment_variables_win():
  # Set in the environment, TensorFlow reads them itself; the pools are left
  # unset (0) by import_tensorflow.
  assert _probe("script, thread variables, no BFC")[:2] == ["0", "0"]


def test_an_explicit_thread_count_wins_over_cores_and_environment():
  # A benchmark's --threads: both pools get exactly that many, whatever the
  # affinity and the TF_NUM_* variables say.
  assert _probe("benchmark --threads=3")[:2] == ["3", "3"]


@pytest.mark.parametrize("probe, expected", [
    ("script", "bfc"), ("script, thread variables, no BFC", "malloc"),
    ("benchmark --threads=3", "bfc"), ("benchmark, no BFC", "malloc")])
def test_cpu_tensors_use_the_bfc_allocator_unless_the_user_says_no(probe, expected):
  assert _probe(probe)[2] == expected
