"""Scaled dot-product attention (eq. 1), masks and multi-head attention (§3.2)."""

import numpy as np
import tensorflow as tf

from transformer.model.attention import (MultiHeadAttention, attention_logits, causal_mask,
                                   padding_mask, scaled_dot_product_attention)


def test_scaled_dot_product_attention_matches_numpy():
  rng = np.random.default_rng(0)
  q, k, v = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 4))
  output, weights = scaled_dot_product_attention(tf.constant(q), tf.constant(k), tf.constant(v))
  logits = q @ k.transpose(0, 2, 1) / np.sqrt(8)
  expected_weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  np.testing.assert_allclose(weights.numpy(), expected_weights, rtol=1e-5)
  np.testing.assert_allclose(output.numpy(), expected_weights @ v, rtol=1e-5)


def test_scaling_keeps_logit_variance_near_one():
  """§3.2.1: with unit-variance q and k, q·k has variance d_k; /√d_k brings it to 1."""
  d_k = 64
  rng = np.random.default_rng(1)
  q = tf.constant(rng.normal(size=(64, 128, d_k)), tf.float32)
  k = tf.constant(rng.normal(size=(64, 128, d_k)), tf.float32)
  scaled = np.var(attention_logits(q, k, scale_attention_logits=True).numpy())
  unscaled = np.var(attention_logits(q, k, scale_attention_logits=False).numpy())
  assert abs(scaled - 1.0) < 0.05
  assert abs(unscaled / d_k - 1.0) < 0.05


def test_masked_keys_get_exactly_zero_weight_and_rows_sum_to_one():
  ids = tf.constant([[7, 8, 9, 0, 0], [7, 0, 0, 0, 0]])
  rng = np.random.default_rng(2)
  q = tf.constant(rng.normal(size=(2, 1, 5, 4)) * 30, tf.float32)  # large logits
  _, weights = scaled_dot_product_attention(q, q, q, padding_mask(ids))
  weights = weights.numpy()
  assert np.all(weights[0, :, :, 3:] == 0.0)
  assert np.all(weights[1, :, :, 1:] == 0.0)
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)


def test_causal_mask_is_lower_triangular():
  mask = causal_mask(4).numpy()[0, 0]
  np.testing.assert_array_equal(mask, np.tril(np.ones((4, 4), bool)))


def test_multi_head_attention_is_per_head_attention_of_projections():
  layer = MultiHeadAttention(num_heads=2, key_dim=3)
  rng = np.random.default_rng(3)
  query = rng.normal(size=(1, 4, 6)).astype(np.float32)
  value = rng.normal(size=(1, 5, 6)).astype(np.float32)
  output, weights = layer(query, value)
  wq, bq = layer.query_dense.kernel.numpy(), layer.query_dense.bias.numpy()
  wk, bk = layer.key_dense.kernel.numpy(), layer.key_dense.bias.numpy()
  wv, bv = layer.value_dense.kernel.numpy(), layer.value_dense.bias.numpy()
  wo, bo = layer.output_dense.kernel.numpy(), layer.output_dense.bias.numpy()
  heads = []
  for h in range(2):
    cols = slice(3 * h, 3 * h + 3)
    q, k, v = query[0] @ wq[:, cols] + bq[cols], value[0] @ wk[:, cols] + bk[cols], \
        value[0] @ wv[:, cols] + bv[cols]
    logits = q @ k.T / np.sqrt(3)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights.numpy()[0, h], w, rtol=1e-5)
    heads.append(w @ v)
  expected = np.concatenate(heads, -1) @ wo + bo
  np.testing.assert_allclose(output.numpy()[0], expected, rtol=1e-4, atol=1e-5)


def test_multi_head_attention_parameter_count_matches_keras():
  """Same parameters as keras.layers.MultiHeadAttention(num_heads=8, key_dim=128)."""
  import keras
  ours = MultiHeadAttention(num_heads=8, key_dim=128)
  ours.build((None, None, 128), (None, None, 128))
  theirs = keras.layers.MultiHeadAttention(num_heads=8, key_dim=128)
  x = np.zeros((1, 2, 128), np.float32)
  theirs(x, x)
  assert ours.count_params() == theirs.count_params() == 527_488


def attention_outputs(layer, x):
  return layer(x, training=False).numpy(), layer(x, training=True).numpy()


def test_residual_dropout_on_attention_is_the_papers_and_off_is_the_tutorials():
  from transformer.model.attention import GlobalSelfAttention
  x = np.random.default_rng(4).normal(size=(2, 6, 16)).astype(np.float32)
  paper = GlobalSelfAttention(4, 4, dropout_rate=0.5)
  inference, training = attention_outputs(paper, x)
  assert not np.allclose(inference, training)
  tutorial = GlobalSelfAttention(4, 4)
  inference, training = attention_outputs(tutorial, x)
  np.testing.assert_allclose(inference, training, rtol=1e-6)


def test_attention_dropout_drops_weights_but_returns_them_whole():
  from transformer.model.attention import GlobalSelfAttention
  x = np.random.default_rng(5).normal(size=(2, 6, 16)).astype(np.float32)
  layer = GlobalSelfAttention(4, 4, dropout=0.5)
  inference, training = attention_outputs(layer, x)
  assert not np.allclose(inference, training)
  np.testing.assert_allclose(layer.last_attn_scores.numpy().sum(-1), 1.0, rtol=1e-5)
