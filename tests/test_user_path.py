"""The user's path: the README's commands on a clone without ../shared (TFDS and
a built tokenizer stand in, said in one line), translating a run stopped with
Ctrl-C from its folder, partial scores kept apart from full ones, and a
console that tells the truth on a terminal and in a pipe.

No network: the subprocess runs import a fake ``tensorflow_datasets`` (written
by the ``fake_tfds`` fixture, first on PYTHONPATH) that serves a small
generated corpus and records which splits were asked for.
"""

import io
import json
import logging as python_logging
import os
from pathlib import Path
import pty
import re
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from transformer import sources
from transformer.training import checkpointing
from transformer.training import progress

ROOT = Path(__file__).resolve().parents[1]
# An absl log line's start: "I1127 07:19:23.983850 ...".
LOG_LINE_START = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d")
# A live line's start: "Epoch 2/~14 5/13 [", "Epoch 1 5/13 [".
LIVE_LINE = re.compile(r"Epoch (\d+)(?:/(~?\d+))?(?: \(resumed at step \d+\))? (\d+)/(\d+) \[")

FAKE_TFDS = '''
"""A stand-in for tensorflow_datasets: the TED HRLR splits from $FAKE_TFDS_DATA."""
import os
import tensorflow as tf

def load(name, split, as_supervised):
  assert name == "ted_hrlr_translate/pt_to_en" and as_supervised, (name, as_supervised)
  suffix = {"train": "train", "validation": "dev", "test": "test"}[split]
  folder = os.environ["FAKE_TFDS_DATA"]
  with open(os.path.join(folder, "asked"), "a", encoding="utf-8") as asked:
    asked.write(split + "\\n")
  def lines(language):
    with open(os.path.join(folder, f"{language}.{suffix}"), encoding="utf-8") as f:
      return f.read().splitlines()
  return tf.data.Dataset.from_tensor_slices((lines("pt"), lines("en")))
'''

PT_WORDS = ("eu gosto de ler livros sobre a história do mundo e das pessoas que vivem nele "
            "hoje nós falamos com amigos na escola grande pequena casa rua cidade").split()
EN_WORDS = ("i like to read books about the history of world and of people who live in it "
            "today we talk with friends at school big small house street city").split()


class Terminal(io.StringIO):
  def isatty(self):
    return True


class FakeClock:
  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


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


def _absent(tmp_path):
  """The README's paths, on a machine that has no ../shared."""
  shared = tmp_path / "shared" / "data"
  return shared / "ted_hrlr_pt_to_en", shared / "tutorial_tokenizer"


def _train_args(model_dir, data, tokenizer, *extra):
  return [sys.executable, "train.py", "--config=configs/tiny.py", f"--model_dir={model_dir}",
          f"--data={data}", f"--tokenizer={tokenizer}", "--bleu_examples=0",
          "--config.training.checkpoint_every_steps=5", *extra]


def _asked(fake_tfds):
  asked = fake_tfds[1] / "asked"
  return asked.read_text().split() if asked.exists() else []


# ----------------------------------------------------------------- data anywhere

def test_absent_local_copies_give_way_to_tfds_and_a_built_tokenizer(tmp_path, monkeypatch):
  monkeypatch.setattr(sources, "tfds_installed", lambda: True)
  data, tokenizer = _absent(tmp_path)
  used_data, used_tokenizer, message = sources.stand_ins(str(data), str(tokenizer))
  assert (used_data, used_tokenizer) == ("tfds", "build")
  assert message == (f"{data} and {tokenizer} are absent: the data comes from TensorFlow "
                     "Datasets (ted_hrlr_translate/pt_to_en, downloaded on first use) and the "
                     "tokenizer is built from the training pairs (--tokenizer=build)")
  # Present paths (even wrong ones: their own error says what is wrong) stay.
  assert sources.stand_ins(str(tmp_path), str(tmp_path)) == (str(tmp_path), str(tmp_path), None)
  assert sources.stand_ins(str(data)) == ("tfds", None, f"{data} is absent: the data comes "
                                          "from TensorFlow Datasets (ted_hrlr_translate/"
                                          "pt_to_en, downloaded on first use)")


def test_absent_data_without_tensorflow_datasets_is_one_clear_error(tmp_path, monkeypatch):
  monkeypatch.setattr(sources, "tfds_installed", lambda: False)
  data, _ = _absent(tmp_path)
  with pytest.raises(sources.SourceError, match="no such folder, and tensorflow-datasets"):
    sources.stand_ins(str(data), "build")


def test_the_install_brings_tensorflow_datasets():
  import configparser  # pylint: disable=g-import-not-at-top
  setup = configparser.ConfigParser()
  setup.read(ROOT / "setup.cfg")
  required = setup["options"]["install_requires"].split()
  assert any(line.startswith("tensorflow-datasets==") for line in required), required


# ----------------------------------------------------------------- partial scores

def test_a_partial_score_is_labelled_and_never_overwrites_the_full_one(tmp_path):
  from transformer import evaluation  # pylint: disable=g-import-not-at-top
  pairs = [(f"frase {i} .", f"sentence {i} .") for i in range(6)]
  copy = lambda sources: [f"sentence {s.split()[1]} ." for s in sources]  # noqa: E731
  full = evaluation.evaluate_bleu(copy, pairs, tmp_path, "test", "greedy", split_size=6)
  before = (tmp_path / "test.greedy.json").read_bytes()
  partial = evaluation.evaluate_bleu(copy, pairs[:2], tmp_path, "test", "greedy", split_size=6)
  assert (tmp_path / "test.greedy.json").read_bytes() == before
  assert not full["partial"] and partial["partial"] and partial["num_sentences"] == 2
  on_disk = json.loads((tmp_path / "test.greedy.partial2.json").read_text())
  assert on_disk["partial"] is True and on_disk["split"] == "test"
  assert (tmp_path / "test.greedy.partial2.txt").read_text().count("\n") == 2


# ----------------------------------------------------------------- console, in process

def test_the_epoch_count_is_a_plan_stated_as_such():
  assert progress.epoch_label(2, 20) == "Epoch 2/20"
  assert progress.epoch_label(2, 20, estimated=True) == "Epoch 2/~20"
  assert progress.epoch_label(1, None) == "Epoch 1"


def test_the_resume_log_counts_epochs_from_one():
  assert checkpointing.position_text(0, 626) == "in epoch 1, after its first 626 batches"
  assert checkpointing.position_text(3, 0) == "after epoch 3"
  assert checkpointing.position_text(0, 0) == "before the first epoch"


def test_the_live_line_fits_the_terminal(monkeypatch):
  monkeypatch.setenv("COLUMNS", "50")
  stream, clock = Terminal(), FakeClock()
  bar = progress.EpochProgress(enabled=True, stream=stream, clock=clock)
  bar.start("Epoch 1/20", 0, 400)
  for done in range(1, 401):
    clock.now += 1.0
    bar.update(done, loss=7.0, acc=0.1, lr=1e-4, **{"tok/s": 2293.0})
  bar.end()
  drawn = stream.getvalue().replace("\n", "\r").split("\r")
  assert max(map(len, drawn)) == 49 and LIVE_LINE.match(drawn[1]), drawn[:3]


def test_a_log_line_starts_on_its_own_line_not_after_the_live_line():
  stream, clock = Terminal(), FakeClock()
  handler = python_logging.StreamHandler(stream)  # as absl's, on the root logger
  python_logging.getLogger().addHandler(handler)
  try:
    bar = progress.EpochProgress(enabled=True, stream=stream, clock=clock)
    bar.start("Epoch 1/2", 0, 4)
    clock.now = 1.0
    bar.update(1, loss=7.0)
    python_logging.getLogger("test").warning("saved checkpoint ckpt-1")
    clock.now = 2.0
    bar.update(2, loss=7.0)
    bar.end()
    python_logging.getLogger("test").warning("after the epoch")
  finally:
    python_logging.getLogger().removeHandler(handler)
  shown = stream.getvalue()
  cleared = "\r" + " " * len(shown.split("\r")[1]) + "\r"
  assert cleared + "saved checkpoint ckpt-1\n\rEpoch 1/2 2/4" in shown, repr(shown)
  assert shown.endswith("\nafter the epoch\n") and not handler.filters, repr(shown)


def test_a_clean_exit_removes_the_lock_and_the_next_run_takes_it_silently(tmp_path, caplog):
  lock = checkpointing.RunLock(tmp_path)
  lock.acquire()
  assert (tmp_path / "train.lock").read_text().strip() == str(os.getpid())
  lock.release()
  assert not (tmp_path / "train.lock").exists()
  again = checkpointing.RunLock(tmp_path)
  with caplog.at_level(python_logging.WARNING):
    again.acquire()
  assert "stale" not in caplog.text
  again.release()


@pytest.mark.slow
def test_an_epochs_seconds_are_its_wall_time_across_a_resume(tmp_path, monkeypatch):
  # The trainer's clock jumps 1000 s inside the first run's part of epoch 1;
  # the resumed run's record of that epoch must hold them.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from configs import tiny  # pylint: disable=g-import-not-at-top
  from transformer import training  # pylint: disable=g-import-not-at-top
  from transformer.training import trainer as trainer_module  # pylint: disable=g-import-not-at-top
  offset = [0.0]
  monkeypatch.setattr(trainer_module, "time",
                      types.SimpleNamespace(time=lambda: time.time() + offset[0]))
  config = tiny.get_config()
  config.model.output_weights = "untied"
  config.training.update(epochs=1, warmup_steps=4, checkpoint_every_steps=100)
  rng = np.random.default_rng(0)
  source, target = rng.integers(4, 50, (8, 9)), rng.integers(4, 50, (8, 10))
  dataset = tf.data.Dataset.from_tensor_slices(
      ((source, target[:, :-1]), target[:, 1:])).batch(2)

  def make():
    return training.Trainer(config, input_vocab_size=60, target_vocab_size=60,
                            model_dir=tmp_path, progress=False)

  def stop_at_step_2(step, loss):  # pylint: disable=unused-argument
    if step == 1:
      offset[0] += 1000.0
    if step == 2:
      os.kill(os.getpid(), signal.SIGTERM)
  stopped = make().fit(lambda epoch: dataset, step_callback=stop_at_step_2)
  assert stopped.interrupted_by == signal.SIGTERM and not stopped.history
  resumed = make()
  assert resumed.restore() == 2
  (record,) = resumed.fit(lambda epoch: dataset).history
  assert record["complete"] and record["steps_in_epoch"] == 4
  assert 1000.0 < record["seconds"] < 1000.0 + 600, record
  logged = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
  assert logged["seconds"] == record["seconds"]


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


@pytest.mark.slow
def test_a_clone_without_shared_trains_is_stopped_translates_and_evaluates(tmp_path, fake_tfds):
  data, tokenizer = _absent(tmp_path)
  model_dir = tmp_path / "runs" / "cpu_2h"
  read_end, write_end = os.pipe()
  proc = subprocess.Popen(_train_args(model_dir, data, tokenizer, "--config.training.epochs=50"),
                          cwd=ROOT, env=_env(fake_tfds), stdin=subprocess.DEVNULL,
                          stdout=write_end, stderr=write_end)
  os.close(write_end)
  status, output = _stop_after_first_checkpoint(proc, read_end)
  os.close(read_end)
  assert status == 128 + signal.SIGINT, output[-3000:]
  said = [line for line in output.splitlines() if "absent" in line]
  assert len(said) == 1 and f"{data} and {tokenizer} are absent" in said[0], output[-3000:]
  assert _asked(fake_tfds)[:2] == ["train", "validation"]
  assert not (model_dir / "train.lock").exists()

  # The README's translate command, on the stopped run's folder.
  translated = _run([sys.executable, "translate.py", f"--model_dir={model_dir}",
                     "--method=greedy", "eu gosto de ler livros ."], fake_tfds)
  assert translated.returncode == 0, translated.stderr[-3000:]
  assert len(translated.stdout.splitlines()) == 1 and translated.stdout.strip()
  assert re.search(rf"no export in {re.escape(str(model_dir))} yet: translating with its "
                   r"checkpoint ckpt-\d+", translated.stderr), translated.stderr
  # The export's path, which does not exist yet, names what does.
  missing = _run([sys.executable, "translate.py",
                  f"--export_dir={model_dir / 'export' / 'translator'}", "olá ."], fake_tfds)
  assert missing.returncode == 1
  assert f"--model_dir={model_dir} translates with its latest checkpoint" in missing.stderr

  # The README's evaluate command: a partial score, labelled so.
  evaluated = _run([sys.executable, "evaluate.py", f"--model_dir={model_dir}", f"--data={data}",
                    "--split=test", "--max_sentences=5", "--method=greedy"], fake_tfds)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert f"evaluate.py: {data} is absent: the data comes from TensorFlow Datasets" in (
      evaluated.stderr)
  record = json.loads(evaluated.stdout)
  assert record["partial"] and record["num_sentences"] == 5
  assert (model_dir / "bleu" / "test.greedy.partial5.json").is_file()
  assert not (model_dir / "bleu" / "test.greedy.json").exists()
  assert _asked(fake_tfds)[-1] == "test"


@pytest.mark.slow
def test_the_console_tells_the_truth_on_a_terminal_and_in_a_pipe(tmp_path, fake_tfds):
  model_dir = tmp_path / "run"
  args = _train_args(model_dir, "tfds", "build", "--noexport", "--config.training.epochs=100",
                     "--config.training.time_budget_minutes=0.2")
  # A terminal 60 columns wide, with stdout and stderr on it, stopped by
  # Ctrl-C after the first checkpoint.
  controller, terminal = pty.openpty()
  proc = subprocess.Popen(args, cwd=ROOT, env=_env(fake_tfds, COLUMNS="60"),
                          stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal)
  os.close(terminal)
  status, shown = _stop_after_first_checkpoint(proc, controller)
  os.close(controller)
  assert status == 128 + signal.SIGINT, shown[-3000:]
  live = [segment for segment in re.split(r"[\r\n]", shown) if LIVE_LINE.match(segment)]
  assert live and max(map(len, live)) <= 59, live
  # A time budget's first epoch has no count yet: not the configuration's 100.
  assert LIVE_LINE.match(live[0]).group(1, 2) == ("1", None), live[0]
  starts = [match.start() for match in LOG_LINE_START.finditer(shown)]
  assert starts and all(at == 0 or shown[at - 1] in "\r\n" for at in starts), shown[-3000:]
  assert "deprecated" not in shown and not (model_dir / "train.lock").exists()

  # The same command in a pipe resumes to the end of its budget.
  resumed = _run(args, fake_tfds)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "\r" not in resumed.stdout and "stale" not in resumed.stderr
  assert "deprecated" not in resumed.stderr + resumed.stdout, resumed.stderr[-3000:]
  restored = re.search(r"restored checkpoint \S+ at step \d+ \(in epoch (\d+), after its first "
                       r"(\d+) batches\)", resumed.stderr)
  assert restored, resumed.stderr[-3000:]
  assert f"resuming epoch {restored[1]} after its first {restored[2]} batches" in resumed.stderr
  labels = re.findall(r"^Epoch (\d+)(/~?\d+)? \(step", resumed.stdout, re.MULTILINE)
  assert labels and labels[0][0] == restored[1], resumed.stdout
  # After the first epoch the time budget's count is a plan: estimated, or fixed.
  assert all(count for _, count in labels), resumed.stdout
  assert not (model_dir / "train.lock").exists()
