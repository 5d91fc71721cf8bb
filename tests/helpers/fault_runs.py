"""Runs of train.py and the other scripts with one fault injected at a fixed
point (tests/faults): the driver, its command lines and what to read back."""

import json
import os
from pathlib import Path
import re
import shutil
import subprocess
import sys

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]
ONE_THREAD = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
              "TF_NUM_INTEROP_THREADS": "1"}

# train.py in this process, with the fault FAULT at a fixed point:
#   kill_in_first_checkpoint_write: SIGKILL once ckpt-N_temp/ is written, before
#     TensorFlow merges it into ckpt-N.* (the first save);
#   pause_at_step: after step FAULT_STEP, wait until <model_dir>.release exists;
#   sigterm_in_export: SIGTERM to itself as the export starts;
#   full_disk_after_step: after step FAULT_STEP, files may not grow past 256 KiB
#     (RLIMIT_FSIZE, which any user may lower): a checkpoint write then fails
#     with EFBIG, as it would with ENOSPC.
#   full_disk_in_export: as full_disk_after_step (4 KiB), as the export starts;
#   memory_limit_at_model: the address space may grow by 2 GiB only (RLIMIT_AS)
#     from the moment the TensorFlowTrainer builds the model: TensorFlow's allocation then
#     fails as it does when memory runs out (a kernel OOM kill is SIGKILL, which
#     the kill tests cover);
#   sigint_after_lock: SIGINT (Ctrl-C) to itself once the run folder is locked,
#     during start-up;
#   sigterm_after_lock: the same with SIGTERM;
#   kill_after_epoch_checkpoint: SIGKILL right after the checkpoint that closes
#     epoch FAULT_STEP is saved (its "saved checkpoint" log line);
#   kill_after_epoch_record: SIGKILL right after epoch FAULT_STEP's record is
#     appended to metrics.jsonl;
#   cut_epoch_record: SIGKILL in the middle of the append of epoch FAULT_STEP's
#     record (its first 40 characters written);
#   kill_after_translator_save: SIGKILL once a translator SavedModel is written.
#   sigterm_in_teacher_forced, full_disk_in_teacher_forced: SIGTERM, or files
#     limited to 1 byte, as evaluate.py starts its teacher-forced pass (after
#     the translations, before any result is written);
#   sigterm_at_save, sigint_at_save, full_disk_at_save: SIGTERM, SIGINT or
#     files limited to 2 KiB at the first np.save (prepare.py's first file);
#   kill_after_set_aside: SIGKILL right after the first rename to a hidden name
#     (a folder set aside before its replacement is renamed in).
# The driver runs the script named first (train.py, evaluate.py, prepare.py).
DRIVER = """
import json, os, pathlib, resource, runpy, signal, sys, time
import numpy as np
from tensorflow.python.ops import gen_io_ops
from transformer.inference import evaluation
from transformer.inference import export
from transformer.run import files
from transformer.training import tf_checkpointing, summaries
from transformer.training.tf_engine import TensorFlowTrainer

fault, fault_step = os.environ["FAULT"], int(os.environ.get("FAULT_STEP", "0"))
model_dir = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--model_dir=")), "")

merge = gen_io_ops.merge_v2_checkpoints
def merge_or_die(*args, **kwargs):
  if fault == "kill_in_first_checkpoint_write":
    os.kill(os.getpid(), signal.SIGKILL)
  return merge(*args, **kwargs)
gen_io_ops.merge_v2_checkpoints = merge_or_die

def limit_file_size(size):
  signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

save_keras_model = export.save_keras_model
def signalled_save(*args, **kwargs):
  if fault == "sigterm_in_export":
    os.kill(os.getpid(), signal.SIGTERM)
  if fault == "full_disk_in_export":
    limit_file_size(4 * 1024)
  return save_keras_model(*args, **kwargs)
export.save_keras_model = signalled_save

trainer_init = TensorFlowTrainer.__init__
def limited_init(self, *args, **kwargs):
  if fault == "memory_limit_at_model":
    status = open("/proc/self/status").read()
    size = int(status.split("VmSize:")[1].split()[0]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size + (2 << 30), resource.RLIM_INFINITY))
  trainer_init(self, *args, **kwargs)
TensorFlowTrainer.__init__ = limited_init

acquire = files.RunLock.acquire
def acquire_then_interrupt(self):
  acquire(self)
  if fault == "sigint_after_lock":
    # Ctrl-C as in a terminal, also when the suite started with SIGINT ignored (nohup ... &).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.kill(os.getpid(), signal.SIGINT)
  if fault == "sigterm_after_lock":
    os.kill(os.getpid(), signal.SIGTERM)
files.RunLock.acquire = acquire_then_interrupt

def after_step(step, loss):
  if step != fault_step:
    return
  if fault == "pause_at_step":
    open(model_dir + ".paused", "w").close()
    while not os.path.exists(model_dir + ".release"):
      time.sleep(0.1)
  if fault == "full_disk_after_step":
    limit_file_size(256 * 1024)

save = tf_checkpointing.Checkpoints.save
def save_then_die(self):
  path = save(self)
  if (fault == "kill_after_epoch_checkpoint" and int(self._step_in_epoch.numpy()) == 0
      and int(self._epoch.numpy()) == fault_step):
    os.kill(os.getpid(), signal.SIGKILL)
  return path
tf_checkpointing.Checkpoints.save = save_then_die

append = summaries.Summaries.append_metrics
def append_and_die(self, record):
  if fault == "cut_epoch_record" and record.get("epoch") == fault_step:
    with open(os.path.join(model_dir, "metrics.jsonl"), "a") as f:
      f.write(json.dumps(record, sort_keys=True)[:40])
    os.kill(os.getpid(), signal.SIGKILL)
  append(self, record)
  if fault == "kill_after_epoch_record" and record.get("epoch") == fault_step:
    os.kill(os.getpid(), signal.SIGKILL)
summaries.Summaries.append_metrics = append_and_die

export_translator = export.export_translator
def export_then_die(*args, **kwargs):
  translator = export_translator(*args, **kwargs)
  if fault == "kill_after_translator_save":
    os.kill(os.getpid(), signal.SIGKILL)
  return translator
export.export_translator = export_then_die

teacher_forced_metrics = evaluation.teacher_forced_metrics
def signalled_teacher_forced(*args, **kwargs):
  if fault == "sigterm_in_teacher_forced":
    os.kill(os.getpid(), signal.SIGTERM)
  if fault == "full_disk_in_teacher_forced":
    limit_file_size(1)
  return teacher_forced_metrics(*args, **kwargs)
evaluation.teacher_forced_metrics = signalled_teacher_forced

np_save, saves = np.save, []
def signalled_np_save(*args, **kwargs):
  saves.append(args[0])
  if len(saves) == 1 and fault in ("sigterm_at_save", "sigint_at_save"):
    os.kill(os.getpid(), signal.SIGTERM if fault == "sigterm_at_save" else signal.SIGINT)
  if len(saves) == 1 and fault == "full_disk_at_save":
    limit_file_size(2048)
  return np_save(*args, **kwargs)
np.save = signalled_np_save
if fault == "sigint_at_save":  # Ctrl-C as in a terminal, also when the suite ignores SIGINT
  signal.signal(signal.SIGINT, signal.default_int_handler)

path_rename = pathlib.Path.rename
def rename_then_die(self, target):
  renamed = path_rename(self, target)
  if fault == "kill_after_set_aside" and pathlib.Path(target).name.startswith("."):
    os.kill(os.getpid(), signal.SIGKILL)
  return renamed
pathlib.Path.rename = rename_then_die

fit = TensorFlowTrainer.fit
TensorFlowTrainer.fit = lambda self, *a, **k: fit(self, *a, step_callback=after_step, **k)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def driver_env(**extra):
  return {**os.environ, **ONE_THREAD, "PYTHONPATH": str(REPO_DIR), "TF_CPP_MIN_LOG_LEVEL": "2",
          **extra}


def train_args(model_dir, data_dir, tokenizer, steps, *extra):
  return ["train.py", "--config=configs/tiny.py", f"--config.training.train_steps={steps}",
          "--config.training.checkpoint_every_steps=5", f"--data={data_dir}",
          f"--tokenizer={tokenizer}", f"--model_dir={model_dir}", "--bleu_examples=0",
          "--noexport", *extra]


def start_driver(args, fault="none", fault_step=0):
  """train.py through the driver, with its output in a pipe."""
  return subprocess.Popen([sys.executable, "-c", DRIVER, *args], cwd=REPO_DIR,
                          env=driver_env(FAULT=fault, FAULT_STEP=str(fault_step)),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish_driver(proc, timeout=240):
  """(return code, output) of a driver run; kills it if it outlives ``timeout``."""
  try:
    output, _ = proc.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    proc.kill()
    pytest.fail(f"train.py did not end within {timeout} s: {proc.communicate()[0][-3000:]}")
  return proc.returncode, output


def run_driver(args, fault="none", fault_step=0):
  return finish_driver(start_driver(args, fault, fault_step))


def error_lines(output, script="train.py"):
  assert "Traceback" not in output, output[-3000:]
  return [line for line in output.splitlines() if line.startswith(f"{script}: error: ")]


def assert_fails_in_one_line(code, output, pattern):
  """train.py exited 1 with one error line, which matches ``pattern``."""
  assert code == 1, output[-3000:]
  lines = error_lines(output)
  assert len(lines) == 1 and re.match(pattern, lines[0]), output[-3000:]


def files_below(folder):
  """{relative path: bytes} of every file below ``folder``."""
  return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def run_script(*args):
  return subprocess.run([sys.executable, *map(str, args)], cwd=REPO_DIR, env=driver_env(),
                        capture_output=True, text=True, timeout=240, check=False)


def copy_run(run_dir, tmp_path):
  shutil.copytree(run_dir, tmp_path / "run")
  return tmp_path / "run"


def metrics_records(model_dir):
  """metrics.jsonl's lines, each parsed (a torn line fails the test)."""
  return [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]


def checkpoint_steps(model_dir):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  state = tf.train.get_checkpoint_state(str(model_dir / "checkpoints"))
  return [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]


def swap_vocabularies(assets):
  pt, en = assets / "pt_vocab.txt", assets / "en_vocab.txt"
  pt_text = pt.read_bytes()
  pt.write_bytes(en.read_bytes())
  en.write_bytes(pt_text)
