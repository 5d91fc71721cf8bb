"""Prepared data and prepare.py under faults (issue 59, cases 4, 8 and 9): a
changed id file is found by its sha256 and ids outside the vocabulary by a
range check, at load; prepare.py stopped by a signal says so in one line and
exits 128 + N, at a file-size limit names the file, and neither a stop nor a
kill leaves --output missing or staging folders that a rerun keeps. Issue 67
(case 2): the vocabularies and references are in the digest, and a folder
moved away from the machine (and the data) that made it is scored there."""

import json
import os
from pathlib import Path
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from helpers.backends import needs_jax
from helpers.fault_runs import error_lines, files_below, run_driver
from helpers.prepared import random_prepared_folder
from transformer.data import shards
from transformer.run.errors import DataError


def test_a_changed_id_file_is_refused_naming_it(tmp_path):
  prepared = random_prepared_folder(tmp_path / "prepared")
  ids_file = prepared / "train.pt.npy"
  ids = np.load(ids_file)
  ids[::7] ^= 1  # the low bit of every 7th id: still ids of the vocabulary
  np.save(ids_file, ids)
  with pytest.raises(DataError, match=rf"^{ids_file}: changed since prepare.py "
                     r"wrote it \(its sha256 differs from manifest.json"):
    shards.load_split(prepared, "train")
  shards.load_split(prepared, "validation")  # the other files are intact


def test_ids_outside_the_vocabulary_are_refused_naming_the_file(tmp_path):
  prepared = random_prepared_folder(tmp_path / "prepared", vocab_size=300)
  manifest_file = prepared / "manifest.json"
  manifest = json.loads(manifest_file.read_text())
  manifest.pop("sha256", None)  # as a folder prepared before the digests were recorded
  manifest_file.write_text(json.dumps(manifest))
  ids_file = prepared / "train.en.npy"
  ids = np.load(ids_file)
  ids[5] = 300
  np.save(ids_file, ids)
  with pytest.raises(DataError, match=rf"^{ids_file}: ids outside the vocabulary of "
                     r"300 tokens \(from \d+ to 300\)"):
    shards.load_split(prepared, "train")


REPO_DIR = Path(__file__).resolve().parents[2]


def _jax_script(*args):
  """A script of the repository under KERAS_BACKEND=jax."""
  return subprocess.run([sys.executable, *map(str, args)], cwd=REPO_DIR, capture_output=True,
                        text=True, timeout=600, env={**os.environ, "KERAS_BACKEND": "jax",
                                                     "PYTHONPATH": str(REPO_DIR)})


@pytest.mark.slow
def test_a_renamed_token_in_the_english_vocabulary_is_refused_in_one_line(tmp_path):
  """The JAX evaluation decodes with vocab.en.txt: one token renamed would
  change every hypothesis and the BLEU without a word; its sha256 refuses it
  before any model is loaded."""
  prepared = random_prepared_folder(tmp_path / "prepared")
  vocabulary = prepared / "vocab.en.txt"
  vocabulary.write_text(vocabulary.read_text().replace("\nt17\n", "\nx17\n"))
  run = tmp_path / "run"  # what evaluate.py checks of a JAX run folder before reading it
  (run / "checkpoints" / "step-1").mkdir(parents=True)
  (run / "config.json").write_text("{}")
  (run / "tokenizer_path.txt").write_text("none\n")
  result = _jax_script("evaluate.py", f"--model_dir={run}", f"--data={prepared}",
                       "--split=validation", "--method=greedy")
  assert result.returncode == 1, result.stderr[-3000:]
  assert result.stderr.strip().splitlines() == [
      f"evaluate.py: error: {vocabulary}: changed since prepare.py wrote it (its sha256 differs "
      "from manifest.json: a damaged disk or an edited file); run prepare.py again"]


@needs_jax
def test_a_folder_without_references_or_their_data_is_one_line(tmp_path, monkeypatch):
  """A folder prepared before the references were kept, whose manifest names no
  TED files: the evaluation's error, not a KeyError."""
  monkeypatch.setenv("KERAS_BACKEND", "jax")
  from transformer.inference import evaluation_jax  # pylint: disable=g-import-not-at-top
  prepared = random_prepared_folder(tmp_path / "prepared")
  with pytest.raises(DataError,
                     match=rf"^{prepared} holds no validation references \(the whole_word "
                     r"scoring's\) and names no TED files to read them from; run prepare.py "
                     r"again to keep them in the folder$"):
    evaluation_jax.raw_references(prepared, "validation", 4)


def test_every_file_of_a_prepared_folder_is_in_its_digest(tmp_path):
  prepared = random_prepared_folder(tmp_path / "prepared")
  digested = set(json.loads((prepared / "manifest.json").read_text())["sha256"])
  assert digested == {p.name for p in prepared.iterdir()} - {"manifest.json"}


# ------------------------------------------------------------ prepare.py itself

def _prepare(small_data, tokenizer, output):
  return ["prepare.py", "--config=configs/tiny.py", f"--data={small_data}",
          f"--tokenizer={tokenizer}", f"--output={output}"]


@pytest.fixture(scope="module")
def prepared_once(tmp_path_factory, small_data, tutorial_tokenizer_path):
  """A folder prepared once (the previous data of the tests) and its files' bytes."""
  output = tmp_path_factory.mktemp("prepare") / "prepared"
  code, output_text = run_driver(_prepare(small_data, tutorial_tokenizer_path, output))
  assert code == 0, output_text[-3000:]
  return output, files_below(output)


def _hidden_siblings(output):
  return sorted(p.name for p in output.parent.iterdir() if p.name.startswith("."))


@pytest.mark.slow
@pytest.mark.parametrize("fault,signum", [("sigterm_at_save", signal.SIGTERM),
                                          ("sigint_at_save", signal.SIGINT)])
def test_a_signal_is_one_line_and_keeps_the_previous_data(prepared_once, small_data,
                                                          tutorial_tokenizer_path, fault, signum):
  output, before = prepared_once
  code, text = run_driver(_prepare(small_data, tutorial_tokenizer_path, output), fault)
  assert code == 128 + signum, text[-3000:]
  assert "Traceback" not in text, text[-3000:]
  name = signal.Signals(signum).name
  assert re.search(rf"^prepare\.py: stopped by {name}; {output} is left as it was", text,
                   re.MULTILINE), text[-3000:]
  assert files_below(output) == before
  assert _hidden_siblings(output) == []


@pytest.mark.slow
def test_a_file_size_limit_names_the_file_and_keeps_the_previous_data(
    prepared_once, small_data, tutorial_tokenizer_path):
  output, before = prepared_once
  code, text = run_driver(_prepare(small_data, tutorial_tokenizer_path, output),
                          "full_disk_at_save")
  assert code == 1, text[-3000:]
  lines = error_lines(text, "prepare.py")
  assert len(lines) == 1 and re.match(
      rf"prepare\.py: error: cannot write {output}/train\.\w+\.npy: OSError: .*\(a full disk "
      rf"or a file-size limit\?\); {output} is left as it was", lines[0]), text[-3000:]
  assert files_below(output) == before
  assert _hidden_siblings(output) == []


@pytest.mark.slow
def test_a_kill_while_replacing_never_leaves_the_output_missing(
    tmp_path, prepared_once, small_data, tutorial_tokenizer_path):
  # The previous data: a copy of prepared_once's folder (prepare.py wrote it; the rerun
  # below must write the same bytes again).
  output = shutil.copytree(prepared_once[0], tmp_path / "prepared")
  # What a kill during a write leaves beside the folder: the rerun removes it.
  (tmp_path / ".prepared.partial").mkdir()
  (tmp_path / ".prepared.partial" / "train.pt.npy").write_bytes(b"cut")
  code, text = run_driver(_prepare(small_data, tutorial_tokenizer_path, output),
                          "kill_after_set_aside")
  assert shards.is_prepared(output), (code, text[-3000:])
  code, text = run_driver(_prepare(small_data, tutorial_tokenizer_path, output))
  assert code == 0, text[-3000:]
  assert files_below(output) == prepared_once[1]
  assert _hidden_siblings(output) == []


@pytest.mark.slow
def test_a_prepared_folder_moved_away_from_its_data_is_scored_under_jax(
    tmp_path, small_data, tutorial_tokenizer_path):
  """prepare.py on data that is then gone, the folder moved elsewhere: train.py
  and evaluate.py under JAX find everything they read in the folder (the
  whole_word references included), and the manifest names no path of it."""
  data = shutil.copytree(small_data, tmp_path / "data")
  made = tmp_path / "here" / "prepared"
  code, text = run_driver(_prepare(data, tutorial_tokenizer_path, made))
  assert code == 0, text[-3000:]
  shutil.rmtree(data)
  moved = tmp_path / "elsewhere" / "prepared"
  moved.parent.mkdir()
  made.rename(moved)
  manifest = json.loads((moved / "manifest.json").read_text())
  assert str(tmp_path) not in json.dumps({k: v for k, v in manifest.items() if k != "tokenizer"})
  run = tmp_path / "run"
  trained = _jax_script("train.py", "--config=configs/tiny.py", f"--data={moved}",
                        f"--model_dir={run}", "--config.training.train_steps=2", "--noexport")
  assert trained.returncode == 0, trained.stderr[-3000:]
  scored = _jax_script("evaluate.py", f"--model_dir={run}", f"--data={moved}", "--split=test",
                       "--method=greedy", "--max_sentences=4")
  assert scored.returncode == 0, scored.stderr[-3000:]
  record = json.loads(scored.stdout)
  assert record["num_sentences"] == 4 and 0 <= record["whole_word"]["bleu"] <= 100
