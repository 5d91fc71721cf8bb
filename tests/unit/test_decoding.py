"""Greedy and beam-search decoding (transformer/inference/decoding.py)."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import tf_decoding
from transformer.inference import decoding
from transformer.model.attention import padding_mask
from transformer.model.losses import masked_loss
from transformer.model.optimization import make_optimizer

END = decoding.END_ID
VOCAB = 24  # Reserved ids 0-3, then 20 "words".
MAX_POSITION = 64


@pytest.fixture(scope="module")
def decoding_config(tiny_config):
  """``decoding_config(**model_fields)``: configs/tiny.py without dropout, its
  positions as long as :data:`MAX_POSITION`."""
  return lambda **model_fields: tiny_config(dropout_rate=0.0, max_position=MAX_POSITION,
                                            **model_fields)


def random_sources(rng, batch, min_words=2, max_words=7):
  """[START] words [END] with 0 padding, ``(batch, max_words + 2)`` int32."""
  ids = np.zeros((batch, max_words + 2), np.int32)
  for row in range(batch):
    n = rng.integers(min_words, max_words + 1)
    ids[row, :n + 2] = [decoding.START_ID, *rng.integers(4, VOCAB, n), END]
  return ids


def reversed_targets(sources):
  """The task the small model learns: the words in reverse order."""
  targets = np.zeros_like(sources)
  for row, ids in enumerate(sources):
    words = ids[1:np.flatnonzero(ids == END)[0]]
    targets[row, :len(words) + 2] = [decoding.START_ID, *words[::-1], END]
  return targets


def strip_padding(row):
  row = np.asarray(row)
  return row[:len(np.trim_zeros(row, "b"))].tolist()


@pytest.fixture(scope="module")
def untrained_model(decoding_config, make_model):
  keras.utils.set_random_seed(1)
  return make_model(decoding_config(), (VOCAB, VOCAB))


@pytest.fixture(scope="module")
def trained_model(decoding_config, make_model):
  """Learns to reverse 2-7 word sequences in a few hundred steps (~10 s)."""
  keras.utils.set_random_seed(0)
  config = decoding_config()
  model = make_model(config, (VOCAB, VOCAB))
  optimizer = make_optimizer(config)
  rng = np.random.default_rng(0)

  @tf.function
  def train_step(sources, targets):
    with tf.GradientTape() as tape:
      logits = model((sources, targets[:, :-1]), training=True)
      loss = masked_loss(targets[:, 1:], logits)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    return loss

  for _ in range(300):
    sources = random_sources(rng, 64)
    loss = train_step(sources, reversed_targets(sources))
  assert float(loss) < 0.3, "the small model did not learn the task"
  return model


@pytest.fixture(scope="module")
def batch():
  sources = random_sources(np.random.default_rng(42), 12)
  return sources, decoding.output_length_limits(sources, 5, MAX_POSITION)


def test_trim_source_cuts_to_max_position_and_keeps_end():
  long_row = [decoding.START_ID] + [7] * 9_998 + [END]
  short_row = [decoding.START_ID, 5, END] + [0] * 9_997
  trimmed = decoding.trim_source(tf.constant([long_row, short_row]), 64).numpy()
  assert trimmed.shape == (2, 64)
  assert trimmed[0, 0] == decoding.START_ID and trimmed[0, -1] == END
  assert (trimmed[0, 1:-1] == 7).all()
  assert strip_padding(trimmed[1]) == [decoding.START_ID, 5, END]


def test_output_length_limits_are_input_plus_extra_capped():
  sources = tf.constant([[2, 5, 3, 0], [2, 5, 6, 3]])
  assert decoding.output_length_limits(sources, 50, 2048).numpy().tolist() == [53, 54]
  assert decoding.output_length_limits(sources, 50, 40).numpy().tolist() == [40, 40]


SPEC = (tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32))


def compiled(model):
  """The decoders as graph functions with dynamic batch and lengths (one trace each).

  autograph is off: the decoders use keras.ops.while_loop (tf.while_loop here) directly.
  """
  def graph(fn):
    return tf.function(fn, input_signature=SPEC, autograph=False)
  return {
      "greedy": graph(lambda s, l: decoding.greedy_decode(model, s, l)),
      "uncached": graph(lambda s, l: decoding.greedy_decode_uncached(model, s, l)),
      "beam": graph(lambda s, l: decoding.beam_search(model, s, l)[0]),
      "beam_1_alpha_0": graph(lambda s, l: decoding.beam_search(model, s, l, 1, 0.0)[0]),
  }


@pytest.fixture(scope="module")
def untrained(untrained_model):
  return compiled(untrained_model)


@pytest.fixture(scope="module")
def trained(trained_model):
  return compiled(trained_model)


def assert_outputs_vary(tokens, limits):
  """Outputs a wrong cache would change: each sentence's its own, and some end
  early. (An untrained model's are mostly one token repeated to the limit.)"""
  rows = [tuple(strip_padding(row)) for row in np.asarray(tokens)]
  assert len(set(rows)) == len(rows), rows
  assert any(row[-1] == END and len(row) < limit for row, limit in zip(rows, np.asarray(limits)))


@pytest.mark.slow
def test_eager_cached_greedy_equals_uncached(trained_model, batch):
  sources, limits = batch[0][:3], batch[1][:3]
  cached = decoding.greedy_decode(trained_model, sources, limits).numpy()
  uncached = decoding.greedy_decode_uncached(trained_model, sources, limits).numpy()
  assert_outputs_vary(uncached, limits)
  np.testing.assert_array_equal(cached, uncached)


@pytest.mark.slow
def test_cached_greedy_equals_uncached(trained, batch):
  uncached = trained["uncached"](*batch)
  assert_outputs_vary(uncached, batch[1])
  np.testing.assert_array_equal(trained["greedy"](*batch), uncached)


def test_trained_model_reverses_and_stops_at_end(trained, batch):
  sources, _ = batch
  for method in ("greedy", "beam"):
    outputs = [strip_padding(row) for row in trained[method](*batch).numpy()]
    expected = [strip_padding(row[1:]) for row in reversed_targets(sources)]
    correct = sum(output == want for output, want in zip(outputs, expected))
    assert correct >= 10, (method, outputs, expected)
    for output in outputs:
      # Nothing but padding after the first [END].
      assert END not in output[:-1]


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_batch_gives_what_each_sentence_gives_alone(untrained, batch, method):
  sources, limits = batch
  together = untrained[method](sources, limits).numpy()
  for row in range(len(sources)):
    length = int(np.count_nonzero(sources[row]))
    alone = untrained[method](sources[row:row + 1, :length], limits[row:row + 1]).numpy()[0]
    assert strip_padding(together[row]) == strip_padding(alone)
    assert len(strip_padding(alone)) <= int(limits[row])


def test_eager_beam_search_matches_graph(untrained_model, untrained, batch):
  sources, limits = batch[0][:2], batch[1][:2]
  np.testing.assert_array_equal(decoding.beam_search(untrained_model, sources, limits)[0],
                                untrained["beam"](sources, limits))


@pytest.mark.parametrize("decoders", ["untrained", "trained"])
def test_beam_of_one_without_length_penalty_is_greedy(request, decoders, batch):
  decoders = request.getfixturevalue(decoders)
  np.testing.assert_array_equal(decoders["beam_1_alpha_0"](*batch), decoders["greedy"](*batch))


def test_graph_functions_trace_once_for_every_shape(untrained, batch):
  sources, limits = batch
  for fn in untrained.values():
    # Two batch sizes and two source lengths, one trace.
    assert fn(sources, limits).shape[0] == len(sources)
    assert fn(sources[:2, :5], limits[:2]).shape[0] == 2
    assert fn.experimental_get_tracing_count() == 1


def reference_beam_search(model, source, max_length, beam_size, alpha):
  """Beam search over one sentence with no cache: every step runs the full model
  (encoder included) on each live hypothesis' whole prefix.

  The same rules as :func:`decoding.beam_search` (2·beam_size candidates, the
  ending ones among the best beam_size are finished, early termination), in
  NumPy float64.

  Args:
    model: ``(source_ids, target_ids) -> logits``, the full model.
    source: ``(src_len,)`` ids without padding.
    max_length: the most tokens the output may have.
  Returns:
    ``(tokens, score)``: the best finished hypothesis without [START], and its
    score log P / lp.
  """
  def penalty(length):
    return ((5.0 + length) / 6.0) ** alpha

  alive = [([decoding.START_ID], 0.0)]
  finished = []  # (score, tokens)
  for length in range(1, max_length + 1):
    prefixes = np.array([ids for ids, _ in alive], np.int32)
    logits = model(np.repeat(source[np.newaxis], len(alive), 0),
                   prefixes).numpy()[:, -1].astype(np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    candidates = [(log_prob + step_log_probs[token], ids + [int(token)])
                  for (ids, log_prob), step_log_probs in zip(alive, log_probs)
                  for token in range(len(step_log_probs))]
    candidates.sort(key=lambda c: -c[0])
    candidates = candidates[:2 * beam_size]
    at_limit = length == max_length
    for rank, (log_prob, ids) in enumerate(candidates):
      if rank < beam_size and (ids[-1] == END or at_limit):
        finished.append((log_prob / penalty(length), ids))
    finished = sorted(finished, key=lambda f: -f[0])[:beam_size]
    alive = [(ids, log_prob) for log_prob, ids in candidates
             if not (ids[-1] == END or at_limit)][:beam_size]
    if at_limit or (finished and finished[0][0] >= alive[0][1] / penalty(max_length)):
      break
  score, ids = finished[0]
  return ids[1:], score


@pytest.fixture(scope="module")
def varied_model(decoding_config, make_model):
  """Two layers of random weights whose beams differ, whose hypotheses end at
  different lengths, and whose next token depends on the whole prefix.

  An untrained tied model mostly repeats one token; this one has a separate
  random output layer, N(0, 1), that never picks [PAD], [UNK] or [START]
  and favours [END] a little (bias 1). Two layers, because the second layer's
  cached keys and values mix every earlier token: with one random layer a
  hypothesis reading another's cache rows scored the same (seed chosen so that
  the tests below see the beams diverge; they assert it).
  """
  keras.utils.set_random_seed(6)
  model = make_model(decoding_config(num_layers=2, output_weights="untied"), (VOCAB, VOCAB))
  final = model.final_layer
  final.kernel.assign(np.random.default_rng(6).normal(0, 1.0, final.kernel.shape))
  final.bias.assign(np.array([-30.0, -30.0, -30.0, 1.0] + [0.0] * (VOCAB - 4)))
  return model


class WithoutCacheReorder:
  """The model, but beam search's cache rows stay where they are when
  hypotheses change parents: what a lost reorder would do."""

  def __init__(self, model):
    self.model = model

  def __getattr__(self, name):
    return getattr(self.model, name)

  @staticmethod
  def reorder_cache(cache, gather):
    del gather
    return cache


def test_cached_beam_search_equals_uncached_reference(varied_model):
  """Beam 4 over sentences of mixed lengths in one batch: the cached search
  (whose cache rows follow each hypothesis' parent) gives the tokens and scores
  of re-running the full model on every prefix."""
  sources = random_sources(np.random.default_rng(7), 6, min_words=1, max_words=9)
  limits = decoding.output_length_limits(sources, 4, MAX_POSITION)
  tokens, scores = decoding.beam_search(varied_model, sources, limits, beam_size=4,
                                        alpha=0.6)
  greedy = decoding.greedy_decode(varied_model, sources, limits).numpy()
  # Beams that matter: beam search differs from greedy, some outputs end early,
  # and hypotheses that read the cache rows of the wrong parent score otherwise.
  assert not np.array_equal(tokens.numpy(), greedy)
  assert any(END in strip_padding(row) and len(strip_padding(row)) < limit
             for row, limit in zip(tokens.numpy(), limits.numpy()))
  _, stale_scores = decoding.beam_search(WithoutCacheReorder(varied_model), sources, limits,
                                         beam_size=4, alpha=0.6)
  assert np.abs(stale_scores.numpy() - scores.numpy()).max() > 1e-2
  full_model = tf.function(lambda s, t: varied_model((s, t), training=False),
                           input_signature=(SPEC[0], SPEC[0]), autograph=False)
  for row, source in enumerate(sources):
    want_tokens, want_score = reference_beam_search(
        full_model, source[:np.count_nonzero(source)], int(limits[row]), 4, 0.6)
    assert strip_padding(tokens.numpy()[row]) == want_tokens, row
    assert float(scores[row]) == pytest.approx(want_score, rel=1e-4, abs=1e-4), row


def test_same_tokens_and_scores_as_the_tensorflow_oracle(varied_model):
  """The keras.ops decoders against the TensorFlow decoding they replaced
  (``helpers/tf_decoding.py``), eagerly, on a batch of mixed lengths whose
  beams differ from greedy (the configurations' shapes and JAX:
  ``tests/backends/test_same_decoding.py``)."""
  sources = random_sources(np.random.default_rng(7), 6, min_words=1, max_words=9)
  limits = decoding.output_length_limits(sources, 4, MAX_POSITION)
  greedy = decoding.greedy_decode(varied_model, sources, limits)
  np.testing.assert_array_equal(greedy, tf_decoding.greedy_decode(varied_model, sources, limits))
  tokens, scores = decoding.beam_search(varied_model, sources, limits, beam_size=4, alpha=0.6)
  want_tokens, want_scores = tf_decoding.beam_search(varied_model, sources, limits, 4, 0.6)
  assert not np.array_equal(want_tokens, greedy)
  np.testing.assert_array_equal(tokens, want_tokens)
  np.testing.assert_allclose(scores, want_scores, rtol=1e-6)


A, B, C, D = 4, 5, 6, 7


class TableModel:
  """A stand-in with the model's decoding interface whose next-token
  probabilities depend on the previous token only, from a fixed table."""

  def __init__(self, next_token_probs):
    table = np.full((8, 8), 1e-6)
    for previous, probs in next_token_probs.items():
      for token, p in probs.items():
        table[previous, token] = p
    table[:, 0] = 0.0  # Never padding.
    self.logits = tf.math.log(tf.constant(table / table.sum(1, keepdims=True), tf.float32))

  def encode(self, source_ids, training=None):
    del training
    context = tf.zeros(tf.concat([tf.shape(source_ids), [1]], 0))
    return context, padding_mask(source_ids)

  def initial_cache(self, context, max_length):
    return [{"key": tf.zeros([tf.shape(context)[0], max_length])}]

  @staticmethod
  def reorder_cache(cache, gather):
    return tf.nest.map_structure(gather, cache)

  def decode_step(self, ids, index, cache, source_mask):
    del index
    weights = tf.zeros([tf.shape(ids)[0], 1, tf.shape(source_mask)[-1]])
    return tf.gather(self.logits, ids), cache, weights


def test_beam_search_finds_a_better_sequence_than_greedy():
  # Greedy takes A (0.6) then C (0.36): P(A C END) = 0.216. B (0.4) is almost
  # surely followed by [END]: P(B END) = 0.396.
  model = TableModel({decoding.START_ID: {A: 0.6, B: 0.4}, A: {C: 0.36, D: 0.34, END: 0.3},
                      B: {END: 0.99, C: 0.01}, C: {END: 1.0}, D: {END: 1.0}, END: {END: 1.0}})
  sources = tf.constant([[2, 9, 9, 9, 9, 3]])
  limits = decoding.output_length_limits(sources, 10, 64)
  greedy = decoding.greedy_decode(model, sources, limits).numpy()
  assert greedy.tolist() == [[A, C, END]]

  tokens, scores = decoding.beam_search(model, sources, limits, beam_size=4, alpha=0.6)
  assert strip_padding(tokens.numpy()[0]) == [B, END]
  greedy_score = math.log(0.6 * 0.36 * 1.0) / ((5 + 3) / 6) ** 0.6
  assert scores.numpy()[0] == pytest.approx(math.log(0.4 * 0.99) / ((5 + 2) / 6) ** 0.6,
                                            abs=1e-4)
  assert scores.numpy()[0] > greedy_score + 0.3


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_decode_trims_a_10000_token_input(untrained_model, decoding_config, method):
  config = decoding_config()
  config.decoding.extra_length = 5
  sources = tf.constant([[decoding.START_ID] + [9] * 9_998 + [END], [2, 5, 3] + [0] * 9_997])
  tokens = decoding.decode(untrained_model, sources, method,
                           **config.decoding.to_dict()).numpy()
  assert tokens.shape[0] == 2
  assert tokens.shape[1] <= MAX_POSITION
  assert len(strip_padding(tokens[1])) <= 3 + 5


def test_decode_rejects_unknown_method(untrained_model):
  with pytest.raises(ValueError, match="sampling"):
    decoding.decode(untrained_model, tf.constant([[2, 3]]), "sampling")
