"""Greedy and beam-search decoding with a key/value cache (tutorial: "Run inference"; §6.1).

The tutorial's ``Translator`` re-runs the whole model on the growing output at
every step, so a sentence of T tokens costs O(T²) decoder positions. Here each
step feeds one token through :meth:`Transformer.decode_step`, which keeps the
keys and values of earlier positions in a cache of fixed size, and whole
batches of sentences of mixed lengths decode together. Beam search also asks
the model to reorder the cache rows when hypotheses change parents
(:meth:`Transformer.reorder_cache`).

Written once in backend-neutral ``keras.ops``: every loop is a
``keras.ops.while_loop`` whose variables keep one shape (the cache and output
buffers are sized for the longest allowed output up front). Under TensorFlow
they run eagerly or in ``tf.function(..., autograph=False)`` (the exported
translator); under JAX :mod:`transformer.inference.jax_decoding` compiles
:func:`greedy_steps` and :func:`beam_steps`, whose whole buffers
:func:`greedy_decode` and :func:`beam_search` cut to the steps taken.

Beam search follows §6.1 (from Wu et al. 2016, GNMT): beam size 4, length
penalty lp(Y) = ((5 + |Y|) / 6)^α with α = 0.6, outputs of at most input
length + 50 tokens, and early termination. See ``config.decoding``.

Token ids follow the tutorial's tokenizers: [PAD] = 0, [START] = 2, [END] = 3.
Outputs never contain [START]; an ended sentence's [END] is followed by
padding. ``tests/helpers/tf_decoding.py`` keeps a TensorFlow-only oracle.
"""

from keras import ops
import numpy as np

from transformer.data.reserved_tokens import END_ID, PAD_ID, START_ID

METHODS = ("greedy", "beam")
# The score of "no hypothesis": below every real log-probability.
_LOWEST = float(np.finfo(np.float32).min)


def _as_int32(*tensors):
  return tuple(ops.cast(ops.convert_to_tensor(x), "int32") for x in tensors)


def _source_lengths(source_ids):
  return ops.sum(ops.cast(ops.not_equal(source_ids, PAD_ID), "int32"), axis=1)


def trim_source(source_ids, max_position: int, end_id: int = END_ID):
  """Cuts source ids ``(batch, src_len)`` to the positional table's
  ``max_position`` rows; a cut sentence keeps [START] and ends with [END], as
  sentences did in training."""
  source_ids = ops.convert_to_tensor(source_ids)
  was_cut = (_source_lengths(source_ids) > max_position)[:, None]
  trimmed = source_ids[:, :max_position]
  is_last = ops.equal(ops.arange(ops.shape(trimmed)[1]), max_position - 1)[None]
  return ops.where(ops.logical_and(is_last, was_cut), ops.cast(end_id, trimmed.dtype), trimmed)


def output_length_limits(source_ids, extra_length: int, max_position: int):
  """Most tokens each sentence may produce: its input length + ``extra_length``
  (§6.1), but no more than the positional table allows. ``(batch,)`` int32."""
  return ops.minimum(_source_lengths(ops.convert_to_tensor(source_ids)) + extra_length,
                     max_position)


def _longest(max_lengths):
  """The output buffers' length: the longest of ``max_lengths`` (0 for no rows)."""
  return ops.max(ops.concatenate([ops.cast(max_lengths, "int32"), ops.zeros((1,), "int32")], 0))


def _start_buffer(batch_shape, length):
  """Output buffer ``(*batch_shape, length + 1)`` int32: [START] then padding."""
  start = ops.full((*batch_shape, 1), START_ID, "int32")
  return ops.concatenate([start, ops.zeros((*batch_shape, length), "int32")], -1)


def _write(buffer, position, tokens):
  """``buffer[..., position] = tokens`` without changing the buffer's shape."""
  here = ops.equal(ops.arange(ops.shape(buffer)[-1]), position)
  return ops.where(here, tokens[..., None], buffer)


def _flat_rows(indices, n):
  """Rows ``(batch * k,)`` of a ``(batch * n, ...)`` tensor for ``indices``
  ``(batch, k)`` into each sentence's ``n`` rows."""
  return ops.reshape(indices + ops.arange(ops.shape(indices)[0])[:, None] * n, (-1,))


def _gather_beams(x, indices):
  """``x[b, indices[b, k]]`` for ``x`` ``(batch, n, ...)`` and ``indices``
  ``(batch, k)`` → ``(batch, k, ...)``: one gather over the flattened rows."""
  shape = ops.shape(x)
  flat = ops.reshape(x, (-1, *shape[2:]))
  picked = ops.take(flat, _flat_rows(indices, shape[1]), axis=0)
  return ops.reshape(picked, (shape[0], ops.shape(indices)[1], *shape[2:]))


def _best_token(logits):
  """The argmax of ``logits`` ``(batch, vocab)``: ``(batch,)`` int32, the first on ties.
  A top-1, not ``ops.argmax``: Keras' argmax makes four more passes over the
  logits (its fix for -0.0 on flush-to-zero devices) at every step."""
  return ops.top_k(logits, 1)[1][:, 0]


def _greedy_loop(next_logits, max_lengths, length, end_id, state):
  """Shared loop of both greedy decoders: ``next_logits(i, ids, state)`` returns
  the logits ``(batch, vocab)`` of the token after position ``i`` and the new
  state. Returns the buffer ``(batch, length + 1)`` ([START] first) and the steps taken."""

  def body(i, ids, done, state):
    logits, state = next_logits(i, ids, state)
    tokens = ops.where(done, PAD_ID, _best_token(logits))
    ids = _write(ids, i + 1, tokens)
    done = done | ops.equal(tokens, end_id) | (i + 1 >= max_lengths)
    return i + 1, ids, done, state

  def not_finished(i, ids, done, state):
    del ids, state
    return ops.logical_and(i < length, ops.logical_not(ops.all(done)))

  ids = _start_buffer((ops.shape(max_lengths)[0],), length)
  i, ids, _, _ = ops.while_loop(not_finished, body,
                                (ops.convert_to_tensor(0, "int32"), ids, max_lengths <= 0,
                                 state))
  return ids, i


def greedy_steps(model, source_ids, max_lengths, length, end_id: int = END_ID):
  """Greedy decoding with the key/value cache, on buffers of ``length`` tokens.

  Args:
    model: a :class:`Transformer` (or anything with its ``encode``,
      ``initial_cache`` and ``decode_step``).
    source_ids: ``(batch, src_len)`` int32, padded with 0, at most ``max_position`` long.
    max_lengths: ``(batch,)`` int32, the most tokens each row may produce
      (from :func:`output_length_limits`).
    length: at least the largest of ``max_lengths``; a Python int under ``jax.jit``.
  Returns:
    ``(buffer, steps)``: ``(batch, length + 1)`` int32 ([START], the chosen
    tokens, [END], then padding) and the number of tokens decoded.
  """
  context, source_mask = model.encode(source_ids, training=False)
  cache = model.initial_cache(context, length)

  def next_logits(i, ids, cache):
    logits, cache, _ = model.decode_step(ids[:, i], i, cache, source_mask)
    return logits, cache

  return _greedy_loop(next_logits, max_lengths, length, end_id, cache)


def greedy_decode(model, source_ids, max_lengths, end_id: int = END_ID):
  """Greedy decoding with the key/value cache (:func:`greedy_steps`): ``(batch,
  out_len)`` int32 tokens, [END] included, then padding, ``out_len`` the longest
  output. Each row is what decoding it alone gives."""
  source_ids, max_lengths = _as_int32(source_ids, max_lengths)
  ids, steps = greedy_steps(model, source_ids, max_lengths, _longest(max_lengths), end_id)
  return ids[:, 1:steps + 1]


def greedy_decode_uncached(model, source_ids, max_lengths, end_id: int = END_ID):
  """Greedy decoding as the tutorial does it: every step runs the full model
  (encoder included) on the whole output so far and keeps the last position.
  The cached decoder's reference in tests and benchmarks; as :func:`greedy_decode`."""
  source_ids, max_lengths = _as_int32(source_ids, max_lengths)

  def next_logits(i, ids, state):
    logits = model((source_ids, ids[:, :i + 1]), training=False)
    return logits[:, -1], state

  ids, steps = _greedy_loop(next_logits, max_lengths, _longest(max_lengths), end_id,
                            ops.convert_to_tensor(0, "int32"))
  return ids[:, 1:steps + 1]


def length_penalty(length, alpha: float):
  """lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, used in §6.1). float32."""
  return ((5.0 + ops.cast(length, "float32")) / 6.0) ** alpha


def beam_steps(model, source_ids, max_lengths, length, beam_size: int = 4,
               alpha: float = 0.6, end_id: int = END_ID):
  """Beam search with length penalty and early termination (§6.1), on buffers
  of ``length`` tokens.

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

  Args: as :func:`greedy_steps`, plus ``beam_size`` and ``alpha``.
  Returns:
    ``(buffer, scores, steps)``: the best hypothesis per sentence
    ``(batch, length + 1)`` int32 ([START], tokens, [END], padding), its score
    ``(batch,)`` float32, and the number of steps taken.
  """
  batch = ops.shape(source_ids)[0]
  context, source_mask = model.encode(source_ids, training=False)
  # Every hypothesis is a row of the model's batch: (batch * beam, ...).
  context = ops.repeat(context, beam_size, axis=0)
  source_mask = ops.repeat(source_mask, beam_size, axis=0)
  cache = model.initial_cache(context, length)
  max_penalty = length_penalty(max_lengths, alpha)

  def body(i, alive_ids, alive_log_probs, finished_ids, finished_scores, done, cache):
    rows = ops.reshape(alive_ids[:, :, i], (-1,))
    logits, new_cache, _ = model.decode_step(rows, i, cache, source_mask)
    log_probs = ops.reshape(ops.log_softmax(logits), (batch, beam_size, -1))
    vocab = ops.shape(log_probs)[2]
    candidates = ops.reshape(alive_log_probs[:, :, None] + log_probs, (batch, -1))
    top_log_probs, top_index = ops.top_k(candidates, 2 * beam_size)
    parents, tokens = top_index // vocab, top_index % vocab
    top_ids = _write(_gather_beams(alive_ids, parents), i + 1, tokens)

    at_limit = (i + 1 >= max_lengths)[:, None]
    ending = ops.equal(tokens, end_id) | at_limit
    in_beam = ops.arange(2 * beam_size) < beam_size
    ends = ending & in_beam

    next_log_probs, keep = ops.top_k(ops.where(ending, _LOWEST, top_log_probs), beam_size)
    next_alive = _gather_beams(top_ids, keep)
    # Each surviving hypothesis takes over its parent's cache rows.
    new_rows = _flat_rows(_gather_beams(parents[..., None], keep)[..., 0], beam_size)
    new_cache = model.reorder_cache(new_cache, lambda x: ops.take(x, new_rows, axis=0))

    scores = ops.where(ends, top_log_probs / length_penalty(i + 1, alpha), _LOWEST)
    next_scores, best = ops.top_k(ops.concatenate([finished_scores, scores], 1), beam_size)
    next_finished = _gather_beams(ops.concatenate([finished_ids, top_ids], 1), best)

    frozen = done[:, None]
    alive_ids = ops.where(frozen[..., None], alive_ids, next_alive)
    alive_log_probs = ops.where(frozen, alive_log_probs, next_log_probs)
    finished_ids = ops.where(frozen[..., None], finished_ids, next_finished)
    finished_scores = ops.where(frozen, finished_scores, next_scores)
    cannot_improve = finished_scores[:, 0] >= alive_log_probs[:, 0] / max_penalty
    done = done | at_limit[:, 0] | cannot_improve
    return (i + 1, alive_ids, alive_log_probs, finished_ids, finished_scores, done,
            new_cache)

  def not_finished(i, *state):
    return ops.logical_and(i < length, ops.logical_not(ops.all(state[4])))

  alive_ids = _start_buffer((batch, beam_size), length)
  # Only the first of the identical initial hypotheses is live.
  first_only = ops.where(ops.arange(beam_size) == 0, 0.0, _LOWEST)
  alive_log_probs = ops.tile(first_only[None], (batch, 1))
  finished_scores = ops.full((batch, beam_size), _LOWEST, "float32")
  i, _, _, finished_ids, finished_scores, _, _ = ops.while_loop(
      not_finished, body,
      (ops.convert_to_tensor(0, "int32"), alive_ids, alive_log_probs,
       ops.zeros_like(alive_ids), finished_scores, max_lengths <= 0, cache))
  return finished_ids[:, 0], finished_scores[:, 0], i


def beam_search(model, source_ids, max_lengths, beam_size: int = 4, alpha: float = 0.6,
                end_id: int = END_ID):
  """Beam search (:func:`beam_steps`) on buffers as long as the longest limit:
  ``(tokens, scores)``, the best hypothesis per sentence ``(batch, out_len)``
  int32 ([END] then padding, no [START]) and its score ``(batch,)`` float32."""
  source_ids, max_lengths = _as_int32(source_ids, max_lengths)
  ids, scores, steps = beam_steps(model, source_ids, max_lengths, _longest(max_lengths),
                                  beam_size, alpha, end_id)
  return ids[:, 1:steps + 1], scores


def decode(model, source_ids, method: str, *, beam_size: int = 4, length_penalty: float = 0.6,
           extra_length: int = 50):
  """Translates token ids with ``config.decoding``'s settings
  (``decode(model, ids, method, **config.decoding.to_dict())``): trims the
  source to the model's ``max_position``, limits each output to its input
  length + ``extra_length``, and runs ``method``: "greedy", or "beam" with
  ``beam_size`` and α = ``length_penalty``. ``source_ids``: ``(batch, src_len)``
  int, 0-padded, any length; returns ``(batch, out_len)`` int32 output tokens
  ([END] then padding, no [START]).
  """
  if method not in METHODS:
    raise ValueError(f"unknown decoding method {method!r}; choose one of {METHODS}")
  source_ids = ops.cast(trim_source(source_ids, model.max_position), "int32")
  max_lengths = output_length_limits(source_ids, extra_length, model.max_position)
  if method == "greedy":
    return greedy_decode(model, source_ids, max_lengths)
  tokens, _ = beam_search(model, source_ids, max_lengths, beam_size, length_penalty)
  return tokens
