"""Loading the TED HRLR Portuguese-English data (tutorial: "Download the dataset").

The tutorial calls ``tfds.load('ted_hrlr_translate/pt_to_en', as_supervised=True)``.
This module also reads the original files (``pt.train en.train pt.dev ...``)
from a folder, as TFDS does: pairs with an empty side dropped, a split's
examples ordered by the MD5 of ``split_name + str(line_index)``; both sources
give the same ``(pt, en)`` pairs in the same order.
"""

import hashlib
from pathlib import Path
from typing import List, Tuple

from absl import logging

from transformer.config import SPLIT_FILE_SUFFIX
from transformer.data import download
from transformer.run.run_folder import PathLike

SPLITS = ("train", "validation", "test")
SOURCE_LANGUAGE = "pt"
TARGET_LANGUAGE = "en"

Pair = Tuple[str, str]


class DataError(ValueError):
  """The data files are missing or malformed."""


def split_files(data_dir: PathLike, split: str) -> Tuple[Path, Path]:
  """The (source, target) file paths of `split` inside `data_dir`."""
  _check_split(split)
  suffix = SPLIT_FILE_SUFFIX[split]
  data_dir = Path(data_dir)
  return (data_dir / f"{SOURCE_LANGUAGE}.{suffix}",
          data_dir / f"{TARGET_LANGUAGE}.{suffix}")


def _check_split(split: str) -> None:
  if split not in SPLITS:
    raise DataError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")


def _read_lines(path: Path) -> List[str]:
  if not path.is_file():
    raise DataError(f"missing data file: {path}")
  with open(path, "rb") as f:
    raw_lines = f.read().split(b"\n")
  # A trailing newline leaves one empty element that is not a line.
  if raw_lines and raw_lines[-1] == b"":
    raw_lines.pop()
  lines = []
  for line_number, raw in enumerate(raw_lines, start=1):
    try:
      lines.append(raw.decode("utf-8").rstrip("\r"))
    except UnicodeDecodeError as e:
      raise DataError(f"{path}: line {line_number} is not valid UTF-8 ({e.reason} "
                      f"at byte {e.start})") from e
  return lines


def read_parallel_files(source_path: PathLike,
                        target_path: PathLike) -> Tuple[List[Pair], int]:
  """(pairs in file order, number dropped) of two line-aligned UTF-8 files,
  without pairs with an empty or blank side (TFDS keeps blank ones, which no
  model can use); DataError for a missing file, bad UTF-8 or unequal lines."""
  indexed_pairs, dropped = _read_indexed_pairs(source_path, target_path)
  return [pair for _, pair in indexed_pairs], dropped


def _read_indexed_pairs(source_path: PathLike,
                        target_path: PathLike) -> Tuple[List[Tuple[int, Pair]], int]:
  """Like `read_parallel_files`, each kept pair with its 0-based line index."""
  source_path, target_path = Path(source_path), Path(target_path)
  source_lines = _read_lines(source_path)
  target_lines = _read_lines(target_path)
  if len(source_lines) != len(target_lines):
    raise DataError(
        f"line counts differ: {source_path} has {len(source_lines)} lines, "
        f"{target_path} has {len(target_lines)}; the files must be line-aligned")
  indexed_pairs = [(i, (s, t)) for i, (s, t) in enumerate(zip(source_lines, target_lines))
                   if s.strip() and t.strip()]
  return indexed_pairs, len(source_lines) - len(indexed_pairs)


def tfds_order(num_examples: int, split_name: str) -> List[int]:
  """The order in which TFDS yields the lines 0..num_examples-1 of a split."""
  def key(i):
    return int(hashlib.md5((split_name + str(i)).encode()).hexdigest(), 16)
  return sorted(range(num_examples), key=key)


def read_local_split(data_dir: PathLike, split: str) -> Tuple[List[Pair], int]:
  """(pairs in TFDS order, number of dropped empty pairs) of `split` in `data_dir`."""
  source_path, target_path = split_files(data_dir, split)
  missing = [str(p) for p in (source_path, target_path) if not p.is_file()]
  if missing:
    raise DataError(
        f"{data_dir} does not hold the {split!r} split: missing {', '.join(missing)}. "
        f"Expected files: " + ", ".join(
            f"{lang}.{SPLIT_FILE_SUFFIX[s]}" for s in SPLITS
            for lang in (SOURCE_LANGUAGE, TARGET_LANGUAGE)))
  indexed_pairs, dropped = _read_indexed_pairs(source_path, target_path)
  if dropped:
    logging.info("%s split of %s: dropped %d pairs with an empty side",
                 split, data_dir, dropped)
  # TFDS orders by the hash of each line's index in the file (dropped lines keep theirs).
  pair_at_line = dict(indexed_pairs)
  num_lines = max(pair_at_line, default=-1) + 1
  ordered = [pair_at_line[i] for i in tfds_order(num_lines, split) if i in pair_at_line]
  return ordered, dropped


def local_split_pairs(data_dir: PathLike, split: str) -> List[Pair]:
  """The (pt, en) pairs of `split` read from `data_dir`, in TFDS order."""
  return read_local_split(data_dir, split)[0]


def pairs_to_dataset(pairs: List[Pair]) -> "tf.data.Dataset":
  """A dataset of (source, target) scalar tf.string pairs."""
  # Deferred: reading the files needs no TensorFlow (the evaluation under JAX does not load it).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  sources = [s for s, _ in pairs]
  targets = [t for _, t in pairs]
  return tf.data.Dataset.from_tensor_slices(
      (tf.constant(sources, dtype=tf.string), tf.constant(targets, dtype=tf.string)))


def load_tfds_split(split: str) -> "tf.data.Dataset":
  """The `split` from TensorFlow Datasets (downloaded on first use, or a DataError)."""
  _check_split(split)
  try:
    builder = download.prepared_builder()
  except download.DownloadError as e:
    raise DataError(str(e)) from e
  return builder.as_dataset(split=split, as_supervised=True)


def split_pairs(source: PathLike, split: str) -> List[Pair]:
  """The (pt, en) pairs of `split` from "tfds" or a folder, in TFDS order."""
  if str(source) == "tfds":
    return [(pt.decode("utf-8"), en.decode("utf-8"))
            for pt, en in load_tfds_split(split).as_numpy_iterator()]
  return local_split_pairs(source, split)


def load_split(source: PathLike, split: str) -> "tf.data.Dataset":
  """`split` from "tfds" or a folder of the original files, as (pt, en) string pairs."""
  if str(source) == "tfds":
    return load_tfds_split(split)
  if not Path(source).is_dir():
    raise DataError(f"data source {source!r} is neither 'tfds' nor a folder")
  return pairs_to_dataset(local_split_pairs(source, split))
