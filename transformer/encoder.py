"""The encoder (tutorial: "The encoder layer" and "The encoder"; paper §3.1)."""

import keras

from transformer.attention import GlobalSelfAttention, padding_mask
from transformer.embedding import PositionalEmbedding
from transformer.feed_forward import FeedForward


@keras.saving.register_keras_serializable(package="transformer")
class EncoderLayer(keras.layers.Layer):
  """Self-attention then feed-forward, each with residual, dropout and LayerNorm.

  ``call(x, attention_mask)``: x ``(batch, src_len, d_model)``, attention_mask ``(batch, 1, 1, src_len)``
  from :func:`transformer.attention.padding_mask` → ``(batch, src_len, d_model)``.
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
    self.self_attention = GlobalSelfAttention(
        num_heads, key_dim, attention_dropout_rate=attention_dropout_rate,
        dropout_rate=dropout_rate, residual_dropout=residual_dropout_on_attention,
        scale_logits=scale_attention_logits, layer_norm_epsilon=layer_norm_epsilon,
        name="self_attention")
    self.ffn = FeedForward(d_model, dff, dropout_rate, layer_norm_epsilon,
                           name="feed_forward")

  def build(self, x_shape):
    self.self_attention.build(x_shape)
    self.ffn.build(x_shape)
    self.built = True

  def call(self, x, attention_mask=None, training=None):
    x = self.self_attention(x, attention_mask=attention_mask, training=training)
    return self.ffn(x, training=training)

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
class Encoder(keras.layers.Layer):
  """Positional embedding and a stack of ``num_layers`` encoder layers.

  ``call(source_ids)``: ``(batch, src_len)`` int → ``(batch, src_len, d_model)``.
  The padding mask is computed from ``pad_id`` and given to every layer.

  ``embedding`` lets a model share one :class:`PositionalEmbedding` between the
  encoder and the decoder (the paper's three-way weight sharing, §3.4).
  """

  def __init__(self, num_layers: int, d_model: int, num_heads: int, dff: int,
               vocab_size: int, *, key_dim: int, dropout_rate: float = 0.1,
               attention_dropout_rate: float = 0.0, residual_dropout_on_attention: bool = True,
               scale_attention_logits: bool = True, layer_norm_epsilon: float = 1e-6,
               max_position: int = 2048, positional_layout: str = "interleaved",
               scale_embeddings: bool = True, embedding_initializer: str = "uniform",
               pad_id: int = 0, embedding=None, **kwargs):
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
    self.pad_id = pad_id
    self.embedding = embedding or PositionalEmbedding(
        vocab_size, d_model, max_position=max_position, layout=positional_layout,
        scale_embeddings=scale_embeddings, initializer=embedding_initializer,
        dropout_rate=dropout_rate, name="embedding")
    # A tuple, not a list: TF checkpoints do not follow the TrackedList that
    # Keras 3 makes of a list attribute, and would silently skip these layers.
    self.layers = tuple(
        EncoderLayer(d_model, num_heads, dff, key_dim, dropout_rate=dropout_rate,
                     attention_dropout_rate=attention_dropout_rate,
                     residual_dropout_on_attention=residual_dropout_on_attention,
                     scale_attention_logits=scale_attention_logits,
                     layer_norm_epsilon=layer_norm_epsilon, name=f"layer_{i}")
        for i in range(num_layers))

  def build(self, source_ids_shape):
    self.embedding.build(source_ids_shape)
    for layer in self.layers:
      layer.build((*source_ids_shape, self.d_model))
    self.built = True

  def call(self, source_ids, training=None):
    mask = padding_mask(source_ids, self.pad_id)
    x = self.embedding(source_ids, training=training)
    for layer in self.layers:
      x = layer(x, attention_mask=mask, training=training)
    return x

  def compute_output_shape(self, source_ids_shape):
    return (*source_ids_shape, self.d_model)

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
            "embedding_initializer": self.embedding_initializer, "pad_id": self.pad_id}
