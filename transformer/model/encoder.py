"""The encoder (tutorial: "The encoder layer" and "The encoder"; paper §3.1).

The tutorial's arguments (``EncoderLayer(d_model=512, num_heads=8, dff=2048)``) build the
tutorial's layers. Every other choice is a keyword argument named as its ``config.model``
field (:mod:`transformer.model.settings` describes each), defaulting to the tutorial's; the
paper's are ``configs/base.py``'s (README: "Where the tutorial and the paper differ").
"""

from typing import Optional

import keras

from transformer.model import settings
from transformer.model.attention import GlobalSelfAttention, padding_mask
from transformer.model.embedding import PositionalEmbedding
from transformer.model.feed_forward import FeedForward


class BaseLayer(settings.StoredArguments, keras.layers.Layer):
  """What an encoder and a decoder layer share: their keyword arguments and
  how they build their sub-layers.

  ``key_dim`` None is the tutorial's ``d_model`` (:func:`settings.head_size`), and
  ``attention_dropout_rate`` None its ``dropout_rate`` (:func:`settings.attention_dropout`).
  """

  # The keyword arguments a Stack hands to each of its layers.
  SETTINGS = ("d_model", "num_heads", "dff", "dropout_rate", "key_dim", "attention_dropout_rate",
              "residual_dropout_on_attention", "scale_attention_logits", "layer_norm_epsilon")

  def __init__(self, *, d_model: int, num_heads: int, dff: int, dropout_rate: float = 0.1,
               key_dim: Optional[int] = None, attention_dropout_rate: Optional[float] = None,
               residual_dropout_on_attention: bool = False,
               scale_attention_logits: bool = True, layer_norm_epsilon: float = 1e-3,
               **kwargs):
    super().__init__(**kwargs)
    # Resolved here, so that get_config records the values the sub-layers use.
    self.store_arguments(
        d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=dropout_rate,
        key_dim=settings.head_size(d_model, num_heads, key_dim=key_dim),
        attention_dropout_rate=settings.attention_dropout(dropout_rate, attention_dropout_rate),
        residual_dropout_on_attention=residual_dropout_on_attention,
        scale_attention_logits=scale_attention_logits, layer_norm_epsilon=layer_norm_epsilon)

  def attention(self, attention_class, name: str):
    """An attention sub-layer of this layer's settings."""
    return attention_class(
        self.num_heads, self.key_dim,
        dropout_rate=self.dropout_rate if self.residual_dropout_on_attention else 0.0,
        dropout=self.attention_dropout_rate,
        scale_attention_logits=self.scale_attention_logits,
        layer_norm_epsilon=self.layer_norm_epsilon, name=name)

  def feed_forward(self) -> FeedForward:
    return FeedForward(self.d_model, self.dff, self.dropout_rate, self.layer_norm_epsilon,
                       name="feed_forward")

  def compute_output_shape(self, x_shape, *args, **kwargs):
    return x_shape


@keras.saving.register_keras_serializable(package="transformer")
class EncoderLayer(BaseLayer):
  """Self-attention then feed-forward, each with residual, dropout and LayerNorm.

  ``call(x, attention_mask)``: x ``(batch, src_len, d_model)``, attention_mask
  ``(batch, 1, 1, src_len)`` from :func:`transformer.model.attention.padding_mask`
  (None: every position is real) → ``(batch, src_len, d_model)``.
  """

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.self_attention = self.attention(GlobalSelfAttention, "self_attention")
    self.ffn = self.feed_forward()

  def build(self, x_shape):
    self.self_attention.build(x_shape)
    self.ffn.build(x_shape)
    self.built = True

  def call(self, x, attention_mask=None, training=None):
    x = self.self_attention(x, attention_mask=attention_mask, training=training)
    return self.ffn(x, training=training)


class Stack(settings.StoredArguments, keras.layers.Layer):
  """A positional embedding and ``num_layers`` layers of ``layer_class``: what the encoder
  and the decoder share; ``tutorial_layers_name`` is the tutorial's name for :attr:`layers`.

  Keyword arguments: the :class:`PositionalEmbedding`'s and the :class:`BaseLayer`'s;
  ``embedding`` shares one between encoder and decoder (three-way sharing, §3.4).
  """

  layer_class = None
  tutorial_layers_name = None
  # The keyword arguments a Transformer hands to its encoder and decoder.
  SETTINGS = ("num_layers", *BaseLayer.SETTINGS, *PositionalEmbedding.SETTINGS)

  def __init__(self, *, num_layers: int, d_model: int, num_heads: int, dff: int,
               vocab_size: int, dropout_rate: float = 0.1, key_dim: Optional[int] = None,
               attention_dropout_rate: Optional[float] = None,
               residual_dropout_on_attention: bool = False,
               scale_attention_logits: bool = True, layer_norm_epsilon: float = 1e-3,
               max_position: int = 2048, positional_layout: str = "concatenated",
               positional_encoding: str = "sinusoid", positional_scale: float = 1.0,
               scale_embeddings: bool = True, embedding_initializer: str = "uniform",
               embedding: Optional[PositionalEmbedding] = None, **kwargs):
    super().__init__(**kwargs)
    self.store_arguments(
        num_layers=num_layers, vocab_size=int(vocab_size), d_model=d_model, num_heads=num_heads,
        dff=dff, dropout_rate=dropout_rate,
        # Resolved here, so that get_config records the values the sub-layers use.
        key_dim=settings.head_size(d_model, num_heads, key_dim=key_dim),
        attention_dropout_rate=settings.attention_dropout(dropout_rate, attention_dropout_rate),
        residual_dropout_on_attention=residual_dropout_on_attention,
        scale_attention_logits=scale_attention_logits, layer_norm_epsilon=layer_norm_epsilon,
        max_position=max_position, positional_layout=positional_layout,
        positional_encoding=positional_encoding, positional_scale=positional_scale,
        scale_embeddings=scale_embeddings, embedding_initializer=embedding_initializer)
    self.embedding = embedding or PositionalEmbedding(
        self.vocab_size, d_model, name="embedding",
        **self.arguments_of(PositionalEmbedding.SETTINGS))
    # A tuple: TF checkpoints would silently skip the TrackedList Keras 3 makes of a list.
    self.layers = tuple(self.layer_class(name=f"layer_{i}",
                                         **self.arguments_of(BaseLayer.SETTINGS))
                        for i in range(num_layers))

  @property
  def pos_embedding(self):
    """The tutorial's name for :attr:`embedding`."""
    return self.embedding

  def __getattr__(self, name):
    # The tutorial's enc_layers / dec_layers, not a property: .keras saving walks properties
    # in name order and would file the weights under "dec_layers", so saved files would not load.
    if name == self.tutorial_layers_name:
      return self.layers
    raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


@keras.saving.register_keras_serializable(package="transformer")
class Encoder(Stack):
  """Positional embedding and ``num_layers`` encoder layers (the tutorial's
  ``Encoder(num_layers=4, d_model=512, num_heads=8, dff=2048, vocab_size=8500)``).

  ``call(source_ids)``: ``(batch, src_len)`` int → ``(batch, src_len, d_model)``; the
  padding mask (from ``pad_id``) goes to every layer.
  """

  layer_class = EncoderLayer
  tutorial_layers_name = "enc_layers"

  def __init__(self, *, pad_id: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.store_arguments(pad_id=pad_id)

  def build(self, source_ids_shape):
    self.embedding.build(source_ids_shape)
    for layer in self.layers:
      layer.build((*source_ids_shape, self.d_model))
    self.built = True

  def call(self, source_ids, training=None, attention_mask=None):
    """``attention_mask``: the source's :func:`padding_mask`, when the caller has it."""
    if attention_mask is None:
      attention_mask = padding_mask(source_ids, self.pad_id)
    x = self.embedding(source_ids, training=training)
    for layer in self.layers:
      x = layer(x, attention_mask=attention_mask, training=training)
    return x

  def compute_output_shape(self, source_ids_shape):
    return (*source_ids_shape, self.d_model)
