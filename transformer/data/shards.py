"""Prepared token-id shards, and their batches in NumPy (no TensorFlow).

``prepare.py`` tokenizes the data once and writes a folder that training under
JAX (``KERAS_BACKEND=jax python train.py --data=<folder>``) reads without
TensorFlow, like ``fairseq-preprocess``'s binarized data: ``manifest.json``
(splits, counts, vocabulary sizes, max_tokens, ids, the tokenizer, and every
other file's sha256, checked when read); per split ``<split>.pt.npy`` and
``.en.npy`` (every sentence's ids, concatenated; int16 when the vocabulary
fits) and ``<split>.lengths.npy`` (``(pairs, 2)`` int32); ``vocab.pt.txt`` and
``vocab.en.txt`` (a token a line, in id order); the tokenizer's identity
(:data:`VOCABULARY_HASH_FILE`); ``references.<split>.en.txt`` (the scored
splits' English as in the data). It needs nothing outside itself.

:func:`epoch_batches` batches a split as :func:`transformer.data.pipeline.batch_tokenized`
does, in NumPy: the same form, ``config.data`` semantics and trimming (a run may
trim more than ``prepare.py`` did). Three things differ, all for XLA, which
compiles a step per batch shape (padding changes nothing at real positions):

* every batch is padded to a multiple of :data:`LENGTH_MULTIPLE` and to its
  full number of rows (padding rows carry no loss): 8 shapes an epoch for
  ``max_tokens`` 128, not about 90 (``lab/bench/xla_cpu.py``), none new after;
* the buckets are those padded lengths (:data:`FIXED_STEP_BUCKETS`), not the
  pipeline's 40 growing ones; with ``bucket_lengths``, batches are padded to
  their bucket's length, rows rounded down to the devices' multiple;
* the shuffle is a full permutation seeded by the epoch (:func:`epoch_seed`),
  as resuming needs, not ``tf.data``'s shuffle buffer.
"""

import json
from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np

from transformer.data.buckets import (FIXED_STEP_BUCKETS, LENGTH_MULTIPLE, bucket_boundaries,
                                      bucket_max_lengths)
from transformer.run import files
from transformer.run.errors import DataError, describe_error
from transformer.run.run_folder import VOCABULARY_HASH_FILE, PathLike

MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1
LANGUAGES = ("pt", "en")
# The splits whose English references the folder keeps (what is scored).
REFERENCE_SPLITS = ("validation", "test")


def references_file(split: str) -> str:
  return f"references.{split}.en.txt"


def is_prepared(path: PathLike) -> bool:
  return (Path(path) / MANIFEST_FILE).is_file()


def id_dtype(vocab_sizes: Sequence[int]):
  """int16 when every id fits, else int32."""
  return np.int16 if max(vocab_sizes) <= np.iinfo(np.int16).max + 1 else np.int32


def write_prepared(out_dir: PathLike, splits, vocabularies, manifest: dict,
                   vocabulary_sha256: str, references=None) -> Path:
  """Writes a prepared folder whole (:func:`transformer.run.files.staged`), or
  raises :class:`DataError` naming the file and leaves the old one: ``splits``
  ``{split: (pt_ids, en_ids)}`` (lists of 1-D int arrays), ``vocabularies``
  ``{"pt": [token, ...], "en": [...]}`` in id order, ``references`` ``{split:
  [English sentence, ...]}`` in the splits' order, and ``manifest``, ``prepare.py``'s
  fields, to which counts, sizes and dtype are added."""
  out_dir = Path(out_dir)
  sizes = [len(vocabularies[language]) for language in LANGUAGES]
  try:
    with files.staged(out_dir, folder=True) as staging:
      _write_files(staging, out_dir, splits, vocabularies, dict(
          manifest, format=FORMAT_VERSION, dtype=np.dtype(id_dtype(sizes)).name,
          vocab_sizes=dict(zip(LANGUAGES, sizes)),
          tokenizer_vocabulary_sha256=vocabulary_sha256, splits={}, sha256={}),
          references or {})
  except OSError as e:
    raise DataError(f"cannot write {out_dir}: {describe_error(e)}; it is left as it was") from e
  return out_dir


def _write_files(staging: Path, out_dir: Path, splits, vocabularies, manifest: dict,
                 references: dict) -> None:
  """:func:`write_prepared`'s files; the manifest (with the sha256s) last: it marks them whole."""

  def written(name: str, text: str) -> None:
    (staging / name).write_text(text, encoding="utf-8")
    manifest["sha256"][name] = files.sha256_of(staging / name)

  def saved(name: str, array: np.ndarray) -> None:
    try:
      np.save(staging / name, array)
    except OSError as e:  # np.save's own message names neither the file nor the cause
      raise DataError(f"cannot write {out_dir / name}: {describe_error(e)} (a full disk or a "
                       f"file-size limit?); {out_dir} is left as it was") from e
    manifest["sha256"][name] = files.sha256_of(staging / name)

  for split, (pt_ids, en_ids) in splits.items():
    lengths = np.array([[len(p), len(e)] for p, e in zip(pt_ids, en_ids)], np.int32)
    saved(f"{split}.lengths.npy", lengths.reshape(-1, 2))
    for language, ids in zip(LANGUAGES, (pt_ids, en_ids)):
      saved(f"{split}.{language}.npy", (np.concatenate(ids) if len(ids) else np.zeros(0))
            .astype(manifest["dtype"]))
    pt_tokens, en_tokens = lengths.sum(axis=0) if len(lengths) else (0, 0)
    manifest["splits"][split] = dict(pairs=len(pt_ids), pt_tokens=int(pt_tokens),
                                     en_tokens=int(en_tokens))
  for language in LANGUAGES:
    written(f"vocab.{language}.txt", "".join(token + "\n" for token in vocabularies[language]))
  written(VOCABULARY_HASH_FILE, f"{manifest['tokenizer_vocabulary_sha256']}\n")
  for split, sentences in references.items():
    if len(sentences) != manifest["splits"][split]["pairs"]:
      raise ValueError(f"{len(sentences)} {split} references for "
                       f"{manifest['splits'][split]['pairs']} pairs")
    written(references_file(split), "".join(sentence + "\n" for sentence in sentences))
  (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def read_manifest(prepared_dir: PathLike) -> dict:
  """The folder's manifest; :class:`DataError` naming the file if unreadable."""
  path = Path(prepared_dir) / MANIFEST_FILE
  try:
    manifest = json.loads(path.read_text(encoding="utf-8"))
  except (OSError, ValueError) as e:
    raise DataError(f"{path}: not a readable manifest ({describe_error(e)}); run prepare.py "
                     "again") from e
  if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
    raise DataError(f"{path}: not a prepare.py manifest of format {FORMAT_VERSION}; run "
                     "prepare.py again")
  return manifest


def checked_file(prepared_dir: PathLike, name: str) -> Path:
  """``prepared_dir/name``, checked against the manifest's sha256;
  :class:`DataError` naming the file when it is missing or was changed."""
  path = Path(prepared_dir) / name
  if not path.is_file():
    raise DataError(f"{path}: missing from the prepared folder; run prepare.py again")
  _check_digest(path, read_manifest(prepared_dir))
  return path


def _check_digest(path: Path, manifest: dict) -> None:
  # Folders prepared before the digests were recorded have none to check.
  recorded = manifest.get("sha256", {}).get(path.name)
  if recorded is not None and files.sha256_of(path) != recorded:
    raise DataError(f"{path}: changed since prepare.py wrote it (its sha256 differs from "
                     f"{MANIFEST_FILE}: a damaged disk or an edited file); run prepare.py again")


def read_references(prepared_dir: PathLike, split: str):
  """``split``'s English references as in the data (checked), or None for a
  folder prepared before it kept them."""
  if references_file(split) not in read_manifest(prepared_dir).get("sha256", {}):
    return None
  text = checked_file(prepared_dir, references_file(split)).read_text(encoding="utf-8")
  return text.splitlines()


class Split:
  """One split's pairs: ``pt[i]`` and ``en[i]`` are pair i's id arrays (int32)."""

  def __init__(self, pt: List[np.ndarray], en: List[np.ndarray]):
    self.pt, self.en = pt, en

  def __len__(self) -> int:
    return len(self.pt)

  def take(self, n: int) -> "Split":
    return Split(self.pt[:n], self.en[:n]) if n else self  # n = 0: all

  def trimmed(self, max_tokens: int) -> "Split":
    """Sources cut to ``max_tokens``, targets to ``max_tokens + 1`` ids."""
    return Split([p[:max_tokens] for p in self.pt], [e[:max_tokens + 1] for e in self.en])


def load_split(prepared_dir: PathLike, split: str) -> Split:
  """``split`` of a prepared folder; :class:`DataError` naming the file that is
  missing, unreadable, changed, off the manifest's counts, or outside the vocabulary."""
  prepared_dir = Path(prepared_dir)
  manifest = read_manifest(prepared_dir)
  counts = manifest["splits"].get(split)
  if counts is None:
    raise DataError(f"{prepared_dir / MANIFEST_FILE}: no {split!r} split; run prepare.py again")
  paths = {name: prepared_dir / f"{split}.{name}.npy" for name in ("lengths", *LANGUAGES)}
  arrays = {}
  for name, path in paths.items():
    try:
      arrays[name] = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
      raise DataError(f"{path}: unreadable ({describe_error(e)}); run prepare.py again") from e
  lengths = arrays["lengths"]
  expected = {"pt": counts["pt_tokens"], "en": counts["en_tokens"]}
  if lengths.shape != (counts["pairs"], 2) or any(
      arrays[language].shape != (expected[language],)
      or lengths[:, column].sum() != expected[language]
      for column, language in enumerate(LANGUAGES)):
    raise DataError(f"{prepared_dir}: the {split} files do not match {MANIFEST_FILE} "
                     "(cut short or from another run of prepare.py); run prepare.py again")
  for path in paths.values():
    _check_digest(path, manifest)
  for language in LANGUAGES:
    ids, size = arrays[language], manifest["vocab_sizes"][language]
    if ids.size and (ids.min() < 0 or ids.max() >= size):
      raise DataError(f"{paths[language]}: ids outside the vocabulary of {size} tokens (from "
                       f"{ids.min()} to {ids.max()}); run prepare.py again")
  sides = []
  for column, language in enumerate(LANGUAGES):
    ends = np.cumsum(lengths[:, column])
    sides.append(np.split(arrays[language].astype(np.int32), ends[:-1]) if len(ends) else [])
  return Split(*sides)


def epoch_seed(seed: int, epoch: int) -> int:
  """The shuffle seed of ``epoch``: the same batches in the same order, so a
  resumed epoch can skip those already trained on."""
  return seed * 100003 + epoch


def _padded_length(length: int, max_tokens: int) -> int:
  rounded = -(-length // LENGTH_MULTIPLE) * LENGTH_MULTIPLE
  return max(length, min(rounded, max_tokens))


def _buckets(data_config, rows_multiple: int) -> Tuple[List[int], List[int]]:
  """Each bucket's longest length and its batches' rows: :data:`FIXED_STEP_BUCKETS`,
  or ``bucket_lengths`` with the rows that fit the token budget rounded down to
  ``rows_multiple`` (at least one row a device)."""
  explicit = list(data_config.get("bucket_lengths", ()))
  max_lengths = explicit or bucket_max_lengths(
      bucket_boundaries(data_config.max_tokens, **FIXED_STEP_BUCKETS), data_config.max_tokens)
  if not data_config.tokens_per_batch:
    return max_lengths, [data_config.batch_size] * len(max_lengths)
  sizes = [data_config.tokens_per_batch // length for length in max_lengths]
  if explicit:
    sizes = [max(rows_multiple, size // rows_multiple * rows_multiple) for size in sizes]
  return max_lengths, sizes


def _group(order: np.ndarray, bucket_lengths: np.ndarray, data_config,
           rows_multiple: int) -> List[Tuple[List[int], int, int]]:
  """The batches' rows in ``order``, each with its full number of rows and its
  bucket's longest length (0: :func:`_padded_length`), grouped as the
  pipeline's ``bucket_by_sequence_length`` / ``padded_batch`` group them."""
  explicit = bool(data_config.get("bucket_lengths", ()))
  if not (data_config.bucketing or data_config.tokens_per_batch or explicit):
    size = data_config.batch_size
    return [(list(order[i:i + size]), size, 0) for i in range(0, len(order), size)]
  max_lengths, sizes = _buckets(data_config, rows_multiple)
  open_batches = [[] for _ in max_lengths]
  batches = []
  for row in order:  # a bucket's batch leaves as soon as it is full, as in tf.data
    bucket = int(np.searchsorted(max_lengths, bucket_lengths[row], side="left"))
    open_batches[bucket].append(row)
    if len(open_batches[bucket]) == sizes[bucket]:
      batches.append((open_batches[bucket], sizes[bucket], max_lengths[bucket] if explicit else 0))
      open_batches[bucket] = []
  batches.extend((rows, sizes[bucket], max_lengths[bucket] if explicit else 0)
                 for bucket, rows in enumerate(open_batches) if rows)
  return batches


def epoch_batches(split: Split, data_config, *, seed: int = 0, shuffle: bool = True,
                  rows_multiple: int = 1) -> List[Tuple[Tuple[np.ndarray, np.ndarray], np.ndarray]]:
  """An epoch of ``((source, target_input), labels)`` batches of ``split``
  (trimmed already, :meth:`Split.trimmed`) as ``data_config`` (``config.data``)
  sets them, each int32 ``(rows, length)``, 0-padded as the module docstring
  says; shuffled by ``seed`` (:func:`epoch_seed`) unless ``shuffle=False``, the
  rows padded to a multiple of ``rows_multiple`` (the devices).
  """
  pairs = len(split)
  order = np.random.default_rng(seed).permutation(pairs) if shuffle else np.arange(pairs)
  source_lengths = np.array([len(p) for p in split.pt], np.int64)
  label_lengths = np.array([max(len(e) - 1, 0) for e in split.en], np.int64)
  batches = []
  for rows, full_rows, bucket_length in _group(
      order, np.maximum(source_lengths, label_lengths), data_config, rows_multiple):
    length = bucket_length or _padded_length(
        int(max(max(source_lengths[rows]), max(label_lengths[rows]))), data_config.max_tokens)
    height = -(-full_rows // rows_multiple) * rows_multiple
    source, target_input, labels = (np.zeros((height, length), np.int32) for _ in range(3))
    for i, row in enumerate(rows):
      pt, en = split.pt[row], split.en[row]
      source[i, :len(pt)] = pt
      target_input[i, :len(en) - 1] = en[:-1]
      labels[i, :len(en) - 1] = en[1:]
    batches.append(((source, target_input), labels))
  return batches
