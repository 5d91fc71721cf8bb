"""The decoder (tutorial: "The decoder layer" and "The decoder"; paper §3.1)."""

import keras
import tensorflow as tf

from transformer.attention import CausalSelfAttention, CrossAttention
from transformer.embedding import PositionalEmbedding
from transformer.feed_forward import FeedForward


@keras.saving.register_keras_serializable(package="transformer")
class DecoderLayer(keras.layers.Layer):
  """Causal self-attention, cross-attention over the encoder output, feed-forward.

  ``call(x, context, source_mask)``: x ``(batch, tgt_len, d_model)``, context
  ``(batch, src_len, d_model)``, source_mask ``(batch, 1, 1, src_len)`` →
  ``(batch, tgt_len, d_model)``. The cross-attention weights of the last call are
  in ``last_attention_scores`` ``(batch, heads, tgt_len, src_len)``.
  """

  def __init__(self, d_model: int, num_heads: int, dff: int, key_dim: int, *,
               dropout_rate: float = 0.1, attention_dropout_rate: float = 0.0,
               residual_dropout_on_attention: bool = True, scale_attention_logits: bool = True,
               layer_norm_epsilon: float = 1e-6, **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.num_heads = num_heads
    self.dff = dff
    self.key_dim = key_dim
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.residual_dropout_on_attention = residual_dropout_on_attention
    self.scale_attention_logits = scale_attention_logits
    self.layer_norm_epsilon = layer_norm_epsilon
    attention_args = dict(attention_dropout_rate=attention_dropout_rate,
                          dropout_rate=dropout_rate,
                          residual_dropout=residual_dropout_on_attention,
                          scale_logits=scale_attention_logits,
                          layer_norm_epsilon=layer_norm_epsilon)
    self.self_attention = CausalSelfAttention(num_heads, key_dim, name="causal_self_attention",
                                              **attention_args)
    self.cross_attention = CrossAttention(num_heads, key_dim, name="cross_attention",
                                          **attention_args)
    self.ffn = FeedForward(d_model, dff, dropout_rate, layer_norm_epsilon,
                           name="feed_forward")

  def build(self, x_shape, context_shape=None):
    self.self_attention.build(x_shape)
    self.cross_attention.build(x_shape, context_shape or x_shape)
    self.ffn.build(x_shape)
    self.built = True

  @property
  def last_attention_scores(self):
    return self.cross_attention.last_attention_scores

  def call(self, x, context, source_mask=None, training=None):
    x = self.self_attention(x, training=training)
    x = self.cross_attention(x, context, attention_mask=source_mask, training=training)
    return self.ffn(x, training=training)

  def step(self, x, cache, index, source_mask):
    """One decoding position (see :meth:`Decoder.step`). Returns ``(x, cache, cross_weights)``."""
    x, self_cache = self.self_attention.step(x, {"key": cache["key"], "value": cache["value"]},
                                             index)
    x, weights = self.cross_attention.step(x, cache["context_key"], cache["context_value"],
                                           source_mask)
    return self.ffn(x), {**cache, **self_cache}, weights

  def compute_output_shape(self, x_shape, *args, **kwargs):
    return x_shape

  def get_config(self):
    return {**super().get_config(), "d_model": self.d_model, "num_heads": self.num_heads,
            "dff": self.dff, "key_dim": self.key_dim, "dropout_rate": self.dropout_rate,
            "attention_dropout_rate": self.attention_dropout_rate,
            "residual_dropout_on_attention": self.residual_dropout_on_attention,
            "scale_attention_logits": self.scale_attention_logits,
            "layer_norm_epsilon": self.layer_norm_epsilon}


@keras.saving.register_keras_serializable(package="transformer")
class Decoder(keras.layers.Layer):
  """Positional embedding and a stack of ``num_layers`` decoder layers.

  ``call(target_ids, context, source_mask)``: target_ids ``(batch, tgt_len)`` →
  ``(batch, tgt_len, d_model)``. ``last_attention_scores`` is the last layer's
  cross-attention ``(batch, heads, tgt_len, src_len)``, as in the tutorial.
  """

  def __init__(self, num_layers: int, d_model: int, num_heads: int, dff: int,
               vocab_size: int, *, key_dim: int, dropout_rate: float = 0.1,
               attention_dropout_rate: float = 0.0, residual_dropout_on_attention: bool = True,
               scale_attention_logits: bool = True, layer_norm_epsilon: float = 1e-6,
               max_position: int = 2048, positional_layout: str = "interleaved",
               scale_embeddings: bool = True, embedding_initializer: str = "uniform",
               embedding=None, **kwargs):
    super().__init__(**kwargs)
    self.num_layers = num_layers
    self.d_model = d_model
    self.num_heads = num_heads
    self.dff = dff
    self.vocab_size = vocab_size
    self.key_dim = key_dim
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.residual_dropout_on_attention = residual_dropout_on_attention
    self.scale_attention_logits = scale_attention_logits
    self.layer_norm_epsilon = layer_norm_epsilon
    self.max_position = max_position
    self.positional_layout = positional_layout
    self.scale_embeddings = scale_embeddings
    self.embedding_initializer = embedding_initializer
    self.embedding = embedding or PositionalEmbedding(
        vocab_size, d_model, max_position=max_position, layout=positional_layout,
        scale_embeddings=scale_embeddings, initializer=embedding_initializer,
        dropout_rate=dropout_rate, name="embedding")
    # A tuple, not a list: TF checkpoints do not follow the TrackedList that
    # Keras 3 makes of a list attribute, and would silently skip these layers.
    self.layers = tuple(
        DecoderLayer(d_model, num_heads, dff, key_dim, dropout_rate=dropout_rate,
                     attention_dropout_rate=attention_dropout_rate,
                     residual_dropout_on_attention=residual_dropout_on_attention,
                     scale_attention_logits=scale_attention_logits,
                     layer_norm_epsilon=layer_norm_epsilon, name=f"layer_{i}")
        for i in range(num_layers))

  def build(self, target_ids_shape, context_shape=None):
    self.embedding.build(target_ids_shape)
    x_shape = (*target_ids_shape, self.d_model)
    for layer in self.layers:
      layer.build(x_shape, context_shape or x_shape)
    self.built = True

  @property
  def last_attention_scores(self):
    return self.layers[-1].last_attention_scores

  def call(self, target_ids, context, source_mask=None, training=None):
    x = self.embedding(target_ids, training=training)
    for layer in self.layers:
      x = layer(x, context, source_mask=source_mask, training=training)
    return x

  def initial_cache(self, context, max_length):
    """Per-layer decoding state: the context's keys/values (projected once) and
    empty self-attention keys/values for ``max_length`` positions."""
    batch = tf.shape(context)[0]
    cache = []
    for layer in self.layers:
      context_key, context_value = layer.cross_attention.mha.project_key_value(context)
      empty = tf.zeros((batch, self.num_heads, max_length, self.key_dim), context_key.dtype)
      cache.append({"key": empty, "value": empty,
                    "context_key": context_key, "context_value": context_value})
    return cache

  @staticmethod
  def reorder_cache(cache, gather):
    """``cache`` with ``gather`` (a row permutation, e.g. beams taking over their
    parents' rows) applied to the self-attention keys and values. The context's
    keys and values are left alone: every row that ``gather`` may exchange
    belongs to the same sentence, so they are equal, and copying them at every
    step would cost more than the rest of the reordering."""
    return [{**layer_cache, "key": gather(layer_cache["key"]),
             "value": gather(layer_cache["value"])} for layer_cache in cache]

  def step(self, ids, index, cache, source_mask):
    """Decodes one position with cached keys/values (inference only, no dropout).

    Args:
      ids: ``(batch,)`` the tokens at position ``index``.
      index: scalar int, the position of ``ids``.
      cache: from :meth:`initial_cache` or the previous step.
      source_mask: ``(batch, 1, 1, src_len)``.
    Returns:
      ``(x, cache, cross_weights)``: x ``(batch, 1, d_model)``, the updated cache,
      and the last layer's cross-attention weights ``(batch, heads, 1, src_len)``.
    """
    x = self.embedding(ids[:, tf.newaxis], offset=index)
    new_cache = []
    for layer, layer_cache in zip(self.layers, cache):
      x, layer_cache, weights = layer.step(x, layer_cache, index, source_mask)
      new_cache.append(layer_cache)
    return x, new_cache, weights

  def compute_output_shape(self, target_ids_shape, *args, **kwargs):
    return (*target_ids_shape, self.d_model)

  def get_config(self):
    return {**super().get_config(), "num_layers": self.num_layers, "d_model": self.d_model,
            "num_heads": self.num_heads, "dff": self.dff, "vocab_size": self.vocab_size,
            "key_dim": self.key_dim, "dropout_rate": self.dropout_rate,
            "attention_dropout_rate": self.attention_dropout_rate,
            "residual_dropout_on_attention": self.residual_dropout_on_attention,
            "scale_attention_logits": self.scale_attention_logits,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "max_position": self.max_position, "positional_layout": self.positional_layout,
            "scale_embeddings": self.scale_embeddings,
            "embedding_initializer": self.embedding_initializer}
