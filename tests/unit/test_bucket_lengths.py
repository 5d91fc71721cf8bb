"""``config.data.bucket_lengths``: explicit length buckets with a token budget.

The NumPy batches of prepared shards (``shards.epoch_batches``, the JAX
trainer's training and validation batches) have one shape a bucket, within
the budget, each sentence in the shortest bucket that holds it; the tf.data
pipeline groups the same sentences into the same buckets. Every pair once an
epoch: tests/unit/test_batches_once_per_epoch.py."""

import ml_collections
import numpy as np
import pytest

from transformer.data import shards

MAX_TOKENS = 32
BUCKETS = (8, 16, 24, 32)
BUDGET = 200


def random_split(count=300, seed=0):
  """Pairs of every length from 1 to 40 ids (some trimmed), the target framed by [START]/[END]."""
  rng = np.random.default_rng(seed)
  pt, en = [], []
  for _ in range(count):
    pt.append(rng.integers(4, 100, rng.integers(1, 40)).astype(np.int32))
    en.append(np.concatenate([[2], rng.integers(4, 100, rng.integers(0, 40)), [3]])
              .astype(np.int32))
  return shards.Split(pt, en).trimmed(MAX_TOKENS)


def data_config(**fields):
  config = ml_collections.ConfigDict(dict(max_tokens=MAX_TOKENS, batch_size=8,
                                          tokens_per_batch=BUDGET, bucketing=False,
                                          bucket_lengths=BUCKETS))
  config.update(fields)
  return config


def shapes(batches):
  return {tuple(ids.shape for ids in (source, target_input, labels))
          for (source, target_input), labels in batches}


@pytest.mark.parametrize("rows_multiple", [1, 2, 4])
def test_an_epoch_has_one_shape_a_bucket_within_the_budget(rows_multiple):
  split = random_split()
  batches = shards.epoch_batches(split, data_config(), seed=shards.epoch_seed(0, 3),
                                 rows_multiple=rows_multiple)
  found = shapes(batches)
  assert len(found) == len(BUCKETS)
  assert {shape[0][1] for shape in found} == set(BUCKETS)
  for shape in found:
    rows, length = shape[0]
    assert shape == ((rows, length),) * 3 and rows % rows_multiple == 0
    assert rows * length <= BUDGET  # on each side, as the paper counts
    assert rows + rows_multiple > BUDGET // length  # and no smaller than it must be


def test_validation_batches_have_the_training_shapes():
  split, config = random_split(), data_config()
  training = shards.epoch_batches(split, config, seed=shards.epoch_seed(0, 0))
  validation = shards.epoch_batches(random_split(seed=1), config, shuffle=False)
  assert shapes(validation) == shapes(training)


def test_without_a_budget_each_bucket_has_batch_size_rows():
  batches = shards.epoch_batches(random_split(), data_config(tokens_per_batch=0))
  assert shapes(batches) == {((8, n),) * 3 for n in BUCKETS}


def test_a_sentence_lands_in_the_shortest_bucket_that_holds_it():
  batches = shards.epoch_batches(random_split(), data_config(), seed=5)
  for (source, _), labels in batches:
    length = source.shape[1]
    for s, l in zip(source, labels):
      if not l.any():
        continue  # a row that fills the batch to its full height
      needed = max(np.count_nonzero(s), np.count_nonzero(l))
      assert length == min(n for n in BUCKETS if n >= needed), (needed, length)


@pytest.mark.parametrize("value, message", [
    ((16, 8, 32), r"config\.data\.bucket_lengths: must be positive whole numbers in increasing "
                  r"order, got \(16, 8, 32\)"),
    ((0, 32), r"config\.data\.bucket_lengths: must be positive"),
    ((8, 8, 32), r"config\.data\.bucket_lengths: must be positive"),
    ((8, 24), r"config\.data\.bucket_lengths: the last, 24, must be data\.max_tokens=32"),
    ((8, 64), r"config\.data\.bucket_lengths: the last, 64, must be data\.max_tokens=32"),
])
def test_bad_bucket_lengths_are_one_clear_error(value, message):
  import configs.tiny  # pylint: disable=g-import-not-at-top
  from transformer.config import ConfigError, validate_config  # pylint: disable=g-import-not-at-top
  config = configs.tiny.get_config()
  config.data.max_tokens = 32
  config.data.bucket_lengths = value
  with pytest.raises(ConfigError, match=f"^{message}"):
    validate_config(config)


def test_a_budget_below_the_longest_bucket_is_refused():
  import configs.tiny  # pylint: disable=g-import-not-at-top
  from transformer.config import ConfigError, validate_config  # pylint: disable=g-import-not-at-top
  config = configs.tiny.get_config()
  config.data.update(max_tokens=32, bucket_lengths=(8, 32), tokens_per_batch=31)
  with pytest.raises(ConfigError, match=r"config\.data\.tokens_per_batch: 31 cannot hold"):
    validate_config(config)
  config.data.tokens_per_batch = 32
  validate_config(config)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("name", ["tutorial", "base"])
def test_the_gpu_configurations_use_buckets_and_the_others_do_not(name, device):
  import importlib  # pylint: disable=g-import-not-at-top
  from transformer.config import validate_config  # pylint: disable=g-import-not-at-top
  config = validate_config(importlib.import_module(f"configs.{name}").get_config(device))
  assert bool(config.data.bucket_lengths) == (device == "gpu")
  assert config.data.bucket_lengths[-1:] in ((), (config.data.max_tokens,))


def tf_batches(split, **batching):
  """``pipeline.batch_tokenized`` over ``split``'s pairs, in order, as NumPy batches."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  tokenized = tf.data.Dataset.from_generator(
      lambda: zip(split.pt, split.en), output_signature=(
          tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32)))
  return [((source, target_input), labels) for (source, target_input), labels
          in pipeline.batch_tokenized(tokenized, max_tokens=MAX_TOKENS, shuffle=False,
                                      **batching).as_numpy_iterator()]


def pair_groups(batches):
  """Each batch as the sorted (source, labels) rows it holds, padding cut."""
  return sorted(sorted((tuple(s[s != 0]), tuple(l[l != 0])) for s, l in zip(source, labels)
                       if l.any()) for (source, _), labels in batches)


@pytest.mark.parametrize("buckets", [BUCKETS, (MAX_TOKENS,)])
def test_tf_data_groups_the_sentences_in_the_same_buckets(buckets):
  """The TensorFlow path: ``bucket_by_sequence_length`` on the same buckets and
  budget gives the NumPy batches' groups, padded to the buckets with static
  shapes (rows are not padded there: tf.distribute splits a batch as it is)."""
  split = random_split(seed=2)
  expected = shards.epoch_batches(split, data_config(bucket_lengths=buckets), shuffle=False)
  for static_shapes in (False, True):
    batches = tf_batches(split, tokens_per_batch=BUDGET, bucket_lengths=buckets,
                         static_shapes=static_shapes)
    assert pair_groups(batches) == pair_groups(expected)
  assert {labels.shape[1] for _, labels in batches} == set(buckets)
  assert all(labels.size <= BUDGET for _, labels in batches)


def test_tf_data_refuses_buckets_that_do_not_end_at_max_tokens():
  with pytest.raises(ValueError, match=r"bucket_lengths=\(8, 16\): the last must be max_tokens=32"):
    tf_batches(random_split(count=4), bucket_lengths=(8, 16))
