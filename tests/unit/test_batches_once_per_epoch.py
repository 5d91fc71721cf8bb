"""The JAX trainer's epoch (transformer/data/shards.py's ``epoch_batches``, the
batches ``transformer/training/jax_engine.py`` trains on): every training pair
exactly once, its source beside its own target, trimmed as the tf.data pipeline
trims, when the split does not fill its last batch. The tf.data side is
tests/unit/test_pipeline_pairs.py; the batches' grouping against tf.data's,
tests/unit/test_shards.py."""

import collections

import ml_collections
import numpy as np
import pytest

from transformer.data import shards

# Prime, so that no batch size or bucket divides it: every epoch ends on a partial batch.
PAIRS = 61
MAX_TOKENS = 24


def numbered_pairs(count, seed=0):
  """``count`` pairs whose target begins with its pair's number (after
  [START]), so that a source beside another pair's target shows; lengths 1 to
  2 × MAX_TOKENS ids, so that some are trimmed."""
  rng = np.random.default_rng(seed)
  pt, en = [], []
  for number in range(count):
    pt.append(rng.integers(4, 500, rng.integers(1, 2 * MAX_TOKENS)).astype(np.int32))
    words = rng.integers(4, 500, rng.integers(0, 2 * MAX_TOKENS)).astype(np.int32)
    en.append(np.concatenate([[2, 1000 + number], words, [3]]).astype(np.int32))
  return shards.Split(pt, en)


def data_config(**fields):
  config = ml_collections.ConfigDict(dict(max_tokens=MAX_TOKENS, batch_size=8,
                                          tokens_per_batch=0, bucketing=False))
  config.update(fields)
  return config


def pairs_in(batches):
  """Every real row of ``batches`` as ``(source, target)`` id tuples, the target
  rebuilt from its decoder input and labels; rows of padding left out."""
  found = collections.Counter()
  for (source, target_input), labels in batches:
    assert source.shape[0] == target_input.shape[0] == labels.shape[0]
    for s, t, l in zip(source, target_input, labels):
      if not t.any():
        continue  # a row that pads the batch to its full height
      length = int(np.count_nonzero(t))
      found[(tuple(s[s != 0]), (int(t[0]), *l[:length]))] += 1
  return found


def pairs_of(split):
  return collections.Counter((tuple(p), tuple(e)) for p, e in zip(split.pt, split.en))


BATCHINGS = [dict(), dict(bucketing=True), dict(tokens_per_batch=60),
             dict(bucket_lengths=(8, 16, 24), tokens_per_batch=60), dict(bucket_lengths=(12, 24))]


@pytest.mark.parametrize("rows_multiple", [1, 2])
@pytest.mark.parametrize("fields", BATCHINGS)
def test_every_pair_is_in_an_epoch_once_with_its_own_target(fields, rows_multiple):
  config = data_config(**fields)
  split = numbered_pairs(PAIRS).trimmed(MAX_TOKENS)
  for seed in (shards.epoch_seed(0, 0), shards.epoch_seed(0, 1)):
    batches = shards.epoch_batches(split, config, seed=seed, rows_multiple=rows_multiple)
    assert pairs_in(batches) == pairs_of(split)
  # The check has something to check: a batch is partial (it holds rows of padding).
  assert any((t == 0).all(axis=1).any() for (_, t), _ in batches)


@pytest.mark.parametrize("fields", BATCHINGS)
def test_validation_batches_hold_every_pair_once_in_order_of_the_split(fields):
  split = numbered_pairs(PAIRS, seed=1).trimmed(MAX_TOKENS)
  batches = shards.epoch_batches(split, data_config(**fields), shuffle=False)
  assert pairs_in(batches) == pairs_of(split)


def test_the_plain_epoch_ends_on_a_batch_of_the_remaining_pairs():
  split = numbered_pairs(PAIRS).trimmed(MAX_TOKENS)
  batches = shards.epoch_batches(split, data_config(batch_size=8), seed=3)
  assert len(batches) == -(-PAIRS // 8)
  real_rows = [int((t != 0).any(axis=1).sum()) for (_, t), _ in batches]
  assert real_rows == [8] * (PAIRS // 8) + [PAIRS % 8]


def test_trimming_keeps_max_tokens_of_the_source_and_one_more_of_the_target():
  """As the tf.data pipeline trims: decoder inputs and labels are then at most
  ``max_tokens`` long, and a long target keeps exactly that many."""
  split = numbered_pairs(PAIRS)
  trimmed = split.trimmed(MAX_TOKENS)
  for pt, en, cut_pt, cut_en in zip(split.pt, split.en, trimmed.pt, trimmed.en):
    assert list(cut_pt) == list(pt[:MAX_TOKENS])
    assert list(cut_en) == list(en[:MAX_TOKENS + 1])
  assert max(map(len, trimmed.en)) == MAX_TOKENS + 1
  for (source, target_input), labels in shards.epoch_batches(trimmed, data_config(), seed=0):
    assert source.shape[1] <= MAX_TOKENS and labels.shape[1] <= MAX_TOKENS
    # The labels are the decoder inputs one step on (the last label, [END] or
    # a trimmed target's last id, has no decoder input after it).
    shifted = target_input[:, 1:]
    np.testing.assert_array_equal(shifted, np.where(shifted != 0, labels[:, :-1], 0))
