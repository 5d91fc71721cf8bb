"""The tf.data pipeline (transformer/data/pipeline.py) keeps each shuffled source
beside its own target, every pair once an epoch, trimmed to ``max_tokens``,
and groups sentences of one length bucket: checked on sentences of numbers,
which a tokenizer of ``tf.strings`` ops turns into ids, so that each id says
where it came from. The NumPy batches of the JAX trainer:
tests/unit/test_batches_once_per_epoch.py; the pipeline on the real data and
the tutorial's tokenizer: tests/unit/test_pipeline.py."""

import collections
import types

import numpy as np
import pytest
import tensorflow as tf

from transformer.data import buckets
from transformer.data import pipeline
from transformer.data import ted
from transformer.data import tokenizers

START, END = tokenizers.START_ID, tokenizers.END_ID
# Prime, so that no batch size divides it: every epoch ends on a partial batch.
PAIRS = 211
MAX_TOKENS = 24


class NumberTokenizer:
  """A sentence of numbers ("17 5 9") as those ids between [START] and [END]."""

  def tokenize(self, strings):
    ids = tf.strings.to_number(tf.strings.split(strings), tf.int64)
    rows = ids.nrows()
    return tf.concat([tf.fill([rows, 1], tf.constant(START, tf.int64)), ids,
                      tf.fill([rows, 1], tf.constant(END, tf.int64))], axis=1)


NUMBERS = types.SimpleNamespace(pt=NumberTokenizer(), en=NumberTokenizer())


def numbered_pairs(seed=0):
  """Pair i: a source of 0 to 2 × MAX_TOKENS ids, and a target of other
  lengths that begins with 1000 + i (ids of both sides ≥ 4, past the reserved ones)."""
  rng = np.random.default_rng(seed)
  pairs = []
  for number in range(PAIRS):
    source = rng.integers(4, 500, rng.integers(0, 2 * MAX_TOKENS))
    target = [1000 + number, *rng.integers(4, 500, rng.integers(0, 2 * MAX_TOKENS))]
    pairs.append((" ".join(map(str, source)), " ".join(map(str, target))))
  return pairs


def expected_pairs(pairs):
  """Each pair as the pipeline should give it: tokenized and trimmed (the
  source to MAX_TOKENS ids, the target to MAX_TOKENS + 1)."""
  found = collections.Counter()
  for source, target in pairs:
    source_ids = (START, *map(int, source.split()), END)[:MAX_TOKENS]
    target_ids = (START, *map(int, target.split()), END)[:MAX_TOKENS + 1]
    found[(source_ids, target_ids)] += 1
  return found


def batch_rows(dataset):
  """Per batch, its rows as ``(source, target)`` id tuples, padding cut and the
  target rebuilt from decoder inputs and labels."""
  batches = []
  for (source, target_input), labels in dataset:
    source, target_input, labels = (np.asarray(t) for t in (source, target_input, labels))
    assert source.shape[1] <= MAX_TOKENS and labels.shape[1] <= MAX_TOKENS
    rows = []
    for s, t, l in zip(source, target_input, labels):
      length = int(np.count_nonzero(t))
      rows.append((tuple(s[s != 0]), (*t[:1], *l[:length])))
    batches.append(rows)
  return batches


BATCHINGS = [dict(batch_size=16), dict(bucketing=True, batch_size=16),
             dict(tokens_per_batch=200), dict(bucketing=True, batch_size=16, static_shapes=True)]


@pytest.mark.parametrize("batching", BATCHINGS, ids=lambda b: "-".join(b))
def test_each_shuffled_pair_comes_once_with_its_own_target(batching):
  pairs = numbered_pairs()
  dataset = pipeline.make_batches(ted.pairs_to_dataset(pairs), NUMBERS, max_tokens=MAX_TOKENS,
                                  shuffle_buffer=PAIRS, seed=5, **batching)
  batches = batch_rows(dataset)
  found = collections.Counter(row for rows in batches for row in rows)
  assert found == expected_pairs(pairs)
  # It was shuffled: the targets do not come in the order of the pairs.
  numbers = [target[1] for rows in batches for _, target in rows]
  assert numbers != sorted(numbers)


def bucket_of(row, boundaries):
  source, target = row
  return int(np.searchsorted(boundaries, max(len(source), len(target) - 1), side="right"))


@pytest.mark.parametrize("batching", [dict(bucketing=True, batch_size=16),
                                      dict(tokens_per_batch=200)], ids=lambda b: "-".join(b))
def test_a_bucketed_batch_holds_sentences_of_one_bucket_within_its_budget(batching):
  """The bucket of a pair is that of its longest tensor: the source or the
  labels (``bucket_by_sequence_length`` with the growing buckets)."""
  pairs = numbered_pairs(seed=1)
  boundaries = buckets.bucket_boundaries(MAX_TOKENS, **buckets.GROWING_BUCKETS)
  dataset = pipeline.make_batches(ted.pairs_to_dataset(pairs), NUMBERS, max_tokens=MAX_TOKENS,
                                  shuffle_buffer=PAIRS, seed=6, **batching)
  budget = batching.get("tokens_per_batch")
  for (source, _), labels in dataset:
    if budget:
      assert source.shape[0] * max(source.shape[1], labels.shape[1]) <= budget
  for rows in batch_rows(dataset):
    assert len({bucket_of(row, boundaries) for row in rows}) == 1, rows
