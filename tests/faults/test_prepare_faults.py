"""Prepared data and prepare.py under faults (issue 59, cases 4, 8 and 9): a
changed id file is found by its sha256 and ids outside the vocabulary by a
range check, at load; prepare.py stopped by a signal says so in one line and
exits 128 + N, at a file-size limit names the file, and neither a stop nor a
kill leaves --output missing or staging folders that a rerun keeps."""

import json
import re
import signal

import numpy as np
import pytest

from helpers.fault_runs import error_lines, files_below, run_driver
from helpers.prepared import random_prepared_folder
from transformer.data import shards


def test_a_changed_id_file_is_refused_naming_it(tmp_path):
  prepared = random_prepared_folder(tmp_path / "prepared")
  ids_file = prepared / "train.pt.npy"
  ids = np.load(ids_file)
  ids[::7] ^= 1  # the low bit of every 7th id: still ids of the vocabulary
  np.save(ids_file, ids)
  with pytest.raises(shards.ShardError, match=rf"^{ids_file}: changed since prepare.py "
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
  with pytest.raises(shards.ShardError, match=rf"^{ids_file}: ids outside the vocabulary of "
                     r"300 tokens \(from \d+ to 300\)"):
    shards.load_split(prepared, "train")


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
  output = tmp_path / "prepared"
  code, text = run_driver(_prepare(small_data, tutorial_tokenizer_path, output))
  assert code == 0, text[-3000:]
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
