"""The user's path, in this process: where the data comes from when ../shared
is absent, partial scores filed apart from full ones, and the console's
truths (the epoch count as a plan, the live line's width, log lines on their
own line, epochs counted from one, the lock gone with the run). The scripts'
side: tests/scripts/test_user_path.py; an epoch's seconds across a resume:
tests/integration/test_trainer_runs.py."""

import io
import json
import logging as python_logging
import os
from pathlib import Path
import re

import pytest

from transformer.data import sources
from transformer.run import files
from transformer.run import progress

ROOT = Path(__file__).resolve().parents[2]
# A live line's start: "Epoch 2/~14 5/13 [", "Epoch 1 5/13 [".
LIVE_LINE = re.compile(r"Epoch (\d+)(?:/(~?\d+))?(?: \(resumed at step \d+\))? (\d+)/(\d+) \[")


class Terminal(io.StringIO):
  def isatty(self):
    return True


class FakeClock:
  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


def _absent(tmp_path):
  """The README's paths, on a machine that has no ../shared."""
  shared = tmp_path / "shared" / "data"
  return shared / "ted_hrlr_pt_to_en", shared / "tutorial_tokenizer"


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
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
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
  assert progress.position_text(0, 626) == "in epoch 1, after its first 626 batches"
  assert progress.position_text(3, 0) == "after epoch 3"
  assert progress.position_text(0, 0) == "before the first epoch"


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
  lock = files.RunLock(tmp_path)
  lock.acquire()
  assert (tmp_path / "train.lock").read_text().strip() == str(os.getpid())
  lock.release()
  assert not (tmp_path / "train.lock").exists()
  again = files.RunLock(tmp_path)
  with caplog.at_level(python_logging.WARNING):
    again.acquire()
  assert "stale" not in caplog.text
  again.release()
