"""The encoder (tutorial: "The encoder layer" and "The encoder"; paper §3.1).

The layers take the tutorial's arguments (``EncoderLayer(d_model=512,
num_heads=8, dff=2048)``, ``Encoder(num_layers=4, ..., vocab_size=8500)``) and
build the tutorial's layers with them. Every other choice is a keyword argument
named as its ``config.model`` field (:mod:`transformer.model.settings`), stored
once as an attribute of that name, from which ``get_config`` is derived. The defaults
are the tutorial's; the paper's values are ``configs/base.py``'s (README:
"Where the tutorial and the paper differ").
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

  Args:
    d_model, num_heads, dff, dropout_rate: the tutorial's arguments.
    key_dim: the width of each head. None: ``d_model``, the tutorial's
      ``key_dim=d_model``; the paper's is ``d_model / num_heads`` (§3.2.2).
    attention_dropout_rate: dropout on the attention weights. None:
      ``dropout_rate``, as the tutorial passes ``dropout=dropout_rate`` to
      ``MultiHeadAttention``; the paper has none.
    residual_dropout_on_attention: whether attention sub-layer outputs are
      dropped out too (paper §5.4); the tutorial drops only the feed-forward's.
    scale_attention_logits: QKᵀ/√d_k (eq. 1); False is the ablation.
    layer_norm_epsilon: every LayerNorm's ε: 1e-3 is Keras' default and so the
      tutorial's; 1e-6 the paper's lineage (tensor2tensor).
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

  ``EncoderLayer(d_model=512, num_heads=8, dff=2048)`` is the tutorial's layer;
  the other :class:`BaseLayer` arguments are keyword arguments too.

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
  """A positional embedding and ``num_layers`` layers of one kind: what the
  encoder and the decoder share. Subclasses set ``layer_class``, and
  ``tutorial_layers_name``, the tutorial's name for :attr:`layers`.

  Its keyword arguments are the :class:`PositionalEmbedding`'s and the
  :class:`BaseLayer`'s, under the same names, with the same (the tutorial's)
  defaults. ``embedding`` lets a model share one :class:`PositionalEmbedding`
  between the encoder and the decoder (the paper's three-way weight sharing,
  §3.4).
  """

  layer_class = None
  tutorial_layers_name = None
  # The keyword arguments a Transformer hands to its encoder and decoder
  # (dropout_rate is in both).
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
    # A tuple, not a list: TF checkpoints do not follow the TrackedList that
    # Keras 3 makes of a list attribute, and would silently skip these layers.
    self.layers = tuple(self.layer_class(name=f"layer_{i}",
                                         **self.arguments_of(BaseLayer.SETTINGS))
                        for i in range(num_layers))

  @property
  def pos_embedding(self):
    """The tutorial's name for :attr:`embedding`."""
    return self.embedding

  def __getattr__(self, name):
    # The tutorial's enc_layers / dec_layers, served here rather than by a
    # property: Keras' .keras saving walks properties in name order and would
    # file the weights under "dec_layers" instead of "layers", so that files
    # written before would no longer load (tests/notebooks/test_tutorial.py).
    if name == self.tutorial_layers_name:
      return self.layers
    raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


@keras.saving.register_keras_serializable(package="transformer")
class Encoder(Stack):
  """Positional embedding and a stack of ``num_layers`` encoder layers.

  ``Encoder(num_layers=4, d_model=512, num_heads=8, dff=2048, vocab_size=8500)``
  is the tutorial's encoder; ``pad_id`` and the :class:`Stack` arguments are
  keyword arguments too.

  ``call(source_ids)``: ``(batch, src_len)`` int → ``(batch, src_len, d_model)``.
  The padding mask is computed from ``pad_id`` and given to every layer.
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
