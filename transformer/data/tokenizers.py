"""WordPiece tokenizers (tutorial: "Set up the tokenizer"; the subword-tokenizer guide).

The tutorial downloads ``ted_hrlr_translate_pt_en_converter``, a SavedModel with
two BERT WordPiece tokenizers, ``.pt`` and ``.en``. This module builds the same
kind from the training split (:mod:`transformer.data.wordpiece`) with the
guide's settings (8,000 tokens, ``[PAD] [UNK] [START] [END]`` at ids 0-3,
``lower_case=True``), caches it, and loads it or the tutorial's.
``vocabulary="joint"`` gives both languages one vocabulary (to share embedding
weights). The interface is the converter's (:data:`INTERFACE`,
:mod:`transformer.data.tokenizer_module`).

``detokenize(tokenize(s))`` is not ``s``: BertTokenizer lower-cases, strips
accents (NFD: "impressão" -> "impressao", in about 85% of TED's Portuguese
sentences), splits around punctuation (Moses' "did n't" -> "did n ' t"), and
detokenization joins words with single spaces ("Olá, Mundo!" -> "ola , mundo !";
unknown characters become ``[UNK]``): compare output with references only after
the same round trip.
"""

import hashlib
import json
import os
from pathlib import Path
import shutil
import tempfile
from typing import List, Optional, Sequence, Tuple, Union

from absl import logging
import tensorflow as tf
# Importing tensorflow_text registers the ops the tokenizer SavedModels use.
import tensorflow_text as text

from transformer.data import ted
from transformer.data import wordpiece
from transformer.data.reserved_tokens import END_ID, PAD_ID, RESERVED_TOKENS, START_ID
from transformer.data.tokenizer_module import Tokenizers
from transformer.run import files
from transformer.run.errors import DataError, describe_error
from transformer.run.run_folder import PathLike

VOCABULARIES = ("separate", "joint")
# Bump when the exported module changes so that old caches are rebuilt.
_FORMAT_VERSION = 1
INTERFACE = ("tokenize", "detokenize", "lookup", "get_vocab_size",
             "get_vocab_path", "get_reserved_tokens")


def build_tokenizers(train_pairs: Sequence[ted.Pair], export_dir: PathLike,
                     vocab_size: int = 8000, vocabulary: str = "separate") -> Path:
  """Learns the vocabularies from `train_pairs` and saves a Tokenizers SavedModel."""
  _check_vocabulary(vocabulary)
  export_dir = Path(export_dir)
  pt_sentences = [pt for pt, _ in train_pairs]
  en_sentences = [en for _, en in train_pairs]
  with tempfile.TemporaryDirectory() as vocab_dir:
    if vocabulary == "joint":
      joint = wordpiece.learn_vocabulary(pt_sentences + en_sentences, vocab_size,
                                         RESERVED_TOKENS, "joint pt+en")
      pt_path = en_path = wordpiece.write_vocab_file(joint, Path(vocab_dir) / "joint_vocab.txt")
    else:
      pt_path, en_path = (
          wordpiece.write_vocab_file(
              wordpiece.learn_vocabulary(sentences, vocab_size, RESERVED_TOKENS, language),
              Path(vocab_dir) / f"{language}_vocab.txt")
          for language, sentences in (("pt", pt_sentences), ("en", en_sentences)))
    tf.saved_model.save(Tokenizers(pt_path, en_path), str(export_dir))
  return export_dir


def _check_vocabulary(vocabulary: str) -> None:
  if vocabulary not in VOCABULARIES:
    raise ValueError(f"unknown vocabulary {vocabulary!r}; choose one of "
                     f"{', '.join(VOCABULARIES)}")


def cache_key(train_pairs: Sequence[ted.Pair], vocab_size: int, vocabulary: str) -> str:
  """A hash of the training text and every setting that changes the vocabulary."""
  digest = hashlib.sha256()
  settings = {"vocab_size": vocab_size, "vocabulary": vocabulary,
              "reserved_tokens": list(RESERVED_TOKENS),
              "bert_tokenizer_params": wordpiece.BERT_TOKENIZER_PARAMS,
              "format_version": _FORMAT_VERSION}
  digest.update(json.dumps(settings, sort_keys=True).encode())
  for pair in train_pairs:
    # JSON quotes and escapes each side, so no two data sets share an encoding.
    digest.update(json.dumps(list(pair)).encode() + b"\n")
  return digest.hexdigest()


# cache_key of the whole training split with the tutorial's settings, whose build
# is the tutorial's converter byte for byte (tests/integration/test_guide_tokenizers.py).
TUTORIAL_CACHE_KEY = "2ad8694aceb33745fb02d9b17aee57582db1dac440e207f51531bf127e115a73"


def get_or_build_tokenizers(train_pairs_or_data_dir: Union[PathLike, Sequence[ted.Pair]],
                            cache_dir: PathLike, vocab_size: int = 8000,
                            vocabulary: str = "separate", rebuild: bool = False,
                            tutorial: Optional[PathLike] = None,
                            other_caches: Sequence[PathLike] = ()) -> Path:
  """Returns the path of a cached Tokenizers SavedModel, building it if needed.

  The pairs come as a list or a folder of the original files; ``cache_dir``
  keeps a SavedModel per :func:`cache_key` (``rebuild``: build anyway); the
  ``tutorial``'s tokenizer is used where the build would give it
  (:data:`TUTORIAL_CACHE_KEY`), and the same build in ``other_caches`` copied.
  """
  _check_vocabulary(vocabulary)
  if isinstance(train_pairs_or_data_dir, (str, os.PathLike)):
    train_pairs = ted.local_split_pairs(train_pairs_or_data_dir, "train")
  else:
    train_pairs = train_pairs_or_data_dir
  if not train_pairs:
    raise ValueError("no training pairs to learn a vocabulary from")
  key = cache_key(train_pairs, vocab_size, vocabulary)
  export_dir = Path(cache_dir) / f"tokenizers_{vocabulary}_{vocab_size}_{key[:16]}"
  found = None if rebuild else _built_before(export_dir, key, tutorial, other_caches)
  if found is not None:
    return found
  # Staged, so an interrupted build never passes for a cached one.
  with files.staged(export_dir) as staging:
    build_tokenizers(train_pairs, staging, vocab_size, vocabulary)
    (staging / "build_info.json").write_text(json.dumps(
        {"key": key, "vocab_size": vocab_size, "vocabulary": vocabulary,
         "num_pairs": len(train_pairs)}, indent=2))
  logging.info("saved tokenizers to %s", export_dir)
  return export_dir


def _built_before(export_dir: Path, key: str, tutorial: Optional[PathLike],
                  other_caches: Sequence[PathLike]) -> Optional[Path]:
  """The build of ``key`` where one exists (:func:`get_or_build_tokenizers`), or None."""
  if (export_dir / "saved_model.pb").is_file():
    logging.info("using cached tokenizers %s", export_dir)
    return export_dir
  if tutorial is not None and key == TUTORIAL_CACHE_KEY and (
      Path(tutorial) / "saved_model.pb").is_file():
    logging.info("using the tutorial's tokenizer %s: what building from these pairs with "
                 "these settings gives", tutorial)
    return Path(tutorial)
  for other in other_caches:
    if (Path(other) / export_dir.name / "build_info.json").is_file():  # written last: whole
      with files.staged(export_dir) as staging:
        shutil.copytree(Path(other) / export_dir.name, staging)
      logging.info("copied the same tokenizers from %s", Path(other) / export_dir.name)
      return export_dir
  return None


def load_tokenizers(path: PathLike):
  """Loads a Tokenizers SavedModel (ours or the tutorial's), checked
  (:func:`check_vocabulary_files`); :class:`DataError` naming the file."""
  path = Path(path)
  if not (path / "saved_model.pb").is_file():
    raise DataError(
        f"no tokenizer SavedModel at {path}: pass the tutorial's "
        "ted_hrlr_translate_pt_en_converter or build one with "
        "transformer.data.tokenizers.get_or_build_tokenizers(data_dir, cache_dir)")
  tokenizers = load_saved_model(path, "tokenizer")
  for language in (ted.SOURCE_LANGUAGE, ted.TARGET_LANGUAGE):
    tokenizer = getattr(tokenizers, language, None)
    if tokenizer is None:
      raise DataError(f"the SavedModel at {path} has no .{language} tokenizer")
    missing = [name for name in INTERFACE if not hasattr(tokenizer, name)]
    if missing:
      raise DataError(f"the .{language} tokenizer in {path} lacks "
                           f"{', '.join(missing)}")
  check_vocabulary_files(tokenizers)
  return tokenizers


def load_saved_model(path: PathLike, what: str):
  """``tf.saved_model.load(path)``, or :class:`DataError` naming ``path``
  (or its empty vocabulary file, a bare OutOfRangeError otherwise) and ``what`` it is."""
  path = Path(path)
  empty = sorted(p for p in path.glob("assets/*.txt") if p.stat().st_size == 0)
  if empty:
    raise DataError(f"{empty[0]} is empty: the {what} SavedModel {path} lost a "
                         "vocabulary file; restore it, or rebuild the tokenizer")
  try:
    return tf.saved_model.load(str(path))
  except Exception as e:  # pylint: disable=broad-except  (OSError, DecodeError, OpError...)
    raise DataError(f"cannot load the SavedModel {path} ({describe_error(e)}): its "
                         f"files are damaged, or it is not a {what}") from e


def _tokens(tokenizer) -> List[str]:
  """A tokenizer's vocabulary in id order, from its ``lookup`` (its ``vocab``)."""
  ids = tf.range(tokenizer.get_vocab_size(), dtype=tf.int64)[tf.newaxis]  # one "sentence"
  return [t.decode("utf-8", "replace") for t in tokenizer.lookup(ids)[0].numpy()]


def check_vocabulary_files(tokenizers) -> None:
  """Raises :class:`DataError` naming the file unless each tokenizer's
  vocabulary file (``assets/*.txt``) holds its vocabulary: ``tokenize`` reads
  the file, ``lookup`` and :func:`vocabulary_hash` the ``vocab`` variable, so
  a changed file would change the ids under the same hash."""
  for language in (ted.SOURCE_LANGUAGE, ted.TARGET_LANGUAGE):
    tokenizer = getattr(tokenizers, language)
    path = Path(tokenizer.get_vocab_path().numpy().decode("utf-8"))
    try:  # One token per "\n"-terminated line, as BertTokenizer reads the file.
      in_file = path.read_bytes().decode("utf-8").rstrip("\n").split("\n")
    except (OSError, UnicodeDecodeError) as e:
      raise DataError(f"{path}: cannot read the .{language} vocabulary "
                           f"({describe_error(e)})") from e
    saved = _tokens(tokenizer)
    if in_file != saved:
      differ = next((i for i, (a, b) in enumerate(zip(in_file, saved)) if a != b),
                    min(len(in_file), len(saved)))
      raise DataError(
          f"{path} is not the .{language} vocabulary this tokenizer was saved with "
          f"({len(in_file)} tokens, not {len(saved)}; they differ from id {differ} on): "
          "it was changed, cut or swapped since; restore it, or rebuild the tokenizer")


def vocab_sizes(tokenizers) -> Tuple[int, int]:
  """(pt, en) vocabulary sizes of a loaded Tokenizers module."""
  return (int(tokenizers.pt.get_vocab_size()), int(tokenizers.en.get_vocab_size()))


def vocabulary_hash(tokenizers) -> str:
  """The sha256 (hex) of both vocabularies, token by token in id order: the
  tokenizer's identity for a model."""
  digest = hashlib.sha256()
  for language in (ted.SOURCE_LANGUAGE, ted.TARGET_LANGUAGE):
    digest.update(json.dumps([language, _tokens(getattr(tokenizers, language))],
                             ensure_ascii=False).encode("utf-8"))
  return digest.hexdigest()
