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
from transformer.run.errors import DataError

ROOT = Path(__file__).resolve().parents[2]
# A live line's start: "Epoch 2/~14 5/13 [", "Epoch 1 5/13 [".
LIVE_LINE = re.compile(r"Epoch (\d+)(?:/(~?\d+))?(?: \(resumed at step \d+\))? (\d+)/(\d+)(?: |$)")


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

def test_auto_takes_the_local_copy_where_it_is_and_tfds_elsewhere(tmp_path, monkeypatch):
  monkeypatch.setattr(sources, "tfds_installed", lambda: True)
  monkeypatch.setattr(sources, "LOCAL_DATA", tmp_path)
  assert sources.resolve_data("auto") == (str(tmp_path), f"data: {tmp_path}")
  absent, _ = _absent(tmp_path)
  monkeypatch.setattr(sources, "LOCAL_DATA", absent)
  assert sources.resolve_data("auto") == (
      "tfds", "data: TensorFlow Datasets' ted_hrlr_translate/pt_to_en, downloaded on first use "
      f"(no local copy at {absent})")
  # What the user names is used as named, without a line.
  assert sources.resolve_data("tfds") == ("tfds", None)
  assert sources.resolve_data(str(tmp_path)) == (str(tmp_path), None)


def test_a_named_path_that_does_not_exist_is_an_error_never_a_download(tmp_path, monkeypatch):
  monkeypatch.setattr(sources, "tfds_installed", lambda: True)
  data, tokenizer = _absent(tmp_path)
  with pytest.raises(DataError, match=f"^--data={data}: no such folder; pass a folder"):
    sources.resolve_data(str(data))
  with pytest.raises(DataError, match=f"^--tokenizer={tokenizer}: no such folder"):
    sources.check_tokenizer(str(tokenizer))
  sources.check_tokenizer("build")
  sources.check_tokenizer(str(tmp_path))


def test_tfds_without_tensorflow_datasets_is_one_clear_error(tmp_path, monkeypatch):
  monkeypatch.setattr(sources, "tfds_installed", lambda: False)
  monkeypatch.setattr(sources, "LOCAL_DATA", _absent(tmp_path)[0])
  for data in ("auto", "tfds"):
    with pytest.raises(DataError, match="tensorflow-datasets, which downloads it, is "
                                                  "not installed"):
      sources.resolve_data(data)


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
  drawn = [line.rstrip() for line in stream.getvalue().replace("\n", "\r").split("\r") if line]
  assert max(map(len, drawn)) <= 49 and LIVE_LINE.match(drawn[0]), drawn[:3]
  # Whole fields only, the least needed left out: no number is cut.
  assert all(re.fullmatch(r"Epoch 1/20 \d+/400 ETA (\?|\d+:\d\d) \| loss 7\.0000( acc 0\.1000)?",
                          line) for line in drawn), drawn[:3]


def test_the_live_line_leaves_out_whole_fields_least_needed_first():
  clock = FakeClock()
  line = progress.LiveLine("Epoch 12/~20", 626, 656, clock)
  values = {"loss": 6.31814, "acc": 0.16942, "lr": 6.9e-4, "tok/s": 3275.3}
  whole = line.text(630, values)
  assert whole == ("Epoch 12/~20 (resumed at step 626) 630/656 [=======================>] "
                   "0:00 ETA ? | loss 6.3181 acc 0.1694 lr 6.90e-04 tok/s 3275")
  assert line.text(630, values, width=100) == ("Epoch 12/~20 (resumed at step 626) 630/656 "
                                               "0:00 ETA ? | loss 6.3181 acc 0.1694")
  assert line.text(630, values, width=79) == ("Epoch 12/~20 (resumed at step 626) 630/656 "
                                              "0:00 ETA ? | loss 6.3181 acc 0.1694")
  assert line.text(630, values, width=60) == "Epoch 12/~20 630/656 ETA ? | loss 6.3181 acc 0.1694"
  assert line.text(630, values, width=40) == "Epoch 12/~20 630/656 ETA ? | loss 6.3181"
  assert line.text(630, values, width=20) == "Epoch 12/~20 630/656"


def test_numbers_keep_one_format_per_field():
  assert [progress.number_text("acc", value) for value in (0.0022, 0.0105)] == ["0.0022", "0.0105"]
  assert progress.number_text("lr", 7e-4) == "7.00e-04"
  assert progress.number_text("tok/s", 2293.4) == "2293"
  assert progress.plural(1, "epoch") == "1 epoch" and progress.plural(2, "epoch") == "2 epochs"
  assert progress.position_text(0, 1) == "in epoch 1, after its first 1 batch"


def test_a_rerun_of_a_finished_run_says_so():
  assert progress.run_summary(656, 656, []) == ("the run had already ended at step 656: "
                                                "nothing more to train")
  assert progress.run_summary(31, 30, [{"epoch": 1, "complete": False, "steps_in_epoch": 31}]) == (
      "training done at step 31: 1 step in this run (epoch 1 up to its step 31)")


def test_log_lines_are_plain_unless_verbose(monkeypatch):
  from absl import logging  # pylint: disable=g-import-not-at-top
  from transformer.run import runtime  # pylint: disable=g-import-not-at-top
  handler = logging.get_absl_handler()
  # absl's handler formats with the handler it writes through: restored afterwards.
  monkeypatch.setattr(handler.python_handler, "formatter", handler.python_handler.formatter)
  record = python_logging.LogRecord("absl", python_logging.INFO, "/x/loop.py", 115,
                                    "saved checkpoint %s", ("ckpt-20",), None)
  warning = python_logging.LogRecord("absl", python_logging.WARNING, "/x/loop.py", 88,
                                     "stopped", (), None)
  runtime.plain_log_lines(verbose=True)
  assert re.match(r"I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ loop\.py:115\] saved checkpoint ckpt-20",
                  handler.format(record))
  runtime.plain_log_lines(verbose=False)
  assert handler.format(record) == "saved checkpoint ckpt-20"
  assert handler.format(warning) == "warning: stopped"


def test_the_count_of_sentences_translated_is_redrawn_in_place_on_a_terminal():
  terminal, pipe = Terminal(), io.StringIO()
  for stream in (terminal, pipe):
    translate = progress.counted(lambda sentences: [s.upper() for s in sentences], 5, stream)
    assert translate(["a", "b", "c"]) == ["A", "B", "C"]
    translate(["d", "e"])
  assert terminal.getvalue() == "\rtranslated 3/5 sentences\rtranslated 5/5 sentences\n"
  assert pipe.getvalue() == ""


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


def test_off_a_terminal_a_slow_run_writes_a_line_every_minute():
  """A step slower than a minute: a plain line after each, though log_every_steps
  is far away; none within the minute."""
  now = [0.0]
  stream = io.StringIO()
  shown = progress.EpochProgress(enabled=True, stream=stream, clock=lambda: now[0],
                                 log_every_steps=1000)
  shown.start("Epoch 1/2", 0, 10)
  for step in range(1, 5):
    now[0] += 30.0 if step == 2 else 61.0
    shown.update(step, step, loss=1.0)
  assert [line.split(" Epoch")[0] for line in stream.getvalue().splitlines()] == [
      "step 3", "step 4"]


@pytest.mark.parametrize("training, export, bleu, line", [
    ({"train_steps": 300}, True, 200, "this run: training to step 300, then exporting the "
     "translator and scoring validation BLEU (beam) on 200 sentences"),
    ({"time_budget_minutes": 5.0}, False, 1, "this run: training whole epochs for 5 minutes "
     "(at least one, however long it takes), then scoring validation BLEU (beam) on 1 sentence"),
    ({"epochs": 20}, False, 0, "this run: training to epoch 20"),
])
def test_the_start_says_what_the_run_will_do(tmp_path, training, export, bleu, line):
  from configs import tiny  # pylint: disable=g-import-not-at-top
  from transformer.training import launch, run_checks  # pylint: disable=g-import-not-at-top
  config = tiny.get_config()
  config.training.update(training)
  options = run_checks.RunOptions(
      data=str(tmp_path), tokenizer="build", tokenizer_cache_dir=None, strategy="default",
      tpu=None, mixed_precision="none", jit_compile=False, train_examples=0,
      validation_examples=0, eval_bleu_every_epochs=0, bleu_examples=-1, bleu_method="beam",
      export=export, log_every_steps=100, compilation_cache="auto", verbose=False)
  assert launch.plan_line(config, options, bleu) == line
