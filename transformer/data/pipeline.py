"""Batches for training (tutorial: "Set up a data pipeline with tf.data").

Turns a dataset of (pt, en) string pairs into ``((source_ids, target_input_ids),
labels)`` batches of int64 token ids, padded with 0 ([PAD]) up to the longest
sentence of each batch, in the form ``keras.Model.fit`` takes.

Trimming follows the tutorial: the source keeps at most ``max_tokens`` tokens and
the target at most ``max_tokens + 1``, so that the decoder inputs
(``target[:-1]``) and the labels (``target[1:]``) are at most ``max_tokens``
long. No tensor in a batch is longer than ``max_tokens``, the length the
positional encoding and attention masks must cover. A trimmed sentence loses
its [END] token (the tutorial keeps such pairs rather than dropping them).

Differences from the tutorial's ``make_batches``:

* Tokenization runs once per split: the tokenized pairs are cached before the
  shuffle, so later epochs only shuffle and batch.
* ``bucketing=True`` groups sentences of similar length before batching (paper
  §5.1, "batched together by approximate sequence length"), which cuts the
  padding of random batches (``padding_fraction`` measures it).
* ``tokens_per_batch > 0`` sizes each length bucket's batches to a token budget
  (paper §5.1: about 25,000 source and 25,000 target tokens per batch); it
  implies bucketing, since a budget needs the batch's length to be known.
* ``bucket_lengths`` (``config.data.bucket_lengths``) replaces the growing
  buckets by the given ones, the last being ``max_tokens``: a sentence goes to
  the shortest that holds it, and with ``static_shapes`` is padded to it, so
  batches have one length a bucket, as the NumPy batches of prepared shards.
* ``static_shapes=True`` pads every batch to a length known in advance (its
  bucket's longest, or ``max_tokens`` without buckets) instead of its own
  longest sentence. XLA (``--jit_compile``, and every TPU step) compiles once
  per shape: padded to their longest sentences, the 656 batches of an epoch of
  ``configs/cpu_2h.py`` have 88 shapes and the next epoch brings 22 new ones;
  padded to their buckets, 68 and none (``lab/bench/xla_cpu.py`` counts them): at
  most two per bucket, its full batches and its remainder.

Batch sizes are global: under a ``tf.distribute`` strategy, pass the result to
``strategy.experimental_distribute_dataset``, which splits each batch across
the replicas.
"""

import collections
from typing import Iterable, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from transformer.data import ted
# Shared with the NumPy batches of prepared shards, which need no TensorFlow.
from transformer.data.shards import epoch_seed

# Sentences tokenized per call: batching amortizes the per-call overhead of the
# tokenizer's ops.
_TOKENIZE_BATCH = 1024


def tokenize_pairs(pairs_dataset: tf.data.Dataset, tokenizers,
                   max_tokens: int = 128) -> tf.data.Dataset:
  """Tokenizes and trims (pt, en) string pairs into (pt_ids, en_ids) int64 vectors.

  The source is trimmed to `max_tokens` and the target to `max_tokens + 1`
  tokens (see the module docstring).
  """
  def tokenize(pt, en):
    pt_ids = tokenizers.pt.tokenize(pt)[:, :max_tokens]
    en_ids = tokenizers.en.tokenize(en)[:, :max_tokens + 1]
    return pt_ids, en_ids

  def as_tensors(pt_ids, en_ids):
    # unbatch() types each row as a RaggedTensorSpec of ragged rank 0, which
    # padded_batch rejects; inside map() the rows are plain tensors.
    return tf.identity(pt_ids), tf.identity(en_ids)

  return (pairs_dataset
          .batch(_TOKENIZE_BATCH)
          .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
          .unbatch()
          .map(as_tensors))


def bucket_boundaries(max_tokens: int, min_length: int = 8,
                      growth: float = 1.1) -> List[int]:
  """Bucket boundaries growing by about `growth` from `min_length` to `max_tokens`.

  Bucket i holds sequences of length in [boundaries[i-1], boundaries[i]); the
  last bucket holds lengths up to `max_tokens`. Geometric growth keeps the
  padding within a bucket at about `growth - 1` of its length.
  """
  boundaries = []
  length = min_length
  while length <= max_tokens:
    boundaries.append(length)
    length = max(length + 1, int(length * growth))
  return boundaries


def bucket_max_lengths(boundaries: Sequence[int], max_tokens: int) -> List[int]:
  """The longest sequence each bucket can hold."""
  return [boundary - 1 for boundary in boundaries] + [max_tokens]


def _split_target(pt_ids, en_ids):
  return (pt_ids, en_ids[:-1]), en_ids[1:]


def _bucketed_length(inputs, labels):
  # The padded length of all three tensors of a batch: source, decoder inputs
  # and labels.
  source, _ = inputs
  return tf.maximum(tf.shape(source)[0], tf.shape(labels)[0])


def make_batches(pairs_dataset: tf.data.Dataset, tokenizers, *,
                 max_tokens: int = 128, **batching) -> tf.data.Dataset:
  """Tokenized, shuffled, padded batches of ((source, decoder input), labels).

  The tutorial's ``make_batches`` in one call: :func:`tokenize_pairs`, cached,
  then :func:`batch_tokenized` (which documents ``batching``). Iterating the
  result again (another epoch) reshuffles but does not tokenize again.
  """
  tokenized = tokenize_pairs(pairs_dataset, tokenizers, max_tokens).cache()
  return batch_tokenized(tokenized, max_tokens=max_tokens, **batching)


def batch_tokenized(tokenized: tf.data.Dataset, *, max_tokens: int = 128,
                    batch_size: int = 64, tokens_per_batch: int = 0,
                    bucketing: bool = False, bucket_lengths: Sequence[int] = (),
                    shuffle: bool = True,
                    shuffle_buffer: int = 20000, seed: int = 0,
                    drop_remainder: bool = False,
                    static_shapes: bool = False) -> tf.data.Dataset:
  """Shuffled, padded batches of already tokenized pairs.

  Build ``tokenized`` once with ``tokenize_pairs(...).cache()`` and call this
  for each epoch with its own seed: every pipeline built on the same cached
  dataset shares its cache, so only the first epoch tokenizes.

  Args:
    tokenized: (pt_ids, en_ids) pairs from :func:`tokenize_pairs`.
    max_tokens: longest sequence in any batch tensor (see the module docstring).
    batch_size: sentences per (global) batch, used when tokens_per_batch is 0.
    tokens_per_batch: if > 0, each batch holds as many sentences as fit
      `batch size * padded length <= tokens_per_batch` on each side; implies
      bucketing.
    bucketing: group sentences of similar length before batching.
    bucket_lengths: if given, the buckets' longest lengths, increasing, the
      last ``max_tokens`` (instead of :func:`bucket_boundaries`'); implies
      bucketing.
    shuffle: shuffle the sentences (each iteration anew) before batching.
    shuffle_buffer: size of the shuffle buffer.
    seed: the shuffle seed; the same seed gives the same batches in the same
      order.
    drop_remainder: drop incomplete final batches (of each bucket).
    static_shapes: pad each batch to its bucket's longest length (to
      `max_tokens` without bucketing), not to its longest sentence, so that
      XLA meets few shapes (see the module docstring).

  Returns:
    A dataset of `((source_ids, target_input_ids), label_ids)`, each int64 of
    shape [batch, length <= max_tokens], 0-padded; with `static_shapes` the
    three have the same length.
  """
  if tokens_per_batch and tokens_per_batch < max_tokens:
    raise ValueError(f"tokens_per_batch={tokens_per_batch} cannot hold one "
                     f"sentence of max_tokens={max_tokens}")
  if bucket_lengths and bucket_lengths[-1] != max_tokens:
    raise ValueError(f"bucket_lengths={tuple(bucket_lengths)}: the last must be "
                     f"max_tokens={max_tokens}")
  dataset = tokenized
  if shuffle:
    dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
  dataset = dataset.map(_split_target, num_parallel_calls=tf.data.AUTOTUNE)

  if bucketing or tokens_per_batch or bucket_lengths:
    boundaries = ([length + 1 for length in bucket_lengths[:-1]] if bucket_lengths
                  else bucket_boundaries(max_tokens))
    if static_shapes:
      # Padding to the boundary needs one above every length, the last bucket's too.
      boundaries.append(max_tokens + 1)
    max_lengths = bucket_max_lengths(boundaries, max_tokens)
    if tokens_per_batch:
      batch_sizes = [tokens_per_batch // length for length in max_lengths]
    else:
      batch_sizes = [batch_size] * len(max_lengths)
    dataset = dataset.bucket_by_sequence_length(
        _bucketed_length, boundaries, batch_sizes, drop_remainder=drop_remainder,
        pad_to_bucket_boundary=static_shapes)
  else:
    length = [max_tokens] if static_shapes else [None]
    dataset = dataset.padded_batch(batch_size, padded_shapes=((length, length), length),
                                   drop_remainder=drop_remainder)

  return without_autotuner(dataset.prefetch(tf.data.AUTOTUNE))


def without_autotuner(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """``dataset`` with tf.data's autotuner off.

  The autotuner's thread wakes at doubling intervals (10 ms, 20 ms, 40 ms, ...),
  and dropping an iterator waits for its next wake-up: a loop over short-lived
  iterators (an epoch, a validation, a benchmark's chunk of steps) then takes
  10 ms × (2^n − 1), seconds longer than its work. Cached, padded batches need
  no tuning.
  """
  options = tf.data.Options()
  options.autotune.enabled = False
  return dataset.with_options(options)


def batch_shapes(batches: Iterable) -> collections.Counter:
  """How many ``((source, target_input), labels)`` batches have each
  ``(source shape, target shape)``: what XLA compiles a step for."""
  return collections.Counter(
      (tuple(source.shape), tuple(target_input.shape)) for (source, target_input), _ in batches)


def padding_fraction(batches: Iterable, max_batches: Optional[int] = None) -> float:
  """The fraction of [PAD] (0) positions in the source and decoder-input tensors."""
  padding = total = 0
  for index, ((source, target_input), _) in enumerate(batches):
    if max_batches is not None and index >= max_batches:
      break
    for ids in (source, target_input):
      ids = np.asarray(ids)
      padding += int(np.count_nonzero(ids == 0))
      total += ids.size
  if total == 0:
    raise ValueError("padding_fraction: no batches")
  return padding / total


def training_batches(tokenized: tf.data.Dataset, config, epoch: int, *,
                     drop_remainder: bool = False,
                     static_shapes: bool = False) -> tf.data.Dataset:
  """Epoch ``epoch``'s shuffled batches of ``tokenized`` (see :func:`batch_tokenized`),
  as ``config.data`` and ``config.training.seed`` set them."""
  return batch_tokenized(
      tokenized, max_tokens=config.data.max_tokens, batch_size=config.data.batch_size,
      tokens_per_batch=config.data.tokens_per_batch, bucketing=config.data.bucketing,
      bucket_lengths=tuple(config.data.bucket_lengths), shuffle=True,
      shuffle_buffer=config.data.shuffle_buffer,
      seed=epoch_seed(config.training.seed, epoch), drop_remainder=drop_remainder,
      static_shapes=static_shapes)


def evaluation_batches(pairs: Sequence, tokenizers, data_config, *,
                       drop_remainder: bool = False,
                       static_shapes: bool = False) -> tf.data.Dataset:
  """Batches of the (pt, en) string ``pairs`` in order, as ``data_config`` sets them."""
  return make_batches(
      ted.pairs_to_dataset(list(pairs)), tokenizers, max_tokens=data_config.max_tokens,
      batch_size=data_config.batch_size, tokens_per_batch=data_config.tokens_per_batch,
      bucketing=data_config.bucketing,
      # A run's config.json from before the field has none: the default, no buckets.
      bucket_lengths=tuple(data_config.get("bucket_lengths", ())), shuffle=False,
      drop_remainder=drop_remainder, static_shapes=static_shapes)
