"""The decoder (tutorial: "The decoder layer" and "The decoder"; paper §3.1).

Built like the encoder (:mod:`transformer.model.encoder`). Decoding one position at a time
with a key/value cache (:meth:`Decoder.step`) is this module's addition to the tutorial.
"""

import keras
from keras import ops

from transformer.model.attention import CausalSelfAttention, CrossAttention
from transformer.model.encoder import BaseLayer, Stack


@keras.saving.register_keras_serializable(package="transformer")
class DecoderLayer(BaseLayer):
  """Causal self-attention, cross-attention over the encoder output, feed-forward.

  ``call(x, context, source_mask)``: x ``(batch, tgt_len, d_model)``, context
  ``(batch, src_len, d_model)``, source_mask ``(batch, 1, 1, src_len)`` (None:
  every source position is real) → ``(batch, tgt_len, d_model)``. ``last_attn_scores``:
  the last call's cross-attention ``(batch, heads, tgt_len, src_len)``.
  """

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    # The tutorial's `causal_self_attention`; checkpoints address the variables by this name.
    self.self_attention = self.attention(CausalSelfAttention, "causal_self_attention")
    self.cross_attention = self.attention(CrossAttention, "cross_attention")
    self.ffn = self.feed_forward()

  def build(self, x_shape, context_shape=None):
    self.self_attention.build(x_shape)
    self.cross_attention.build(x_shape, context_shape or x_shape)
    self.ffn.build(x_shape)
    self.built = True

  @property
  def last_attn_scores(self):
    return self.cross_attention.last_attn_scores

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


@keras.saving.register_keras_serializable(package="transformer")
class Decoder(Stack):
  """Positional embedding and ``num_layers`` decoder layers (the tutorial's
  ``Decoder(num_layers=4, d_model=512, num_heads=8, dff=2048, vocab_size=8000)``).

  ``call(x, context, source_mask)``: x, the target ids ``(batch, tgt_len)`` →
  ``(batch, tgt_len, d_model)``. ``last_attn_scores``: the last layer's.
  """

  layer_class = DecoderLayer
  tutorial_layers_name = "dec_layers"

  def build(self, x_shape, context_shape=None):
    self.embedding.build(x_shape)
    x_shape = (*x_shape, self.d_model)
    for layer in self.layers:
      layer.build(x_shape, context_shape or x_shape)
    self.built = True

  @property
  def last_attn_scores(self):
    return self.layers[-1].last_attn_scores

  def call(self, x, context, source_mask=None, training=None):
    x = self.embedding(x, training=training)
    for layer in self.layers:
      x = layer(x, context, source_mask=source_mask, training=training)
    return x

  def compute_output_shape(self, x_shape, context_shape=None):
    return (*x_shape, self.d_model)

  def initial_cache(self, context, max_length):
    """Per-layer decoding state: the context's keys/values (projected once) and
    empty self-attention keys/values for ``max_length`` positions."""
    batch = ops.shape(context)[0]
    cache = []
    for layer in self.layers:
      context_key, context_value = layer.cross_attention.mha.project_key_value(context)
      empty = ops.zeros((batch, self.num_heads, max_length, self.key_dim),
                        context_key.dtype)
      cache.append({"key": empty, "value": empty,
                    "context_key": context_key, "context_value": context_value})
    return cache

  @staticmethod
  def reorder_cache(cache, gather):
    """``cache`` with ``gather`` (a row permutation, e.g. beams taking over their parents'
    rows) applied to the self-attention keys and values. The context's are left alone: the
    rows ``gather`` exchanges belong to one sentence, so they are equal."""
    return [{**layer_cache, "key": gather(layer_cache["key"]),
             "value": gather(layer_cache["value"])} for layer_cache in cache]

  def step(self, ids, index, cache, source_mask):
    """Decodes one position with cached keys/values (inference only, no dropout).

    ``ids`` ``(batch,)`` at scalar position ``index``; ``cache`` from :meth:`initial_cache`
    or the previous step; ``source_mask`` ``(batch, 1, 1, src_len)``. Returns x
    ``(batch, 1, d_model)``, the cache, the last cross-attention ``(batch, heads, 1, src_len)``.
    """
    x = self.embedding(ids[:, None], offset=index)
    new_cache = []
    for layer, layer_cache in zip(self.layers, cache):
      x, layer_cache, weights = layer.step(x, layer_cache, index, source_mask)
      new_cache.append(layer_cache)
    return x, new_cache, weights
