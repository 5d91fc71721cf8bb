"""Kills at an epoch's end and the records and checkpoints a resume keeps;
beside them, files changed under a run: vocabulary files swapped, cut or
emptied, a metrics.jsonl cut mid-line (docs/reliability.md states each
behaviour and names its test). The runs of train.py go through the driver of
tests/helpers/fault_runs.py; the faults that need a finished, exported run are
in test_faults.py."""

import json
import re
import shutil
import signal

import pytest

from helpers.checkpoints import small_checkpoints
from helpers.fault_runs import (assert_fails_in_one_line, checkpoint_steps, copy_run,
                                metrics_records, run_driver, swap_vocabularies, train_args)
from transformer.run.errors import DataError

pytestmark = pytest.mark.slow


def _written_steps(model_dir):
  return sorted(int(p.name[len("ckpt-"):-len(".index")])
                for p in (model_dir / "checkpoints").glob("ckpt-*.index"))


@pytest.fixture(scope="module")
def epoch_end_kills(tmp_path_factory, small_data):
  """One command (3 epochs of 6 steps, --tokenizer=build) killed at each
  epoch's end: right after epoch 1's closing checkpoint, right after epoch 2's
  record, in the middle of epoch 3's record; then run to its end. Returns the
  folder, its arguments and (exit status, output) of each run."""
  model_dir = tmp_path_factory.mktemp("epoch_end") / "run"
  args = train_args(model_dir, small_data, "build", 18)
  runs = [run_driver(args, fault, epoch) for fault, epoch in (
      ("kill_after_epoch_checkpoint", 1), ("kill_after_epoch_record", 2),
      ("cut_epoch_record", 3), ("none", 0))]
  return model_dir, args, runs


def test_a_kill_at_an_epochs_end_loses_no_record_and_writes_none_twice(epoch_end_kills):
  model_dir, _, runs = epoch_end_kills
  checkpoint_line = f"saved checkpoint {model_dir / 'checkpoints' / 'ckpt-6'}"
  assert runs[0][0] == -signal.SIGKILL and checkpoint_line in runs[0][1], runs[0][1][-3000:]
  assert [code for code, _ in runs[1:3]] == [-signal.SIGKILL] * 2
  assert [(r["epoch"], r["step"]) for r in metrics_records(model_dir)] == [(1, 6), (2, 12), (3, 18)]
  # Epoch 2's record was written, its closing checkpoint not: redone once.
  assert "dropping the records of epoch 2, written after the checkpoint at step 11" in (
      runs[2][1]), runs[2][1][-3000:]
  code, output = runs[3]
  assert code == 0, output[-3000:]
  assert f"{model_dir / 'metrics.jsonl'}: line 3 is not a whole record" in output, output


def test_kills_and_resumes_keep_exactly_keep_checkpoints(epoch_end_kills):
  model_dir, _, runs = epoch_end_kills
  # Saved at 5, 6, 11, 12, 17, 18 across four processes; keep_checkpoints = 5.
  assert _written_steps(model_dir) == checkpoint_steps(model_dir) == [6, 11, 12, 17, 18]
  assert not [output for _, output in runs if "deprecated" in output]


def test_right_after_a_resume_the_index_lists_every_checkpoint(tmp_path):
  """Each round is a process that resumes, saves twice and is killed."""
  from transformer.inference import averaging  # pylint: disable=g-import-not-at-top
  step = 0
  for _ in range(4):
    checkpoints, _, optimizer, _ = small_checkpoints(tmp_path)
    assert checkpoints.restore() == step
    written = _written_steps(tmp_path)
    if written:
      assert checkpoint_steps(tmp_path) == written
    if len(written) >= 3:
      assert averaging.last_checkpoints(tmp_path / "checkpoints", 3)[-1].endswith(f"-{step}")
    for _ in range(2):
      step += 5
      optimizer.iterations.assign(step)
      checkpoints.save()
  assert _written_steps(tmp_path) == checkpoint_steps(tmp_path) == [20, 25, 30, 35, 40]


def test_swapped_vocabulary_files_of_the_runs_tokenizer_are_refused(tmp_path, epoch_end_kills):
  model_dir, args, _ = epoch_end_kills
  copy = copy_run(model_dir, tmp_path)
  assets = next((copy / "tokenizers").glob("tokenizers_*")) / "assets"
  swap_vocabularies(assets)
  code, output = run_driver([a.replace(str(model_dir), str(copy)) for a in args])
  assert_fails_in_one_line(code, output, rf"train.py: error: --tokenizer=build: "
                           rf"{assets / 'pt_vocab.txt'} is not the .pt vocabulary")


def test_a_cut_vocabulary_hash_file_says_so(tmp_path, tutorial_tokenizers):
  """What train.py and evaluate.py say
  (test_swapped_vocabulary_files_of_the_runs_tokenizer_are_refused runs train.py
  on the message of the same check)."""
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  from transformer.run import run_folder  # pylint: disable=g-import-not-at-top
  hash_file = tmp_path / run_folder.VOCABULARY_HASH_FILE
  hash_file.write_text(tokenizers.vocabulary_hash(tutorial_tokenizers)[:12] + "\n")
  assert re.fullmatch(
      rf"{hash_file} is damaged \(it holds '[0-9a-f]{{12}}', not the 64 hex digits of a "
      r"sha256\), so the run's tokenizer cannot be checked; if this is the run's tokenizer, "
      r"delete the file \(the next run records it again\)",
      run_folder.vocabulary_mismatch(tmp_path, tokenizers.vocabulary_hash(tutorial_tokenizers)))


def test_an_empty_vocabulary_file_is_named(tmp_path, tutorial_tokenizer_path):
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  copy = shutil.copytree(tutorial_tokenizer_path, tmp_path / "tokenizer")
  (copy / "assets" / "en_vocab.txt").write_text("")
  with pytest.raises(DataError,
                     match=f"^{copy / 'assets' / 'en_vocab.txt'} is empty"):
    tokenizers.load_tokenizers(copy)


def test_readers_and_the_writer_of_metrics_jsonl_handle_a_cut_last_line(tmp_path, caplog):
  from transformer.inference import plotting  # pylint: disable=g-import-not-at-top
  from transformer.training import summaries  # pylint: disable=g-import-not-at-top
  from lab.bench import compare_runs  # pylint: disable=g-import-not-at-top
  metrics = tmp_path / "metrics.jsonl"
  record = {"complete": True, "epoch": 1, "seconds": 60.0, "step": 6, "val_accuracy": 0.5}
  metrics.write_text(json.dumps(record, sort_keys=True) + "\n" + json.dumps(record)[:30])
  assert plotting.read_metrics(metrics) == [record]
  assert compare_runs.parse_run(f"a:{tmp_path}") == ("a", [record])
  assert f"{metrics}: line 2 is not a whole record" in caplog.text

  summaries.Summaries(tmp_path, is_chief=True).append_metrics({**record, "epoch": 2})
  assert f"{metrics}: removing its line 2, cut short" in caplog.text
  assert [r["epoch"] for r in metrics_records(tmp_path)] == [1, 2]
