"""Greedy and beam-search decoding with a key/value cache (tutorial: "Run inference"; §6.1).

The tutorial's ``Translator`` re-runs the whole model on the growing output at
every step, so a sentence of T tokens costs O(T²) decoder positions. Here each
step feeds one token through :meth:`Transformer.decode_step`, which keeps the
keys and values of earlier positions in a cache of fixed size, and whole
batches of sentences of mixed lengths decode together. Beam search also asks
the model to reorder the cache rows when hypotheses change parents
(:meth:`Transformer.reorder_cache`).

Every loop is a ``tf.while_loop`` whose variables keep one shape from step to
step (the cache and the output buffers are allocated for the longest allowed
output up front), so the functions work eagerly, inside ``tf.function`` and
with dynamic batch and source lengths. Wrap them with
``tf.function(..., autograph=False)``: there is no Python control flow to
convert (``tests/unit/test_decoding.py`` and ``transformer/inference/export.py`` trace them so).

Beam search follows §6.1 (from Wu et al. 2016, GNMT): beam size 4, length
penalty lp(Y) = ((5 + |Y|) / 6)^α with α = 0.6, outputs of at most input
length + 50 tokens, and early termination. See ``config.decoding``.

Token ids follow the tutorial's tokenizers: [PAD] = 0, [START] = 2, [END] = 3.
Outputs never contain [START]; a sentence that ends has its [END] followed by
padding 0.
"""

import tensorflow as tf

from transformer.data.tokenizers import END_ID, PAD_ID, START_ID

METHODS = ("greedy", "beam")


def trim_source(source_ids, max_position: int, end_id: int = END_ID):
  """Cuts source ids ``(batch, src_len)`` to at most ``max_position`` tokens.

  The positional-encoding table has ``max_position`` rows, so no longer input
  can be encoded. A cut sentence keeps [START] and ends with [END], as the
  model saw sentences in training.
  """
  source_ids = tf.convert_to_tensor(source_ids)
  lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)
  trimmed = source_ids[:, :max_position]
  is_last = tf.equal(tf.range(tf.shape(trimmed)[1]), max_position - 1)[tf.newaxis]
  was_cut = (lengths > max_position)[:, tf.newaxis]
  return tf.where(is_last & was_cut, tf.cast(end_id, trimmed.dtype), trimmed)


def output_length_limits(source_ids, extra_length: int, max_position: int):
  """Most tokens each sentence may produce: its input length + ``extra_length``
  (§6.1), but no more than the positional table allows. ``(batch,)`` int32."""
  lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)
  return tf.minimum(lengths + extra_length, max_position)


def _start_buffer(batch_shape, length):
  """Output buffer ``(*batch_shape, length + 1)``: [START] then padding."""
  start = tf.fill(tf.concat([batch_shape, [1]], 0), START_ID)
  return tf.concat([start, tf.zeros(tf.concat([batch_shape, [length]], 0), tf.int32)], -1)


def _write(buffer, position, tokens):
  """``buffer[..., position] = tokens`` without changing the buffer's shape."""
  here = tf.equal(tf.range(tf.shape(buffer)[-1]), position)
  return tf.where(here, tokens[..., tf.newaxis], buffer)


def _longest(max_lengths):
  # Appending 0 keeps an empty batch well-defined (reduce_max of nothing is INT_MIN).
  return tf.reduce_max(tf.concat([max_lengths, [0]], 0))


def _greedy_loop(next_logits, batch, max_lengths, end_id, state):
  """Shared loop of both greedy decoders: ``next_logits(i, ids, state)`` returns
  the logits ``(batch, vocab)`` of the token after position ``i`` and the new state."""
  length = _longest(max_lengths)

  def body(i, ids, done, state):
    logits, state = next_logits(i, ids, state)
    tokens = tf.argmax(logits, axis=-1, output_type=tf.int32)
    tokens = tf.where(done, PAD_ID, tokens)
    ids = _write(ids, i + 1, tokens)
    done = done | tf.equal(tokens, end_id) | (i + 1 >= max_lengths)
    return i + 1, ids, done, state

  def not_finished(i, ids, done, state):
    del ids, state
    return (i < length) & tf.logical_not(tf.reduce_all(done))

  ids = _start_buffer([batch], length)
  i, ids, _, _ = tf.while_loop(not_finished, body,
                               (tf.constant(0), ids, max_lengths <= 0, state))
  return ids[:, 1:i + 1]


def greedy_decode(model, source_ids, max_lengths, end_id: int = END_ID):
  """Greedy decoding with the key/value cache.

  Args:
    model: a :class:`Transformer` (or anything with its ``encode``,
      ``initial_cache`` and ``decode_step``).
    source_ids: ``(batch, src_len)`` int, padded with 0, at most ``max_position`` long.
    max_lengths: ``(batch,)`` int32, the most tokens each row may produce
      (from :func:`output_length_limits`).
  Returns:
    ``(batch, out_len)`` int32: the chosen tokens, [END] included, then padding.
    ``out_len`` is the longest output. Each row is what decoding it alone gives.
  """
  source_ids = tf.convert_to_tensor(source_ids)
  max_lengths = tf.cast(max_lengths, tf.int32)
  context, source_mask = model.encode(source_ids, training=False)
  cache = model.initial_cache(context, _longest(max_lengths))

  def next_logits(i, ids, cache):
    logits, cache, _ = model.decode_step(ids[:, i], i, cache, source_mask)
    return logits, cache

  return _greedy_loop(next_logits, tf.shape(source_ids)[0], max_lengths, end_id, cache)


def greedy_decode_uncached(model, source_ids, max_lengths, end_id: int = END_ID):
  """Greedy decoding as the tutorial does it: every step runs the full model
  (encoder included) on the whole output so far and keeps the last position.

  The reference the cached decoder is tested and benchmarked against; same
  arguments and result as :func:`greedy_decode`.
  """
  source_ids = tf.convert_to_tensor(source_ids)
  max_lengths = tf.cast(max_lengths, tf.int32)

  def next_logits(i, ids, state):
    logits = model((source_ids, ids[:, :i + 1]), training=False)
    return logits[:, -1], state

  return _greedy_loop(next_logits, tf.shape(source_ids)[0], max_lengths, end_id,
                      tf.constant(0))


def length_penalty(length, alpha: float):
  """lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, used in §6.1). float32."""
  return ((5.0 + tf.cast(length, tf.float32)) / 6.0) ** alpha


def beam_search(model, source_ids, max_lengths, beam_size: int = 4, alpha: float = 0.6,
                end_id: int = END_ID):
  """Beam search with length penalty and early termination (§6.1).

  Each step extends the ``beam_size`` live hypotheses of every sentence by every
  token and keeps the best 2·beam_size candidates. Candidates among the best
  ``beam_size`` that end with [END] (or reach the row's length limit) join the
  finished list, scored log P(Y) / lp(Y); the best ``beam_size`` that do not end
  stay live. A sentence stops when no live hypothesis can beat its best finished
  one (log-probabilities only fall, and lp only grows up to the length limit,
  so log P / lp(limit) bounds every live extension) or at its length limit.
  Finished sentences are frozen, so each row's result does not depend on the
  rest of the batch.

  With α = 0 and beam_size 1 this is exactly greedy decoding. With α > 0 a
  beam of 1 may go on after greedy would stop at [END], since length
  normalisation can favour a longer output.

  Args: as :func:`greedy_decode`, plus ``beam_size`` and ``alpha``.
  Returns:
    ``(tokens, scores)``: the best hypothesis per sentence ``(batch, out_len)``
    int32 ([END] then padding, no [START]) and its score ``(batch,)`` float32.
  """
  source_ids = tf.convert_to_tensor(source_ids)
  max_lengths = tf.cast(max_lengths, tf.int32)
  batch = tf.shape(source_ids)[0]
  length = _longest(max_lengths)
  context, source_mask = model.encode(source_ids, training=False)
  # Every hypothesis is a row of the model's batch: (batch * beam, ...).
  context = tf.repeat(context, beam_size, axis=0)
  source_mask = tf.repeat(source_mask, beam_size, axis=0)
  cache = model.initial_cache(context, length)
  max_penalty = length_penalty(max_lengths, alpha)
  lowest = tf.float32.min

  def by_beam(x):
    return tf.reshape(x, tf.concat([[batch, beam_size], tf.shape(x)[1:]], 0))

  def by_row(x):
    return tf.reshape(x, tf.concat([[batch * beam_size], tf.shape(x)[2:]], 0))

  def body(i, alive_ids, alive_log_probs, finished_ids, finished_scores, done, cache):
    logits, new_cache, _ = model.decode_step(by_row(alive_ids[:, :, i]), i, cache,
                                             source_mask)
    log_probs = by_beam(tf.nn.log_softmax(logits))  # (batch, beam, vocab)
    vocab = tf.shape(log_probs)[2]
    candidates = tf.reshape(alive_log_probs[:, :, tf.newaxis] + log_probs, [batch, -1])
    top_log_probs, top_index = tf.math.top_k(candidates, 2 * beam_size)
    parents, tokens = top_index // vocab, top_index % vocab
    top_ids = _write(tf.gather(alive_ids, parents, batch_dims=1), i + 1, tokens)

    at_limit = (i + 1 >= max_lengths)[:, tf.newaxis]
    in_beam = tf.range(2 * beam_size) < beam_size
    ends = (tf.equal(tokens, end_id) | at_limit) & in_beam
    keeps_going = tf.logical_not(tf.equal(tokens, end_id) | at_limit)

    next_log_probs, keep = tf.math.top_k(tf.where(keeps_going, top_log_probs, lowest),
                                         beam_size)
    next_alive = tf.gather(top_ids, keep, batch_dims=1)
    # Each surviving hypothesis takes over its parent's cache rows.
    new_parents = tf.gather(parents, keep, batch_dims=1)
    new_cache = model.reorder_cache(
        new_cache,
        lambda x: tf.reshape(tf.gather(by_beam(x), new_parents, batch_dims=1), tf.shape(x)))

    scores = tf.where(ends, top_log_probs / length_penalty(i + 1, alpha), lowest)
    next_scores, best = tf.math.top_k(tf.concat([finished_scores, scores], 1), beam_size)
    next_finished = tf.gather(tf.concat([finished_ids, top_ids], 1), best, batch_dims=1)

    frozen = done[:, tf.newaxis]
    alive_ids = tf.where(frozen[..., tf.newaxis], alive_ids, next_alive)
    alive_log_probs = tf.where(frozen, alive_log_probs, next_log_probs)
    finished_ids = tf.where(frozen[..., tf.newaxis], finished_ids, next_finished)
    finished_scores = tf.where(frozen, finished_scores, next_scores)
    cannot_improve = finished_scores[:, 0] >= alive_log_probs[:, 0] / max_penalty
    done = done | at_limit[:, 0] | cannot_improve
    return (i + 1, alive_ids, alive_log_probs, finished_ids, finished_scores, done,
            new_cache)

  def not_finished(i, *state):
    return (i < length) & tf.logical_not(tf.reduce_all(state[4]))

  alive_ids = _start_buffer([batch, beam_size], length)
  # Only the first of the identical initial hypotheses is live.
  first_only = tf.where(tf.range(beam_size) == 0, 0.0, lowest)
  alive_log_probs = tf.tile(first_only[tf.newaxis], [batch, 1])
  finished_scores = tf.fill([batch, beam_size], lowest)
  i, _, _, finished_ids, finished_scores, _, _ = tf.while_loop(
      not_finished, body,
      (tf.constant(0), alive_ids, alive_log_probs, tf.zeros_like(alive_ids),
       finished_scores, max_lengths <= 0, cache))
  return finished_ids[:, 0, 1:i + 1], finished_scores[:, 0]


def decode(model, source_ids, method: str, *, beam_size: int = 4, length_penalty: float = 0.6,
           extra_length: int = 50):
  """Translates token ids with the settings of ``config.decoding``
  (``decode(model, ids, method, **config.decoding.to_dict())``).

  Trims the source to the model's ``max_position``, limits each output to its
  input length + ``extra_length``, and runs ``method``: "greedy", or "beam"
  with ``beam_size`` and α = ``length_penalty``.

  Args:
    source_ids: ``(batch, src_len)`` int, padded with 0; any length.
  Returns:
    ``(batch, out_len)`` int32 output tokens ([END] then padding, no [START]).
  """
  if method not in METHODS:
    raise ValueError(f"unknown decoding method {method!r}; choose one of {METHODS}")
  max_position = model.max_position
  source_ids = tf.cast(trim_source(source_ids, max_position), tf.int32)
  max_lengths = output_length_limits(source_ids, extra_length, max_position)
  if method == "greedy":
    return greedy_decode(model, source_ids, max_lengths)
  tokens, _ = beam_search(model, source_ids, max_lengths, beam_size, length_penalty)
  return tokens
