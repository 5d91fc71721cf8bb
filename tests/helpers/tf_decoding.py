"""Test oracle: the TensorFlow-only decoding this project shipped before
``transformer/inference/decoding.py`` was written in ``keras.ops``.

Kept as it was (greedy and beam search on ``tf.while_loop``, the key/value
cache, the length penalty, early termination; only the parts the tests do not
call dropped and the docstrings shortened) and used ONLY by tests, which
hold the backend-neutral decoder to its tokens and scores on the same weights
(``tests/unit/test_decoding.py``, ``tests/backends/test_same_decoding.py``)
and by ``lab/bench/decoding_speed.py``, which times both. Nothing in
``transformer/`` imports it. Its tests were the decoder's own before the port:
held against an uncached reference and another framework's Transformer, its
greedy and beam outputs matched token for token.
"""

import tensorflow as tf

from transformer.data.tokenizers import END_ID, PAD_ID, START_ID


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
  """Greedy decoding as :func:`transformer.inference.decoding.greedy_decode`
  does it (same arguments and result), in TensorFlow ops."""
  source_ids = tf.convert_to_tensor(source_ids)
  max_lengths = tf.cast(max_lengths, tf.int32)
  context, source_mask = model.encode(source_ids, training=False)
  cache = model.initial_cache(context, _longest(max_lengths))

  def next_logits(i, ids, cache):
    logits, cache, _ = model.decode_step(ids[:, i], i, cache, source_mask)
    return logits, cache

  return _greedy_loop(next_logits, tf.shape(source_ids)[0], max_lengths, end_id, cache)


def length_penalty(length, alpha: float):
  """lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, used in §6.1). float32."""
  return ((5.0 + tf.cast(length, tf.float32)) / 6.0) ** alpha


def beam_search(model, source_ids, max_lengths, beam_size: int = 4, alpha: float = 0.6,
                end_id: int = END_ID):
  """Beam search as :func:`transformer.inference.decoding.beam_search` does
  it (same arguments, same ``(tokens, scores)``), in TensorFlow ops."""
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
