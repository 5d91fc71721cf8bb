"""Tests for transformer.data.ted: reading the TED HRLR files in TFDS order;
and transformer.data.download's failures (the real builder offline:
tests/scripts/test_data_download.py)."""

import hashlib
from pathlib import Path
import sys

import pytest
import tensorflow as tf

from transformer.data import download
from transformer.data import ted
from transformer.run.errors import DataError

README_FIRST_TRAIN_PAIRS = [
    ("e quando melhoramos a procura , tiramos a única vantagem da impressão , "
     "que é a serendipidade .",
     "and when you improve searchability , you actually take away the one "
     "advantage of print , which is serendipity ."),
    ("mas e se estes fatores fossem ativos ?", "but what if it were active ?"),
    ("mas eles não tinham a curiosidade de me testar .",
     "but they did n't test for curiosity ."),
]


def _write(path, text, encoding="utf-8"):
  path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
  return path


@pytest.mark.parametrize("split, size", [("train", 51785), ("validation", 1193),
                                         ("test", 1803)])
def test_split_sizes(ted_data_dir, split, size):
  pairs, dropped = ted.read_local_split(ted_data_dir, split)
  assert len(pairs) == size
  assert dropped == 0


def test_first_training_pairs_are_the_readmes(train_pairs):
  assert train_pairs[:3] == README_FIRST_TRAIN_PAIRS


def test_load_split_from_folder_gives_string_pairs_in_tfds_order(ted_data_dir):
  dataset = ted.load_split(ted_data_dir, "train")
  assert dataset.element_spec == (tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.string))
  first = [(pt.numpy().decode(), en.numpy().decode()) for pt, en in dataset.take(3)]
  assert first == README_FIRST_TRAIN_PAIRS
  assert dataset.cardinality().numpy() == 51785


def test_tfds_order_sorts_by_md5_of_split_and_index():
  order = ted.tfds_order(50, "validation")
  assert sorted(order) == list(range(50))
  keys = [int(hashlib.md5(f"validation{i}".encode()).hexdigest(), 16) for i in order]
  assert keys == sorted(keys)
  assert ted.tfds_order(50, "train") != order


def test_read_parallel_files(tmp_path):
  source = _write(tmp_path / "pt.x", "um\ndois\n")
  target = _write(tmp_path / "en.x", "one\ntwo\n")
  assert ted.read_parallel_files(source, target) == ([("um", "one"), ("dois", "two")], 0)


def test_missing_file_is_named(tmp_path):
  source = _write(tmp_path / "pt.x", "um\n")
  with pytest.raises(DataError, match=r"missing data file: .*en\.x"):
    ted.read_parallel_files(source, tmp_path / "en.x")


def test_different_line_counts_give_both_counts_and_files(tmp_path):
  source = _write(tmp_path / "pt.x", "um\ndois\ntrês\n")
  target = _write(tmp_path / "en.x", "one\ntwo\n")
  with pytest.raises(DataError) as error:
    ted.read_parallel_files(source, target)
  message = str(error.value)
  assert "pt.x has 3 lines" in message and "en.x has 2" in message


def test_invalid_utf8_gives_file_and_line(tmp_path):
  source = _write(tmp_path / "pt.x", "um\ndois\n")
  target = _write(tmp_path / "en.x", b"one\nt\xffwo\n")
  with pytest.raises(DataError, match=r"en\.x: line 2 is not valid UTF-8"):
    ted.read_parallel_files(source, target)


def test_empty_pairs_are_dropped_and_counted(tmp_path):
  source = _write(tmp_path / "pt.x", "um\n\ntrês\nquatro\n")
  target = _write(tmp_path / "en.x", "one\ntwo\n  \nfour\n")
  pairs, dropped = ted.read_parallel_files(source, target)
  assert pairs == [("um", "one"), ("quatro", "four")]
  assert dropped == 2


def test_dropped_lines_keep_their_tfds_index(tmp_path):
  # TFDS keys examples by file line, so dropping a line must not shift the
  # hash keys of the lines after it.
  lines = [f"s{i}" for i in range(20)]
  _write(tmp_path / "pt.dev", "\n".join(lines) + "\n")
  _write(tmp_path / "en.dev", "\n".join("" if i == 5 else s for i, s in enumerate(lines)) + "\n")
  pairs, dropped = ted.read_local_split(tmp_path, "validation")
  assert dropped == 1
  expected = [lines[i] for i in ted.tfds_order(20, "validation") if i != 5]
  assert [pt for pt, _ in pairs] == expected


def test_folder_without_the_files_lists_what_is_expected(tmp_path):
  with pytest.raises(DataError, match=r"missing .*pt\.train.*Expected files: pt\.train"):
    ted.load_split(tmp_path, "train")


def test_unknown_split_and_source():
  with pytest.raises(DataError, match="unknown split 'dev'"):
    ted.split_files("anywhere", "dev")
  with pytest.raises(DataError, match="neither 'tfds' nor a folder"):
    ted.load_split("/no/such/folder", "train")


def test_tfds_source_without_tensorflow_datasets_names_the_install(monkeypatch):
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # import fails
  with pytest.raises(DataError, match=r"tensorflow-datasets cannot be imported .*"
                                          r"pip install -e '\.\[tensorflow\]'"):
    ted.load_split("tfds", "train")


class _FailingBuilder:
  """A TFDS builder whose download writes part of its data folder, then fails."""

  def __init__(self, data_dir):
    self.data_dir = str(data_dir)
    self.download_dirs = []

  def download_and_prepare(self, download_dir):
    self.download_dirs.append(download_dir)
    Path(self.data_dir, "part.tfrecord").parent.mkdir(parents=True)
    Path(self.data_dir, "part.tfrecord").write_bytes(b"half")
    raise ConnectionError("Max retries exceeded\nwith a long traceback")


def test_a_download_that_fails_part_way_leaves_nothing_it_created(tmp_path):
  root = tmp_path / "tensorflow_datasets"
  root.mkdir()  # there before: kept, as everything else in it
  (root / "other_dataset").mkdir()
  builder = _FailingBuilder(root / "ted_hrlr_translate" / "pt_to_en" / "1.0.0")
  with pytest.raises(DataError, match=r"^downloading the TED HRLR data failed "
                                                   r"\(ConnectionError: Max retries exceeded\); "
                                                   "nothing was kept, rerun to try again$"):
    download._download_and_prepare(builder)  # pylint: disable=protected-access
  assert sorted(p.name for p in root.iterdir()) == ["other_dataset"]
  assert builder.download_dirs and not Path(builder.download_dirs[0]).exists()
