"""The user's path, as a user runs the README's commands: on a clone without
../shared (the default --data becomes TFDS, said in one line), train.py
stopped with Ctrl-C after its first checkpoint, translate.py --model_dir on
the stopped run, evaluate.py's partial score filed as partial; and the
console of a stopped and resumed run on a terminal and in a pipe.

No network: the runs import a fake ``tensorflow_datasets`` (written by the
``fake_tfds`` fixture, first on PYTHONPATH) whose builder serves a small
generated corpus and records which splits were asked for; the real builder
without a network: tests/scripts/test_data_download.py. A clone without
../shared is this checkout with ``sources.LOCAL_DATA`` pointed at a folder
that does not exist (:data:`WITHOUT_SHARED`).
"""

import json
import os
from pathlib import Path
import pty
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

# Trains and translates with the scripts.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# An absl log line's start: "I1127 07:19:23.983850 ...".
LOG_LINE_START = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d")
# A live line's start: "Epoch 2/~14 5/13 [", "Epoch 1 5/13 ETA ?".
LIVE_LINE = re.compile(r"Epoch (\d+)(?:/(~?\d+))?(?: \(resumed at step \d+\))? (\d+)/(\d+)(?: |$)")
# A whole live line: fields left out whole, from the least needed.
WHOLE_LIVE_LINE = re.compile(
    r"Epoch \d+(/~?\d+)?( \(resumed at step \d+\))? \d+/\d+( \[[=>.]+\])?( \d+:\d\d)? "
    r"ETA (\?|\d+:\d\d)( \| loss \d+\.\d{4}( acc \d\.\d{4}( lr \d\.\d\de-\d\d"
    r"( tok/s \d+)?)?)?)?")

FAKE_TFDS = '''
"""A stand-in for tensorflow_datasets: the TED HRLR splits from $FAKE_TFDS_DATA.
Like the real one, importing it does not import TensorFlow."""
import os


class _Builder:
  def is_prepared(self):
    return True

  def as_dataset(self, split, as_supervised):
    import tensorflow as tf
    assert as_supervised
    suffix = {"train": "train", "validation": "dev", "test": "test"}[split]
    folder = os.environ["FAKE_TFDS_DATA"]
    with open(os.path.join(folder, "asked"), "a", encoding="utf-8") as asked:
      asked.write(split + "\\n")
    def lines(language):
      with open(os.path.join(folder, f"{language}.{suffix}"), encoding="utf-8") as f:
        return f.read().splitlines()
    return tf.data.Dataset.from_tensor_slices((lines("pt"), lines("en")))


def builder(name):
  assert name == "ted_hrlr_translate/pt_to_en", name
  return _Builder()
'''
# Runs a script as __main__ as on a clone without ../shared: the local copy
# that --data=auto looks for is a folder that does not exist.
WITHOUT_SHARED = '''
import runpy, sys
from transformer.data import sources
sources.LOCAL_DATA = sources.LOCAL_DATA.parent / "not_here" / "ted_hrlr_pt_to_en"
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''

PT_WORDS = ("eu gosto de ler livros sobre a história do mundo e das pessoas que vivem nele "
            "hoje nós falamos com amigos na escola grande pequena casa rua cidade").split()
EN_WORDS = ("i like to read books about the history of world and of people who live in it "
            "today we talk with friends at school big small house street city").split()


# ----------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def fake_tfds(tmp_path_factory):
  """``(module folder, data folder)``: a fake tensorflow_datasets and the small
  word-for-word corpus it serves (240 training, 24 validation, 24 test pairs)."""
  root = tmp_path_factory.mktemp("fake_tfds")
  (root / "module" / "tensorflow_datasets").mkdir(parents=True)
  (root / "module" / "tensorflow_datasets" / "__init__.py").write_text(FAKE_TFDS)
  data_dir = root / "data"
  data_dir.mkdir()
  rng = np.random.default_rng(0)
  for suffix, count in (("train", 240), ("dev", 24), ("test", 24)):
    indices = [rng.integers(0, len(PT_WORDS), rng.integers(3, 9)) for _ in range(count)]
    for language, words in (("pt", PT_WORDS), ("en", EN_WORDS)):
      (data_dir / f"{language}.{suffix}").write_text(
          "".join(" ".join(words[i] for i in sentence) + " .\n" for sentence in indices),
          encoding="utf-8")
  return root / "module", data_dir


def _env(fake_tfds, **extra):
  module_dir, data_dir = fake_tfds
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  return {**env, "PYTHONPATH": f"{module_dir}{os.pathsep}{ROOT}", "FAKE_TFDS_DATA": str(data_dir),
          "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", **extra}


def _train_args(model_dir, *extra):
  return [sys.executable, "train.py", "--config=configs/tiny.py", f"--model_dir={model_dir}",
          "--bleu_examples=0", "--config.training.checkpoint_every_steps=5", *extra]


def _without_shared(args):
  """``[python, script, flags...]`` run as on a clone without ../shared."""
  return [args[0], "-c", WITHOUT_SHARED, *args[1:]]


def _asked(fake_tfds):
  asked = fake_tfds[1] / "asked"
  return asked.read_text().split() if asked.exists() else []


# ----------------------------------------------------------------- the README's commands

def _stop_after_first_checkpoint(proc, stream_fd):
  """Reads ``stream_fd`` until the first 'saved checkpoint', sends SIGINT,
  reads to the end; returns the exit status and everything read."""
  shown, stopped = bytearray(), False
  while True:
    try:
      chunk = os.read(stream_fd, 65536)
    except OSError:  # EIO: the process closed the terminal
      break
    if not chunk:
      break
    shown += chunk
    if not stopped and b"saved checkpoint" in shown:
      proc.send_signal(signal.SIGINT)
      stopped = True
  return proc.wait(timeout=600), shown.decode()


def _run(args, fake_tfds, **env):
  return subprocess.run(args, cwd=ROOT, env=_env(fake_tfds, **env), stdin=subprocess.DEVNULL,
                        capture_output=True, text=True, timeout=600, check=False)


def test_a_clone_without_shared_trains_is_stopped_translates_and_evaluates(tmp_path, fake_tfds):
  model_dir = tmp_path / "runs" / "cpu_2h"
  read_end, write_end = os.pipe()
  # The README's main command names no data or tokenizer: the defaults.
  proc = subprocess.Popen(_without_shared(_train_args(model_dir, "--config.training.epochs=50")),
                          cwd=ROOT, env=_env(fake_tfds), stdin=subprocess.DEVNULL,
                          stdout=write_end, stderr=write_end)
  os.close(write_end)
  status, output = _stop_after_first_checkpoint(proc, read_end)
  os.close(read_end)
  assert status == 128 + signal.SIGINT, output[-3000:]
  said = [line for line in output.splitlines() if line.startswith("data: ")]
  assert len(said) == 1 and said[0].startswith(
      "data: TensorFlow Datasets' ted_hrlr_translate/pt_to_en, downloaded on first use (no "
      "local copy at "), output[-3000:]
  assert _asked(fake_tfds)[:2] == ["train", "validation"]
  assert not (model_dir / "train.lock").exists()
  # Ctrl-C: said when it came and once when the run stopped, naming what to do once.
  assert output.count("rerun the same command to resume") == 1, output[-3000:]

  # The README's translate command, on the stopped run's folder.
  translated = _run([sys.executable, "translate.py", f"--model_dir={model_dir}",
                     "--method=greedy", "eu gosto de ler livros ."], fake_tfds)
  assert translated.returncode == 0, translated.stderr[-3000:]
  assert len(translated.stdout.splitlines()) == 1 and translated.stdout.strip()
  assert re.search(rf"no export in {re.escape(str(model_dir))} yet: translating with its "
                   r"checkpoint ckpt-\d+", translated.stderr), translated.stderr
  # An export older than the checkpoints (a finished run trained further) is passed over.
  (model_dir / "export" / "translator").mkdir(parents=True)
  (model_dir / "export" / "translator" / "saved_model.pb").write_bytes(b"not read")
  (model_dir / "export" / "export_info.json").write_text('{"step": 1}\n')
  older = _run([sys.executable, "translate.py", f"--model_dir={model_dir}", "--method=greedy",
                "eu gosto de ler livros ."], fake_tfds)
  assert older.returncode == 0 and older.stdout == translated.stdout, older.stderr[-3000:]
  assert f"the export of {model_dir} (step 1) is older than its checkpoints: translating " \
         "with its checkpoint ckpt-" in older.stderr, older.stderr
  shutil.rmtree(model_dir / "export")
  # The export's path, which does not exist yet, names what does.
  missing = _run([sys.executable, "translate.py",
                  f"--export_dir={model_dir / 'export' / 'translator'}", "olá ."], fake_tfds)
  assert missing.returncode == 1
  assert f"--model_dir={model_dir} translates with its latest checkpoint" in missing.stderr

  # The README's evaluate command: a partial score, labelled so.
  evaluated = _run(_without_shared([sys.executable, "evaluate.py", f"--model_dir={model_dir}",
                                    "--split=test", "--max_sentences=5", "--method=greedy"]),
                   fake_tfds)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  # The data the run trained on, which its folder records.
  assert "evaluate.py: the data tfds the run trained on (trained_with.json)" in evaluated.stderr
  record = json.loads(evaluated.stdout)
  assert record["partial"] and record["num_sentences"] == 5
  assert (model_dir / "bleu" / "test.greedy.partial5.json").is_file()
  assert not (model_dir / "bleu" / "test.greedy.json").exists()
  assert _asked(fake_tfds)[-1] == "test"


def test_the_console_tells_the_truth_on_a_terminal_and_in_a_pipe(tmp_path, fake_tfds):
  model_dir = tmp_path / "run"
  args = _train_args(model_dir, "--data=tfds", "--noexport", "--config.training.epochs=100",
                     "--config.training.time_budget_minutes=0.2")
  # A terminal 80 columns wide, with stdout and stderr on it, stopped by
  # Ctrl-C after the first checkpoint.
  controller, terminal = pty.openpty()
  proc = subprocess.Popen(args, cwd=ROOT, env=_env(fake_tfds, COLUMNS="80"),
                          stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal)
  os.close(terminal)
  status, shown = _stop_after_first_checkpoint(proc, controller)
  os.close(controller)
  assert status == 128 + signal.SIGINT, shown[-3000:]
  live = [segment.rstrip() for segment in re.split(r"[\r\n]", shown) if LIVE_LINE.match(segment)]
  assert live and max(map(len, live)) <= 79, live
  # Whole fields: a number is never cut (the loss and accuracy have 4 decimals).
  assert all(WHOLE_LIVE_LINE.fullmatch(line) for line in live), live
  # A time budget's first epoch has no count yet: not the configuration's 100.
  assert LIVE_LINE.match(live[0]).group(1, 2) == ("1", None), live[0]
  # Lines a person reads, each starting at the left margin (the live line cleared first).
  assert not LOG_LINE_START.search(shown), shown[-3000:]
  starts = [match.start() for match in re.finditer("saved checkpoint", shown)]
  assert starts and all(shown[at - 1] in "\r\n" for at in starts), shown[-3000:]
  assert "deprecated" not in shown and not (model_dir / "train.lock").exists()

  # The same command in a pipe resumes to the end of its budget.
  resumed = _run(args, fake_tfds)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "\r" not in resumed.stdout and "stale" not in resumed.stderr
  assert "deprecated" not in resumed.stderr + resumed.stdout, resumed.stderr[-3000:]
  restored = re.findall(r"restored checkpoint \S+ at step \d+ \(in epoch (\d+), after its first "
                        r"(\d+) batch(?:es)?\)", resumed.stderr)
  assert len(restored) == 1 and "resuming" not in resumed.stderr, resumed.stderr[-3000:]
  labels = re.findall(r"^Epoch (\d+)(/~?\d+)? \(step", resumed.stdout, re.MULTILINE)
  assert labels and labels[0][0] == restored[0][0], resumed.stdout
  # After the first epoch the time budget's count is a plan: estimated, or fixed.
  assert all(count for _, count in labels), resumed.stdout
  assert not (model_dir / "train.lock").exists()

  # Once more: the run had ended, and says so.
  again = _run(args, fake_tfds)
  assert again.returncode == 0, again.stderr[-3000:]
  assert "nothing more to train" in again.stderr and "0 steps" not in again.stderr
  assert "training from step" not in again.stderr, again.stderr[-3000:]
