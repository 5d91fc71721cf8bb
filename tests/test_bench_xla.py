"""bench/xla_cpu.py counts the batch shapes XLA would compile."""

import collections

import numpy as np
import tensorflow as tf

from bench import xla_cpu
from transformer import pipeline


def _tokenized(lengths):
  """(pt_ids, en_ids) pairs of the given lengths, ids 3..9 (no padding)."""
  rng = np.random.default_rng(0)

  def pairs():
    for length in lengths:
      yield (rng.integers(3, 10, size=length), rng.integers(3, 10, size=length + 1))
  spec = (tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.int64))
  return tf.data.Dataset.from_generator(pairs, output_signature=spec).cache()


def test_each_token_budget_batch_is_as_long_as_its_longest_sentence():
  # Lengths 20, 22 and 24 open the buckets [20, 22), [22, 24) and [24, 26):
  # padded to the bucket's boundary every batch would be 21, 23 or 25 long;
  # padded to its longest sentence it is 20, 22 or 24. XLA compiles a step per
  # shape, so the second is what an epoch costs it.
  assert {20, 22, 24, 26} <= set(pipeline.bucket_boundaries(32))
  tokenized = _tokenized([20, 22, 24] * 40)
  batches = pipeline.batch_tokenized(tokenized, max_tokens=32, tokens_per_batch=256, seed=0)
  shapes = xla_cpu.batch_shapes(batches.as_numpy_iterator())
  assert sum(source[0] * count for (source, _), count in shapes.items()) == 120
  assert {source[1] for source, _ in shapes} == {20, 22, 24}, shapes
  assert {target[1] for _, target in shapes} == {20, 22, 24}, shapes


def test_shape_counts():
  first = collections.Counter({((4, 8), (4, 8)): 3, ((2, 16), (2, 17)): 1})
  second = collections.Counter({((4, 8), (4, 8)): 2, ((3, 9), (3, 9)): 1,
                                ((1, 30), (1, 30)): 2})
  assert xla_cpu.shape_counts(first, second) == {
      "batches_first_epoch": 4, "distinct_shapes_first_epoch": 2,
      "new_shapes_second_epoch": 2}
