"""A prepare.py folder of random token ids, for training under JAX without a tokenizer."""

from pathlib import Path

import numpy as np

from transformer.config import SPLIT_FILE_SUFFIX
from transformer.data import shards


def random_prepared_folder(path: Path, pairs: int = 64, vocab_size: int = 300,
                           max_length: int = 15, test_pairs: int = 0) -> Path:
  """Train and validation splits of ``pairs`` random sentences of 3 to
  ``max_length`` ids; the manifest names a tokenizer that does not exist
  (training reads only the ids). ``test_pairs`` > 0 adds a test split and the
  validation and test references (the ids' tokens), as prepare.py writes them."""
  rng = np.random.default_rng(0)
  def sentences(count=pairs):
    return [rng.integers(4, vocab_size, rng.integers(3, max_length)).astype(np.int32)
            for _ in range(count)]
  vocabularies = {language: [f"t{i}" for i in range(vocab_size)] for language in ("pt", "en")}
  splits = {"train": (sentences(), sentences()), "validation": (sentences(), sentences())}
  references = None
  if test_pairs:
    splits["test"] = (sentences(test_pairs), sentences(test_pairs))
    references = {split: [" ".join(f"t{i}" for i in en) for en in splits[split][1]]
                  for split in ("validation", "test")}
  return shards.write_prepared(path, splits, vocabularies,
                               {"max_tokens": 64, "tokenizer": str(path / "no_tokenizer")},
                               "0" * 64, references)


def ted_named_folder(path: Path) -> Path:
  """A folder holding the TED HRLR files' names (``pt.train`` ... ``en.test``),
  one short pair each: what ``--data`` checks before reading, so that a test
  of what comes after needs no ``../shared``."""
  path.mkdir(parents=True, exist_ok=True)
  for suffix in SPLIT_FILE_SUFFIX.values():
    for language in ("pt", "en"):
      (path / f"{language}.{suffix}").write_text("a .\n")
  return path
