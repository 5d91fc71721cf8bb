"""A run folder of the JAX trainer under faults (issue 59, cases 2, 3 and 5): a
damaged newest checkpoint (flipped bits, a zeroed header or block, a cut
file) is found by its sha256 and the one before it is used, by train.py,
evaluate.py and translate.py alike; a resume that falls back writes each
epoch's record once. Signals that arrive while XLA compiles (issue 67, case
5) end in the scripts' one line and 128 + the signal's number. One run,
prepared and trained on the tiny configuration (2 epochs of 6 steps, a
checkpoint every 3), copied per test."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers.backends import needs_jax
from helpers.fault_runs import REPO_DIR, ONE_THREAD, assert_fails_in_one_line, copy_run, run_script

pytestmark = [pytest.mark.slow, needs_jax]


def _train_command(prepared, model_dir):
  return [sys.executable, "train.py", "--config=configs/tiny.py", f"--data={prepared}",
          f"--model_dir={model_dir}", "--config.training.epochs=2",
          "--config.data.max_tokens=16", "--config.data.batch_size=16",
          "--config.training.checkpoint_every_steps=3"]


def _train(prepared, model_dir, runner=None):
  env = {**os.environ, **ONE_THREAD, "PYTHONPATH": str(REPO_DIR), "KERAS_BACKEND": "jax"}
  command = _train_command(prepared, model_dir)
  if runner is not None:
    command.insert(1, str(runner))
  return subprocess.run(command, cwd=REPO_DIR, env=env, capture_output=True, text=True,
                        timeout=600, check=False)


# train.py with the disk full from the second checkpoint's optimizer file on
# (the first checkpoint writes two .npz files).
FULL_DISK_RUNNER = """
import errno, runpy, sys
import numpy as np

savez, written = np.savez, []
def savez_until_full(*args, **kwargs):
  written.append(args[0])
  if len(written) > 2:
    raise OSError(errno.ENOSPC, "No space left on device")
  savez(*args, **kwargs)
np.savez = savez_until_full
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory, small_data, tutorial_tokenizer_path):
  """(prepared folder, run folder with checkpoints step-3 ... step-12)."""
  folder = tmp_path_factory.mktemp("jax")
  prepared, model_dir = folder / "prepared", folder / "run"
  result = run_script("prepare.py", "--config=configs/tiny.py", f"--data={small_data}",
                      f"--tokenizer={tutorial_tokenizer_path}", f"--output={prepared}")
  assert result.returncode == 0, result.stderr[-3000:]
  result = _train(prepared, model_dir)
  assert result.returncode == 0, result.stderr[-3000:]
  assert (model_dir / "checkpoints" / "step-12").is_dir()
  return prepared, model_dir


def _damage(weights, how):
  data = bytearray(weights.read_bytes())
  if how == "cut":
    data = data[:len(data) // 2]
  elif how == "flipped_bits":  # float bits in the last quarter: the largest tensors' data
    for i in range(len(data) * 3 // 4, len(data) - 64, 997):
      data[i] ^= 0x10
  elif how == "zeroed_header":
    data[:512] = bytes(512)
  else:  # a zeroed 4 KiB block in the middle
    middle = len(data) // 2 // 4096 * 4096
    data[middle:middle + 4096] = bytes(4096)
  weights.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["cut", "flipped_bits", "zeroed_header", "zeroed_block"])
def test_a_damaged_newest_checkpoint_is_skipped_by_readers_and_set_aside_by_the_trainer(
    tmp_path, jax_run, how):
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
  from transformer.model import Transformer  # pylint: disable=g-import-not-at-top
  from transformer.run import keras_checkpoints  # pylint: disable=g-import-not-at-top
  model_dir = copy_run(jax_run[1], tmp_path)
  checkpoints = model_dir / "checkpoints"
  _damage(checkpoints / "step-12" / "model.weights.h5", how)
  # evaluate.py's and translate.py's reader: step-9, step-12 left where it is.
  config, _, _, paths = evaluation.restore_model_dir(model_dir)
  assert paths == [str(checkpoints / "step-9" / "model.weights.h5")]
  assert evaluation.newer_checkpoints(model_dir, "step-9") == ["step-12"]
  # train.py's: step-9, step-12 moved aside with the reason.
  manifest = json.loads((jax_run[0] / "manifest.json").read_text())
  model = Transformer.from_model_config(config.model, manifest["vocab_sizes"]["pt"],
                                        manifest["vocab_sizes"]["en"])
  model.build(((None, None), (None, None)))
  restored = keras_checkpoints.restore(checkpoints, model)
  assert restored[0] == checkpoints / "step-9"
  assert (checkpoints / "unreadable" / "step-12").is_dir()


def test_evaluate_falls_back_past_a_cut_newest_checkpoint(tmp_path, jax_run, small_data):
  model_dir = copy_run(jax_run[1], tmp_path)
  _damage(model_dir / "checkpoints" / "step-12" / "model.weights.h5", "cut")
  result = run_script("evaluate.py", f"--model_dir={model_dir}", f"--data={small_data}",
                      "--method=greedy", "--max_sentences=2")
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"restored the checkpoint step-9 of {model_dir}" in result.stderr, result.stderr
  assert ("evaluate.py: warning: skipped the newer step-12: cannot be read in full"
          in result.stderr), result.stderr


def test_translate_finds_a_jax_runs_checkpoints(jax_run):
  result = run_script("translate.py", f"--model_dir={jax_run[1]}", "--method=greedy",
                      "este é um problema .")
  assert result.returncode == 0, result.stderr[-3000:]
  assert len(result.stdout.splitlines()) == 1 and result.stdout.strip(), result.stdout


def test_a_resume_that_falls_back_writes_each_epochs_record_once(tmp_path, jax_run):
  prepared, finished = jax_run
  model_dir = tmp_path / "run"
  shutil.copytree(finished, model_dir)
  _damage(model_dir / "checkpoints" / "step-12" / "model.weights.h5", "cut")
  shutil.rmtree(model_dir / "export")  # so that the rerun has something left to do
  result = _train(prepared, model_dir)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "skipping the checkpoint" in result.stderr and "step-12" in result.stderr
  records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
  assert [r["epoch"] for r in records] == [1, 2], records
  assert records[-1]["step"] == 12 and records[-1]["complete"]


def test_a_full_disk_at_a_checkpoint_written_in_the_background_is_one_line(tmp_path, jax_run):
  prepared, _ = jax_run
  runner = tmp_path / "full_disk.py"
  runner.write_text(FULL_DISK_RUNNER)
  model_dir = tmp_path / "run"
  result = _train(prepared, model_dir, runner)
  checkpoints = model_dir / "checkpoints"
  assert_fails_in_one_line(
      result.returncode, result.stderr,
      rf"train.py: error: cannot write the checkpoint {checkpoints / 'step-6'}: .*No space left "
      rf"on device.*The last good checkpoint is {checkpoints / 'step-3'}; free space and rerun")
  # The failure stopped the run at the next stack: no later checkpoint, nothing half written.
  assert sorted(p.name for p in checkpoints.iterdir()) == ["step-3"]
  assert not (model_dir / "export").exists()


# The script named first, with the signals COMPILE_SIGNALS (comma-separated
# NAME@SECONDS) sent to itself from another thread that many seconds after
# XLA starts compiling the module COMPILE_MODULE the first time: the main
# thread then waits in jaxlib for the compile on XLA's own threads.
SIGNALS_IN_COMPILE_RUNNER = """
import os, runpy, signal, sys, threading, time
from jax._src import compiler
from jax._src.lib.mlir import ir

module, signals = os.environ["COMPILE_MODULE"], os.environ["COMPILE_SIGNALS"].split(",")
compile_and_load, sent = compiler.backend_compile_and_load, []

def send():
  start = time.monotonic()
  for name, seconds in (item.split("@") for item in signals):
    time.sleep(max(0, start + float(seconds) - time.monotonic()))
    os.kill(os.getpid(), getattr(signal, name))

def signalled_compile(backend, computation, *args, **kwargs):
  if ir.StringAttr(computation.operation.attributes["sym_name"]).value == module and not sent:
    sent.append(module)
    threading.Thread(target=send, daemon=True).start()
  return compile_and_load(backend, computation, *args, **kwargs)
compiler.backend_compile_and_load = signalled_compile
if "SIGINT" in os.environ["COMPILE_SIGNALS"]:  # Ctrl-C as in a terminal, even if the suite ignores it
  signal.signal(signal.SIGINT, signal.default_int_handler)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _run_under_jax(tmp_path, *args, **env):
  """``args`` (a script or runner and its flags) under KERAS_BACKEND=jax, with
  the per-user compilation cache under ``tmp_path/home``, empty at first, and
  ``env`` added to the environment."""
  run_env = {key: value for key, value in os.environ.items()
             if key != "JAX_COMPILATION_CACHE_DIR"}
  run_env.update(ONE_THREAD, PYTHONPATH=str(REPO_DIR), KERAS_BACKEND="jax",
                 XDG_CACHE_HOME=str(tmp_path / "home"), **env)
  return subprocess.run([sys.executable, *map(str, args)], cwd=REPO_DIR, env=run_env,
                        capture_output=True, text=True, timeout=600, check=False)


def _run_with_signals_in_compile(tmp_path, module, signals, *args):
  """``args`` (a script and its flags) under JAX with ``signals`` sent while
  ``module`` compiles (the cache is empty, so it compiles)."""
  runner = tmp_path / "signals_in_compile.py"
  runner.write_text(SIGNALS_IN_COMPILE_RUNNER)
  return _run_under_jax(tmp_path, runner, *args, COMPILE_MODULE=module,
                        COMPILE_SIGNALS=",".join(signals))


@pytest.mark.parametrize("signal_name, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_while_evaluate_compiles_the_beam_search_is_one_line(
    tmp_path, jax_run, signal_name, code):
  prepared, model_dir = jax_run
  result = _run_with_signals_in_compile(
      tmp_path, "jit__buffers", [f"{signal_name}@0.05"], "evaluate.py", f"--model_dir={model_dir}",
      f"--data={prepared}", "--split=test", f"--output_dir={tmp_path / 'bleu'}")
  assert result.returncode == code, result.stderr[-3000:]
  assert "Segmentation fault" not in result.stderr and "Traceback" not in result.stderr
  assert result.stderr.splitlines()[-1] == (
      f"evaluate.py: stopped by {signal_name} before it finished (it leaves no file half "
      "written); rerun the same command to score"), result.stderr[-3000:]
  assert not (tmp_path / "bleu").exists() or not any((tmp_path / "bleu").iterdir())


def test_a_second_sigterm_while_train_compiles_is_one_line(tmp_path, jax_run):
  model_dir = tmp_path / "run"
  result = _run_with_signals_in_compile(
      tmp_path, "jit_train_stack", ["SIGTERM@0.05", "SIGTERM@0.5"],
      *_train_command(jax_run[0], model_dir)[1:])
  assert result.returncode == 143, result.stderr[-3000:]
  assert "Segmentation fault" not in result.stderr and "Traceback" not in result.stderr
  lines = result.stderr.splitlines()
  assert ("warning: received SIGTERM: stopping after the current step and saving a checkpoint "
          "(send it again to abort at once)") in lines, result.stderr[-3000:]
  assert lines[-1] == ("train.py: error: interrupted by SIGTERM; rerun the same command to "
                       "resume from the last checkpoint"), result.stderr[-3000:]


def test_a_second_evaluation_loads_the_decoding_steps_the_first_compiled(tmp_path, jax_run):
  # evaluate.py under JAX uses train.py's compilation cache (issue 66), here the per-user
  # default; every compile is cached (JAX skips those under a second by default).
  prepared, model_dir = jax_run
  folder = tmp_path / "home" / "transformer-pt-en" / "jax"
  found = []
  for output in ("first", "second"):
    result = _run_under_jax(tmp_path, "evaluate.py", f"--model_dir={model_dir}",
                            f"--data={prepared}", "--split=test", "--max_sentences=4",
                            f"--output_dir={tmp_path / output}",
                            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    assert result.returncode == 0, result.stderr[-3000:]
    assert folder.is_dir(), result.stderr[-3000:]
    found.append({path.name: path.stat().st_mtime_ns for path in folder.glob("*-cache")})
  assert any(name.startswith("jit__buffers-") for name in found[0]), found[0]  # the beam search
  assert found[1] == found[0]  # every step found, none compiled and written again


@pytest.mark.parametrize("script", ["translate.py", "evaluate.py"])
def test_keras_backend_jax_left_exported_runs_tensorflow_inputs_on_tensorflow(
    tmp_path, jax_run, small_data, script):
  # A JAX run's checkpoints translated, and scored on the TED files: both TensorFlow's paths.
  args = (["--method=greedy", "este é um problema ."] if script == "translate.py" else
          [f"--data={small_data}", "--split=test", "--method=greedy", "--max_sentences=2",
           f"--output_dir={tmp_path / 'bleu'}"])
  result = _run_under_jax(tmp_path, script, f"--model_dir={jax_run[1]}", *args)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  assert result.stderr.splitlines()[0].startswith(
      f"{script}: KERAS_BACKEND=jax is not used: "), result.stderr[-3000:]
  if script == "translate.py":
    assert len(result.stdout.splitlines()) == 1 and result.stdout.strip(), result.stdout
  else:
    assert (tmp_path / "bleu" / "test.greedy.partial2.json").is_file(), result.stderr[-3000:]


def test_running_out_of_memory_while_building_the_model_under_jax_is_one_line(tmp_path):
  """A 7,765 × 262,144 embedding does not fit: XLA's RESOURCE_EXHAUSTED is one
  line naming the configuration to shrink, as the TensorFlow path's (test_faults.py)."""
  from helpers.prepared import random_prepared_folder  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "run"
  result = _run_under_jax(tmp_path, "train.py", "--config=configs/tiny.py",
                          f"--data={random_prepared_folder(tmp_path / 'prepared')}",
                          f"--model_dir={model_dir}", "--config.model.d_model=262144",
                          "--config.model.num_heads=1", "--compilation_cache=off")
  assert_fails_in_one_line(
      result.returncode, result.stderr,
      r"train.py: error: out of memory while building the model \(.*RESOURCE_EXHAUSTED: .*\); "
      r"try a smaller configuration \(config.model\), or free memory$")
