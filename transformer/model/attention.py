"""The attention layers (tutorial: "The attention layers"; paper §3.2).

Masks are boolean (True: "may attend"), broadcastable to ``(batch, heads, q_len, k_len)``,
built from token ids and passed explicitly to every layer. The tutorial relies on Keras'
implicit mask propagation instead, but Keras 3's ``MultiHeadAttention`` and ``Add`` drop
``_keras_mask``: only its first encoder and decoder self-attention see the padding mask, and
``use_causal_mask=True`` is lost with dropout or returned scores (keras-team/keras#23038;
``tests/unit/test_masking.py``). Written in ``keras.ops``: runs on every Keras backend.
"""

import warnings

import keras
from keras import ops
import numpy as np

# Keras warns when a softmax runs over an axis of size 1; in attention that is a query
# with one key to attend to (the first target position, uncached), rightly weighted 1.
warnings.filterwarnings("ignore", message="You are using a softmax over axis -1 of a tensor",
                        category=UserWarning, module=r"keras\.src\.ops\.nn")


def padding_mask(ids, pad_id: int = 0):
  """Keys that are real tokens: ``(batch, 1, 1, key_length)`` bool."""
  return ops.not_equal(ids, pad_id)[:, None, None, :]


def causal_mask(length):
  """Look-ahead mask: query i may attend to keys j ≤ i. ``(1, 1, length, length)`` bool."""
  positions = ops.arange(length)
  return (positions[None, :] <= positions[:, None])[None, None]


def attention_logits(query, key, scale_attention_logits: bool = True):
  """QKᵀ, divided by √d_k when ``scale_attention_logits`` (eq. 1): unit-variance entries
  give dot products of variance d_k, and the softmax would saturate (§3.2.1, footnote 4).

  Shapes: query ``(..., q_len, d_k)``, key ``(..., k_len, d_k)`` → ``(..., q_len, k_len)``.
  """
  # Not matmul(query, swapaxes(key)): under TensorFlow that transposes the keys in memory.
  logits = ops.einsum("...qd,...kd->...qk", query, key)
  if scale_attention_logits:
    logits = logits / ops.sqrt(ops.cast(ops.shape(key)[-1], logits.dtype))
  return logits


def masked_softmax(logits, mask=None):
  """Softmax over the last axis, in float32, with masked keys given weight exactly 0."""
  logits = ops.cast(logits, "float32")
  if mask is not None:
    # The dtype's minimum (not -inf) keeps a fully masked row finite.
    logits = ops.where(mask, logits, float(np.finfo(np.float32).min))
  weights = ops.softmax(logits, axis=-1)
  if mask is not None:
    weights = ops.where(mask, weights, 0.0)
  return weights


def scaled_dot_product_attention(query, key, value, mask=None, weights_dropout=None,
                                 scale_attention_logits: bool = True):
  """softmax(QKᵀ/√d_k)V (eq. 1). Returns ``(output, weights)``.

  Shapes: query ``(..., q_len, d_k)``, key ``(..., k_len, d_k)``, value ``(..., k_len, d_v)``,
  mask broadcastable to ``(..., q_len, k_len)``. ``weights_dropout`` (a callable) drops the
  weights that meet the values; the returned weights are those before it.
  """
  weights = masked_softmax(attention_logits(query, key, scale_attention_logits), mask)
  used = ops.cast(weights, value.dtype)
  if weights_dropout is not None:
    used = weights_dropout(used)
  return ops.matmul(used, value), weights


@keras.saving.register_keras_serializable(package="transformer")
class MultiHeadAttention(keras.layers.Layer):
  """Multi-head attention (§3.2.2): h heads of width ``key_dim``, then a projection
  back to the query width.

  ``call(query, value, attention_mask)``: query ``(batch, q_len, d_model)``, value
  ``(batch, k_len, d_model)`` (also the keys) → output ``(batch, q_len, d_model)``
  and weights ``(batch, heads, q_len, k_len)``, taken before dropout (rows sum to 1).
  Decoding uses the halves :meth:`project_key_value` and :meth:`attend`.
  ``attention_dropout_rate`` drops attention weights (the tutorial's, via Keras'
  ``MultiHeadAttention(dropout=...)``); the paper drops none. ``fused``: see
  :meth:`Transformer.use_fused_attention` (then weights are None).
  """

  def __init__(self, num_heads: int, key_dim: int, attention_dropout_rate: float = 0.0,
               scale_attention_logits: bool = True, **kwargs):
    super().__init__(**kwargs)
    self.num_heads = num_heads
    self.key_dim = key_dim
    self.attention_dropout_rate = attention_dropout_rate
    self.scale_attention_logits = scale_attention_logits
    width = num_heads * key_dim
    self.query_dense = keras.layers.Dense(width, name="query")
    self.key_dense = keras.layers.Dense(width, name="key")
    self.value_dense = keras.layers.Dense(width, name="value")
    self.output_dense = None  # Built once the query width is known.
    self.weights_dropout = keras.layers.Dropout(attention_dropout_rate)
    self.fused = False

  def build(self, query_shape, value_shape=None):
    value_shape = value_shape or query_shape
    self.query_dense.build(query_shape)
    self.key_dense.build(value_shape)
    self.value_dense.build(value_shape)
    self.output_dense = keras.layers.Dense(query_shape[-1], name="attention_output")
    self.output_dense.build((*query_shape[:-1], self.num_heads * self.key_dim))
    self.built = True

  def per_head(self, x):
    """``(batch, length, heads * key_dim)`` → ``(batch, length, heads, key_dim)``."""
    return ops.reshape(x, (*ops.shape(x)[:2], self.num_heads, self.key_dim))

  def merge_heads(self, x):
    """``(batch, length, heads, key_dim)`` → ``(batch, length, heads * key_dim)``."""
    return ops.reshape(x, (*ops.shape(x)[:2], self.num_heads * self.key_dim))

  def split_heads(self, x):
    """``(batch, length, heads * key_dim)`` → ``(batch, heads, length, key_dim)``."""
    return ops.transpose(self.per_head(x), (0, 2, 1, 3))

  def project_key_value(self, value):
    """Keys and values per head, each ``(batch, heads, k_len, key_dim)``."""
    return self.split_heads(self.key_dense(value)), self.split_heads(self.value_dense(value))

  def attend(self, query, keys, values, mask=None, training=None):
    """Attention of ``query`` over per-head ``keys``/``values`` from :meth:`project_key_value`."""
    queries = self.split_heads(self.query_dense(query))
    heads, weights = scaled_dot_product_attention(  # heads: (batch, heads, q_len, key_dim)
        queries, keys, values, mask,
        weights_dropout=lambda w: self.weights_dropout(w, training=training),
        scale_attention_logits=self.scale_attention_logits)
    return self.output_dense(self.merge_heads(ops.transpose(heads, (0, 2, 1, 3)))), weights

  def fused_attention(self, query, value, mask=None, use_causal_mask=False):
    """:meth:`call` by ``keras.ops.dot_product_attention``, in its
    ``(batch, length, heads, key_dim)`` layout (no transposes); no weights, no dropout."""
    heads = ops.dot_product_attention(
        self.per_head(self.query_dense(query)), self.per_head(self.key_dense(value)),
        self.per_head(self.value_dense(value)), mask=mask,
        scale=1.0 / np.sqrt(self.key_dim) if self.scale_attention_logits else 1.0,
        is_causal=use_causal_mask)
    return self.output_dense(self.merge_heads(heads))

  def call(self, query, value, attention_mask=None, use_causal_mask=False, training=None):
    """``use_causal_mask`` adds :func:`causal_mask` to ``attention_mask`` (self-attention)."""
    if self.fused and not (training and self.attention_dropout_rate > 0):
      return self.fused_attention(query, value, attention_mask, use_causal_mask), None
    if use_causal_mask:
      causal = causal_mask(ops.shape(query)[1])
      attention_mask = causal if attention_mask is None else ops.logical_and(attention_mask, causal)
    keys, values = self.project_key_value(value)
    return self.attend(query, keys, values, attention_mask, training=training)

  def compute_output_shape(self, query_shape, value_shape=None):
    return query_shape

  def get_config(self):
    return {**super().get_config(), "num_heads": self.num_heads, "key_dim": self.key_dim,
            "attention_dropout_rate": self.attention_dropout_rate,
            "scale_attention_logits": self.scale_attention_logits}


@keras.saving.register_keras_serializable(package="transformer")
class BaseAttention(keras.layers.Layer):
  """An attention sub-layer with its residual connection and post-LayerNorm (§3.1, §5.4):
  ``LayerNorm(x + Dropout(MultiHeadAttention(x, context)))``.

  Keyword names and defaults are the tutorial's: ``dropout`` is the attention weights'
  (``attention_dropout_rate``); ``dropout_rate`` drops the sub-layer output (the paper's
  residual dropout, §5.4), which the tutorial leaves out (0). ``last_attn_scores``
  ``(batch, heads, q_len, k_len)``, the tutorial's name: the last call's weights, for plotting.
  """

  def __init__(self, num_heads: int, key_dim: int, dropout: float = 0.0, *,
               dropout_rate: float = 0.0, scale_attention_logits: bool = True,
               layer_norm_epsilon: float = 1e-3, **kwargs):
    super().__init__(**kwargs)
    self.dropout_rate = dropout_rate
    self.layer_norm_epsilon = layer_norm_epsilon
    self.mha = MultiHeadAttention(num_heads, key_dim,
                                  attention_dropout_rate=dropout,
                                  scale_attention_logits=scale_attention_logits,
                                  name="multi_head_attention")
    self.dropout = keras.layers.Dropout(dropout_rate)
    self.layernorm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon)
    self.last_attn_scores = None

  def build(self, x_shape):
    self.mha.build(x_shape, x_shape)
    self.layernorm.build(x_shape)
    self.built = True

  def residual(self, x, attended, training=None):
    return self.layernorm(x + self.dropout(attended, training=training))

  def compute_output_shape(self, x_shape, *args, **kwargs):
    return x_shape

  def get_config(self):
    # The attention's own settings are its MultiHeadAttention's, stored there once.
    return {**super().get_config(), "num_heads": self.mha.num_heads,
            "key_dim": self.mha.key_dim, "dropout_rate": self.dropout_rate,
            "dropout": self.mha.attention_dropout_rate,
            "scale_attention_logits": self.mha.scale_attention_logits,
            "layer_norm_epsilon": self.layer_norm_epsilon}


@keras.saving.register_keras_serializable(package="transformer")
class GlobalSelfAttention(BaseAttention):
  """Encoder self-attention over every real source token.

  ``call(x, attention_mask)``: x ``(batch, src_len, d_model)``, mask from :func:`padding_mask`."""

  def call(self, x, attention_mask=None, training=None):
    attended, self.last_attn_scores = self.mha(
        x, x, attention_mask=attention_mask, training=training)
    return self.residual(x, attended, training=training)


@keras.saving.register_keras_serializable(package="transformer")
class CausalSelfAttention(BaseAttention):
  """Decoder self-attention: position i attends to positions ≤ i only (§3.2.3).

  ``call(x)``: x ``(batch, tgt_len, d_model)``; trailing target padding needs no mask (a
  real position never sees a later one). ``step(x, cache, index)`` decodes the one position
  ``(batch, 1, d_model)`` at ``index``; ``cache`` ``{"key", "value"}``, each
  ``(batch, heads, max_length, key_dim)``, comes back with this position added.
  """

  def call(self, x, training=None):
    attended, self.last_attn_scores = self.mha(x, x, use_causal_mask=True, training=training)
    return self.residual(x, attended, training=training)

  def step(self, x, cache, index):
    key, value = self.mha.project_key_value(x)
    positions = ops.arange(ops.shape(cache["key"])[2])
    # One select per tensor: the cache is the largest tensor a step touches.
    here = ops.equal(positions, index)[None, None, :, None]
    cache = {"key": ops.where(here, key, cache["key"]),
             "value": ops.where(here, value, cache["value"])}
    mask = (positions <= index)[None, None, None, :]
    attended, _ = self.mha.attend(x, cache["key"], cache["value"], mask)
    return self.residual(x, attended), cache


@keras.saving.register_keras_serializable(package="transformer")
class CrossAttention(BaseAttention):
  """Decoder-encoder attention: target positions attend to real source tokens (§3.2.3).

  ``call(x, context, attention_mask)``: x ``(batch, tgt_len, d_model)``, context (the encoder
  output) ``(batch, src_len, d_model)``, mask from :func:`padding_mask` of the source.
  ``step`` attends over the context's keys/values, projected once (``mha.project_key_value``).
  """

  def build(self, x_shape, context_shape):
    self.mha.build(x_shape, context_shape)
    self.layernorm.build(x_shape)
    self.built = True

  def call(self, x, context, attention_mask=None, training=None):
    attended, self.last_attn_scores = self.mha(
        x, context, attention_mask=attention_mask, training=training)
    return self.residual(x, attended, training=training)

  def step(self, x, keys, values, mask):
    attended, weights = self.mha.attend(x, keys, values, mask)
    return self.residual(x, attended), weights
