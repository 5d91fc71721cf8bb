"""Tests for transformer.data.pipeline: tokenized, trimmed, shuffled, bucketed batches."""

import numpy as np
import pytest
import tensorflow as tf

from transformer.data import buckets
from transformer.data import ted
from transformer.data import pipeline
from transformer.data import tokenizers

START, END = tokenizers.START_ID, tokenizers.END_ID


@pytest.fixture(scope="module")
def subset(train_pairs):
  """The first 2,000 training pairs (TFDS order) as a dataset."""
  return ted.pairs_to_dataset(train_pairs[:2000])


def _batches(dataset, limit=None):
  return [tuple(np.asarray(t) for t in (source, target_input, labels))
          for (source, target_input), labels in dataset.take(limit or -1)]


def _same(batches, other_batches):
  return len(batches) == len(other_batches) and all(
      a.shape == b.shape and np.array_equal(a, b)
      for batch, other in zip(batches, other_batches) for a, b in zip(batch, other))


def _lengths(ids):
  return np.count_nonzero(ids, axis=1)


def test_element_spec_is_int64_source_decoder_input_and_labels(subset, tutorial_tokenizers):
  dataset = pipeline.make_batches(subset, tutorial_tokenizers)
  spec = tf.TensorSpec([None, None], tf.int64)
  assert dataset.element_spec == ((spec, spec), spec)


def test_labels_are_decoder_inputs_shifted_by_one(subset, tutorial_tokenizers):
  max_tokens = 24
  for source, target_input, labels in _batches(
      pipeline.make_batches(subset, tutorial_tokenizers, max_tokens=max_tokens)):
    assert target_input.shape == labels.shape
    # As in the tutorial, each sentence is split before padding: its decoder
    # inputs stop before its [END], which is only a label.
    np.testing.assert_array_equal(target_input[:, 1:],
                                  np.where(labels[:, 1:] != 0, labels[:, :-1], 0))
    assert (source[:, 0] == START).all() and (target_input[:, 0] == START).all()
    # Padded only up to the longest sentence of the batch.
    assert _lengths(source).max() == source.shape[1]
    for ids in (source, labels):
      lengths = _lengths(ids)
      last = ids[np.arange(len(ids)), lengths - 1]
      # A sentence ends with [END] unless it was trimmed to max_tokens.
      assert ((last == END) | (lengths == max_tokens)).all()
      assert ids.shape[1] <= max_tokens


def test_batches_hold_the_tokenized_sentences_in_order(subset, tutorial_tokenizers, train_pairs):
  dataset = pipeline.make_batches(subset, tutorial_tokenizers, batch_size=8, shuffle=False)
  (source, target_input, labels), = _batches(dataset, 1)
  pt = tutorial_tokenizers.pt.tokenize(tf.constant([p for p, _ in train_pairs[:8]]))
  en = tutorial_tokenizers.en.tokenize(tf.constant([e for _, e in train_pairs[:8]]))
  np.testing.assert_array_equal(source, pt.to_tensor().numpy())
  np.testing.assert_array_equal(target_input, en[:, :-1].to_tensor().numpy())
  np.testing.assert_array_equal(labels, en[:, 1:].to_tensor().numpy())


def test_same_seed_same_batches_and_other_seed_other_batches(subset, tutorial_tokenizers):
  def first_batches(seed):
    return _batches(pipeline.make_batches(subset, tutorial_tokenizers, seed=seed,
                                          shuffle_buffer=500, bucketing=True), 5)

  assert _same(first_batches(1), first_batches(1))
  assert not _same(first_batches(1), first_batches(2))


class _CountingTokenizer:
  """Wraps a tokenizer, counting the tokenize calls that actually run."""

  def __init__(self, tokenizer, counter):
    self._tokenizer = tokenizer
    self._counter = counter

  def tokenize(self, strings):
    def count():
      self._counter.append(1)
      return np.int64(0)
    counted = tf.numpy_function(count, [], tf.int64)
    with tf.control_dependencies([counted]):
      return self._tokenizer.tokenize(tf.identity(strings))


class _CountingTokenizers:

  def __init__(self, wrapped):
    self.calls = []
    self.pt = _CountingTokenizer(wrapped.pt, self.calls)
    self.en = _CountingTokenizer(wrapped.en, self.calls)


def test_tokenization_runs_once_not_every_epoch(subset, tutorial_tokenizers):
  counting = _CountingTokenizers(tutorial_tokenizers)
  dataset = pipeline.make_batches(subset, counting)
  for _ in range(3):
    epoch = _batches(dataset)
  assert sum(len(source) for source, _, _ in epoch) == 2000
  # 2,000 sentences in batches of 1,024: 2 calls per language, in epoch 1 only.
  assert len(counting.calls) == 4


def test_per_epoch_pipelines_share_one_tokenization(subset, tutorial_tokenizers):
  """What train.py does: tokenize once, then one differently seeded pipeline per epoch."""
  counting = _CountingTokenizers(tutorial_tokenizers)
  tokenized = pipeline.tokenize_pairs(subset, counting).cache()
  epochs = [_batches(pipeline.batch_tokenized(tokenized, seed=epoch, shuffle_buffer=500))
            for epoch in range(3)]
  assert len(counting.calls) == 4
  assert all(sum(len(source) for source, _, _ in epoch) == 2000 for epoch in epochs)
  assert not _same(epochs[0], epochs[1])


def test_token_budget(subset, tutorial_tokenizers):
  budget, max_tokens = 1000, 64
  batches = _batches(pipeline.make_batches(subset, tutorial_tokenizers, max_tokens=max_tokens,
                                           tokens_per_batch=budget))
  assert sum(len(source) for source, _, _ in batches) == 2000
  for source, target_input, labels in batches:
    for ids in (source, target_input, labels):
      assert ids.size <= budget and ids.shape[1] <= max_tokens
  # Short sentences come in large batches.
  assert max(len(source) for source, _, _ in batches) > budget // max_tokens * 3


def test_bucketed_batches_pad_to_the_growing_buckets():
  """The pipeline's buckets of max_tokens 32 ([8, 9), ..., [20, 22), ..., [30, 33)
  with static shapes): a sentence of every length 1-32 fills each one."""
  batches = pipeline.batch_tokenized(_tokenized(range(1, 33)), max_tokens=32, bucketing=True,
                                     static_shapes=True, shuffle=False)
  lengths = {source.shape[1] for (source, _), _ in batches.as_numpy_iterator()}
  assert lengths == {*range(7, 20), 21, 23, 25, 27, 29, 32}


def test_budget_smaller_than_one_sentence_raises(subset, tutorial_tokenizers):
  with pytest.raises(ValueError, match="tokens_per_batch=100 cannot hold"):
    pipeline.make_batches(subset, tutorial_tokenizers, tokens_per_batch=100)


def test_drop_remainder_gives_static_batch_size(subset, tutorial_tokenizers):
  dataset = pipeline.make_batches(subset, tutorial_tokenizers, batch_size=64,
                                  drop_remainder=True)
  assert dataset.element_spec[1].shape[0] == 64
  assert len(_batches(dataset)) == 2000 // 64


def test_works_with_experimental_distribute_dataset(subset, tutorial_tokenizers):
  strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
  dataset = pipeline.make_batches(subset, tutorial_tokenizers, bucketing=True)
  (source, _), _ = next(iter(strategy.experimental_distribute_dataset(dataset)))
  assert strategy.experimental_local_results(source)[0].dtype == tf.int64


def test_padding_fraction_counts_zeros_over_source_and_target():
  batch = ((tf.constant([[2, 5, 3, 0]], tf.int64), tf.constant([[2, 3]], tf.int64)),
           tf.constant([[3, 0]], tf.int64))
  assert pipeline.padding_fraction([batch]) == pytest.approx(1 / 6)
  assert pipeline.padding_fraction([batch, batch], max_batches=1) == pytest.approx(1 / 6)
  with pytest.raises(ValueError, match="no batches"):
    pipeline.padding_fraction([])


@pytest.mark.parametrize("batching", [{}, {"bucketing": True}, {"tokens_per_batch": 2048}])
def test_batches_run_without_the_tf_data_autotuner(subset, tutorial_tokenizers, batching):
  # Its thread can hold up dropping an iterator (every epoch) until its next
  # wake-up; the batching itself needs no tuning.
  dataset = pipeline.make_batches(subset, tutorial_tokenizers, **batching)
  assert dataset.options().autotune.enabled is False
  assert dataset.take(1).options().autotune.enabled is False  # Kept downstream.


@pytest.mark.parametrize("batching", [{"tokens_per_batch": 1000}, {"bucketing": True},
                                      {"batch_size": 64}])
def test_static_shapes_pad_the_same_sentences_to_known_lengths(subset, tutorial_tokenizers,
                                                               batching):
  max_tokens = 64
  tokenized = pipeline.tokenize_pairs(subset, tutorial_tokenizers, max_tokens).cache()

  def epoch(seed, static_shapes):
    return _batches(pipeline.batch_tokenized(tokenized, max_tokens=max_tokens, seed=seed,
                                             static_shapes=static_shapes, **batching))

  loose, static = epoch(0, False), epoch(0, True)
  assert len(loose) == len(static)
  for loose_batch, static_batch in zip(loose, static):
    assert len({ids.shape[1] for ids in static_batch}) == 1, "source and target alike"
    for loose_ids, static_ids in zip(loose_batch, static_batch):
      width = loose_ids.shape[1]
      np.testing.assert_array_equal(static_ids[:, :width], loose_ids)
      assert not static_ids[:, width:].any()
  known = ({max_tokens} if batching == {"batch_size": 64} else
           set(buckets.bucket_max_lengths(
               buckets.bucket_boundaries(max_tokens, **buckets.GROWING_BUCKETS), max_tokens)))
  assert {batch[0].shape[1] for batch in static} <= known
  # What XLA compiles over two epochs: full batches and a remainder per bucket.
  shapes = {tuple(ids.shape for ids in batch) for batch in static + epoch(1, True)}
  assert len(shapes) <= 2 * len(known)
  assert len(shapes) < len({tuple(ids.shape for ids in batch) for batch in loose + epoch(1, False)})


def _tokenized(lengths):
  """(pt_ids, en_ids) pairs with sources of the given lengths, targets one longer."""
  rng = np.random.default_rng(0)

  def pairs():
    for length in lengths:
      yield (rng.integers(3, 10, size=length), rng.integers(3, 10, size=length + 1))
  spec = (tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.int64))
  return tf.data.Dataset.from_generator(pairs, output_signature=spec).cache()


def test_batch_shapes_without_static_shapes_follow_the_longest_sentence():
  # Lengths 20, 22 and 24 open the buckets [20, 22), [22, 24) and [24, 26):
  # padded to their buckets the batches would be 21, 23 or 25 long; padded to
  # their longest sentences they are 20, 22 or 24.
  assert {20, 22, 24, 26} <= set(buckets.bucket_boundaries(32, **buckets.GROWING_BUCKETS))
  batches = pipeline.batch_tokenized(_tokenized([20, 22, 24] * 40), max_tokens=32,
                                     tokens_per_batch=256, seed=0)
  shapes = pipeline.batch_shapes(batches.as_numpy_iterator())
  assert sum(source[0] * count for (source, _), count in shapes.items()) == 120
  assert {source[1] for source, _ in shapes} == {20, 22, 24}, shapes
  assert {target[1] for _, target in shapes} == {20, 22, 24}, shapes
