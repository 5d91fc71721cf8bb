"""The same training batches for every arm of an ablation (lab/bench/scaling_ablation.py,
lab/bench/table3.py): no flags here, so that several benches can import it.

The training pairs are shuffled once with a fixed NumPy seed (passes after the
first repeat that order), tokenized and cut into token-budget batches (§5.1)
before any model exists; :func:`fingerprint` is their SHA-256, recorded with
each result.
"""

import hashlib

import numpy as np

from transformer.data import ted
from transformer.data import pipeline

DATA_SHUFFLE_SEED = 1234


def fingerprint(batches) -> str:
  """SHA-256 of every batch's ids and shapes, in order."""
  digest = hashlib.sha256()
  for (source, target), labels in batches:
    for array in (source.numpy(), target.numpy(), labels.numpy()):
      digest.update(np.ascontiguousarray(array).tobytes())
      digest.update(str(array.shape).encode())
  return digest.hexdigest()


def shuffled_train_pairs(data_dir):
  """The training pairs in the one fixed order every arm trains on."""
  pairs = ted.local_split_pairs(data_dir, "train")
  order = np.random.default_rng(DATA_SHUFFLE_SEED).permutation(len(pairs))
  return [pairs[i] for i in order]


def make_batches(data_dir, tokenizers, steps: int, tokens_per_batch: int, max_tokens: int):
  """The training batches every arm sees and the validation batches and pairs,
  as in-memory cached datasets (filled here, read by every arm)."""
  shuffled = ted.pairs_to_dataset(shuffled_train_pairs(data_dir))
  tokenized = pipeline.tokenize_pairs(shuffled, tokenizers, max_tokens)
  # Passes over the data repeat that one order: no randomness after it.
  train = pipeline.batch_tokenized(tokenized.repeat(), max_tokens=max_tokens,
                                   tokens_per_batch=tokens_per_batch,
                                   shuffle=False).take(steps).cache()
  sum(1 for _ in train)  # fills the cache
  validation_pairs = ted.local_split_pairs(data_dir, "validation")
  validation = pipeline.batch_tokenized(
      pipeline.tokenize_pairs(ted.pairs_to_dataset(validation_pairs), tokenizers, max_tokens),
      max_tokens=max_tokens, batch_size=64, shuffle=False).cache()
  sum(1 for _ in validation)  # fills the cache
  return train, validation, validation_pairs
