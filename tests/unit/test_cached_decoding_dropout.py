"""Cached decoding (``Transformer.decode_step`` and the decoders of
transformer/inference/decoding.py) with dropout on in the model: decoding is
inference, so every dropout layer, residual, attention weights and embedding,
must be off in it. The decode-step tests with dropout off are in
tests/unit/test_model.py and tests/unit/test_decoding.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer.inference import decoding

# High rates, so that a dropout layer left on changes every output.
DROPOUT = dict(dropout_rate=0.5, attention_dropout_rate=0.5, residual_dropout_on_attention=True)
MAX_LENGTH = 8


@pytest.fixture(scope="module")
def model(make_model):
  keras.utils.set_random_seed(7)
  return make_model(num_layers=2, **DROPOUT)


@pytest.fixture(scope="module")
def source(random_batch):
  source, _ = random_batch(seed=3, rows=3, source_length=6)
  source[1, 4:] = 0  # padding, as a batch of unequal sentences has
  return tf.constant(source)


def test_each_decode_step_gives_the_full_pass_without_dropout(model, source, random_batch):
  _, target = random_batch(seed=4, rows=3, target_length=MAX_LENGTH)
  full = model((source, target), training=False).numpy()
  # Dropout is on in training mode: the check below would see it.
  assert not np.allclose(model((source, target), training=True).numpy(), full, atol=1e-3)
  context, source_mask = model.encode(source, training=False)
  cache = model.initial_cache(context, MAX_LENGTH)
  for index in range(MAX_LENGTH):
    logits, cache, _ = model.decode_step(tf.constant(target[:, index]), index, cache,
                                         source_mask)
    np.testing.assert_allclose(logits.numpy(), full[:, index], rtol=1e-4, atol=1e-5,
                               err_msg=f"position {index}")


def test_cached_greedy_decoding_gives_the_tokens_of_decoding_without_the_cache(model, source):
  max_lengths = tf.fill([source.shape[0]], MAX_LENGTH)
  cached = decoding.greedy_decode(model, source, max_lengths)
  np.testing.assert_array_equal(
      cached.numpy(), decoding.greedy_decode_uncached(model, source, max_lengths).numpy())
