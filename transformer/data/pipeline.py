"""Batches for training (tutorial: "Set up a data pipeline with tf.data").

Turns a dataset of (pt, en) string pairs into ``((source_ids, target_input_ids),
labels)`` batches of int64 token ids, 0-padded ([PAD]) to each batch's longest
sentence, as ``keras.Model.fit`` takes them.

Trimming follows the tutorial: the source keeps ``max_tokens`` tokens and the
target ``max_tokens + 1``, so that decoder inputs (``target[:-1]``) and labels
(``target[1:]``) fit the positional encoding; a trimmed sentence loses its [END].

Beyond the tutorial's ``make_batches``, tokenization runs once per split, and
:func:`batch_tokenized` offers length buckets and token budgets (paper §5.1;
``padding_fraction`` measures the padding) and static shapes for XLA: an
epoch of ``configs/cpu_2h.py`` padded to its buckets has 68 shapes, not 88, and
the next epoch none new, not 22 (``lab/bench/xla_cpu.py``).

Batch sizes are global: under a ``tf.distribute`` strategy, pass the result to
``strategy.experimental_distribute_dataset``, which splits each batch.
"""

import collections
from typing import Iterable, Optional, Sequence

import numpy as np
import tensorflow as tf

from transformer.data import ted
from transformer.data.buckets import GROWING_BUCKETS, bucket_boundaries, bucket_max_lengths
# Shared with the NumPy batches of prepared shards, which need no TensorFlow.
from transformer.data.shards import epoch_seed

# Sentences tokenized per call, to amortize the tokenizer ops' per-call overhead.
_TOKENIZE_BATCH = 1024


def tokenize_pairs(pairs_dataset: tf.data.Dataset, tokenizers,
                   max_tokens: int = 128) -> tf.data.Dataset:
  """Tokenizes (pt, en) string pairs into (pt_ids, en_ids) int64 vectors, trimmed
  as the module docstring says."""
  def tokenize(pt, en):
    pt_ids = tokenizers.pt.tokenize(pt)[:, :max_tokens]
    en_ids = tokenizers.en.tokenize(en)[:, :max_tokens + 1]
    return pt_ids, en_ids

  def as_tensors(pt_ids, en_ids):
    # unbatch() types rows as ragged rank 0, which padded_batch rejects; map() makes them dense.
    return tf.identity(pt_ids), tf.identity(en_ids)

  return (pairs_dataset
          .batch(_TOKENIZE_BATCH)
          .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
          .unbatch()
          .map(as_tensors))


def _split_target(pt_ids, en_ids):
  return (pt_ids, en_ids[:-1]), en_ids[1:]


def _bucketed_length(inputs, labels):
  # The padded length of a batch's three tensors: source, decoder inputs, labels.
  source, _ = inputs
  return tf.maximum(tf.shape(source)[0], tf.shape(labels)[0])


def make_batches(pairs_dataset: tf.data.Dataset, tokenizers, *,
                 max_tokens: int = 128, **batching) -> tf.data.Dataset:
  """The tutorial's ``make_batches``: :func:`tokenize_pairs`, cached, then
  :func:`batch_tokenized` (which documents ``batching``). Another epoch
  reshuffles without tokenizing again."""
  tokenized = tokenize_pairs(pairs_dataset, tokenizers, max_tokens).cache()
  return batch_tokenized(tokenized, max_tokens=max_tokens, **batching)


def batch_tokenized(tokenized: tf.data.Dataset, *, max_tokens: int = 128,
                    batch_size: int = 64, tokens_per_batch: int = 0,
                    bucketing: bool = False, bucket_lengths: Sequence[int] = (),
                    shuffle: bool = True,
                    shuffle_buffer: int = 20000, seed: int = 0,
                    drop_remainder: bool = False,
                    static_shapes: bool = False) -> tf.data.Dataset:
  """Shuffled, padded batches of :func:`tokenize_pairs`' pairs: build ``tokenized``
  once with ``.cache()`` and call this for each epoch with its own seed, so that
  the pipelines share the cache.

  ``max_tokens`` to ``bucket_lengths`` and ``shuffle_buffer`` are ``config.data``'s
  fields (:func:`transformer.config.default_config`); a token budget or explicit
  buckets imply bucketing. The same ``seed`` gives the same batches in the same
  order (reshuffled each iteration); ``drop_remainder`` drops each bucket's
  incomplete last batch; ``static_shapes`` pads each batch to its bucket's
  longest length (``max_tokens`` without buckets), so that XLA meets few shapes.

  Returns ``((source_ids, target_input_ids), label_ids)`` batches, int64
  ``[batch, length <= max_tokens]``, 0-padded (one length with ``static_shapes``).
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
                  else bucket_boundaries(max_tokens, **GROWING_BUCKETS))
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
  """``dataset`` with tf.data's autotuner off: its thread wakes at doubling
  intervals (10 ms, 20 ms, ...) and dropping an iterator waits for the next
  wake-up, seconds over a loop of short-lived iterators (epochs, validations).
  Cached, padded batches need no tuning."""
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


def _batching(data_config) -> dict:
  """:func:`batch_tokenized`'s arguments that ``config.data`` sets."""
  return dict(max_tokens=data_config.max_tokens, batch_size=data_config.batch_size,
              tokens_per_batch=data_config.tokens_per_batch, bucketing=data_config.bucketing,
              # A run's config.json from before the field has none: no buckets.
              bucket_lengths=tuple(data_config.get("bucket_lengths", ())))


def training_batches(tokenized: tf.data.Dataset, config, epoch: int, *,
                     drop_remainder: bool = False,
                     static_shapes: bool = False) -> tf.data.Dataset:
  """Epoch ``epoch``'s shuffled batches of ``tokenized``, as ``config`` sets them."""
  return batch_tokenized(
      tokenized, **_batching(config.data), shuffle_buffer=config.data.shuffle_buffer,
      seed=epoch_seed(config.training.seed, epoch), drop_remainder=drop_remainder,
      static_shapes=static_shapes)


def evaluation_batches(pairs: Sequence, tokenizers, data_config, *,
                       drop_remainder: bool = False,
                       static_shapes: bool = False) -> tf.data.Dataset:
  """Batches of the (pt, en) string ``pairs`` in order, as ``data_config`` sets them."""
  return make_batches(ted.pairs_to_dataset(list(pairs)), tokenizers, **_batching(data_config),
                      shuffle=False, drop_remainder=drop_remainder, static_shapes=static_shapes)
