"""The encoder (tutorial: "The encoder layer" and "The encoder"; paper §3.1).

The layers take the tutorial's arguments (``EncoderLayer(d_model=512,
num_heads=8, dff=2048)``, ``Encoder(num_layers=4, ..., vocab_size=8500)``) and
build the tutorial's layers with them; every other choice is a keyword argument
from :class:`LayerSettings` or :data:`EMBEDDING_OPTIONS`, whose defaults are the
tutorial's too. The paper's values are ``configs/base.py``'s (README: "Where the
tutorial and the paper differ").
"""

import dataclasses
from typing import Optional, Tuple

import keras

from transformer.attention import GlobalSelfAttention, padding_mask
from transformer.embedding import PositionalEmbedding
from transformer.feed_forward import FeedForward

# The positional embedding's settings as a stack names them, with their defaults
# (the tutorial's; see transformer.embedding.PositionalEmbedding).
EMBEDDING_OPTIONS = dict(max_position=2048, positional_layout="concatenated",
                         scale_embeddings=True, embedding_initializer="uniform",
                         positional_encoding="sinusoid", positional_scale=1.0)


@dataclasses.dataclass(frozen=True)
class LayerSettings:
  """What an encoder or decoder layer is built from, stated once: the layers
  and stacks take these fields as keyword arguments, keep them here, pass them
  on, and derive ``get_config`` from them.

  Attributes:
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
  d_model: int
  num_heads: int
  dff: int
  dropout_rate: float = 0.1
  key_dim: Optional[int] = None
  attention_dropout_rate: Optional[float] = None
  residual_dropout_on_attention: bool = False
  scale_attention_logits: bool = True
  layer_norm_epsilon: float = 1e-3

  def __post_init__(self):
    # Resolved here, so that get_config records the values the layers use.
    if self.key_dim is None:
      object.__setattr__(self, "key_dim", self.d_model)
    if self.attention_dropout_rate is None:
      object.__setattr__(self, "attention_dropout_rate", self.dropout_rate)

  @classmethod
  def take(cls, kwargs: dict) -> Tuple["LayerSettings", dict]:
    """The settings named in ``kwargs``, and the rest (for ``keras.layers.Layer``)."""
    names = {field.name for field in dataclasses.fields(cls)}
    return (cls(**{k: v for k, v in kwargs.items() if k in names}),
            {k: v for k, v in kwargs.items() if k not in names})

  def as_dict(self) -> dict:
    return dataclasses.asdict(self)

  def attention(self, name: str) -> dict:
    """Keyword arguments of an attention sub-layer (:class:`BaseAttention`)."""
    residual_rate = self.dropout_rate if self.residual_dropout_on_attention else 0.0
    return dict(num_heads=self.num_heads, key_dim=self.key_dim,
                dropout=self.attention_dropout_rate, residual_dropout_rate=residual_rate,
                scale_logits=self.scale_attention_logits,
                layer_norm_epsilon=self.layer_norm_epsilon, name=name)

  def feed_forward(self) -> FeedForward:
    return FeedForward(self.d_model, self.dff, self.dropout_rate, self.layer_norm_epsilon,
                       name="feed_forward")


@keras.saving.register_keras_serializable(package="transformer")
class EncoderLayer(keras.layers.Layer):
  """Self-attention then feed-forward, each with residual, dropout and LayerNorm.

  ``EncoderLayer(d_model=512, num_heads=8, dff=2048)`` is the tutorial's layer;
  the other :class:`LayerSettings` fields are keyword arguments too.

  ``call(x, attention_mask)``: x ``(batch, src_len, d_model)``, attention_mask
  ``(batch, 1, 1, src_len)`` from :func:`transformer.attention.padding_mask`
  (None: every position is real) → ``(batch, src_len, d_model)``.
  """

  def __init__(self, *, d_model: int, num_heads: int, dff: int, dropout_rate: float = 0.1,
               **kwargs):
    settings, kwargs = LayerSettings.take(dict(
        kwargs, d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=dropout_rate))
    super().__init__(**kwargs)
    self.settings = settings
    self.self_attention = GlobalSelfAttention(**self.settings.attention("self_attention"))
    self.ffn = self.settings.feed_forward()

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
    return {**super().get_config(), **self.settings.as_dict()}


class Stack(keras.layers.Layer):
  """A positional embedding and ``num_layers`` layers of one kind: what the
  encoder and the decoder share. Subclasses set ``layer_class``, and
  ``tutorial_layers_name``, the tutorial's name for :attr:`layers`.

  ``embedding`` lets a model share one :class:`PositionalEmbedding` between
  the encoder and the decoder (the paper's three-way weight sharing, §3.4).
  """

  layer_class = None
  tutorial_layers_name = None

  def __init__(self, *, num_layers: int, d_model: int, num_heads: int, dff: int,
               vocab_size: int, dropout_rate: float = 0.1, embedding=None, **kwargs):
    options = {name: kwargs.pop(name, default) for name, default in EMBEDDING_OPTIONS.items()}
    settings, kwargs = LayerSettings.take(dict(
        kwargs, d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=dropout_rate))
    super().__init__(**kwargs)
    self.embedding_options = options
    self.settings = settings
    self.num_layers = num_layers
    self.vocab_size = vocab_size = int(vocab_size)
    self.embedding = embedding or PositionalEmbedding(
        vocab_size, d_model, max_position=options["max_position"],
        layout=options["positional_layout"], scale_embeddings=options["scale_embeddings"],
        initializer=options["embedding_initializer"], dropout_rate=dropout_rate,
        positions=options["positional_encoding"], position_scale=options["positional_scale"],
        name="embedding")
    # A tuple, not a list: TF checkpoints do not follow the TrackedList that
    # Keras 3 makes of a list attribute, and would silently skip these layers.
    self.layers = tuple(self.layer_class(**self.settings.as_dict(), name=f"layer_{i}")
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

  def get_config(self):
    return {**super().get_config(), "num_layers": self.num_layers,
            "vocab_size": self.vocab_size, **self.settings.as_dict(),
            **self.embedding_options}


@keras.saving.register_keras_serializable(package="transformer")
class Encoder(Stack):
  """Positional embedding and a stack of ``num_layers`` encoder layers.

  ``Encoder(num_layers=4, d_model=512, num_heads=8, dff=2048, vocab_size=8500)``
  is the tutorial's encoder; ``pad_id``, the :class:`LayerSettings` fields and
  :data:`EMBEDDING_OPTIONS` are keyword arguments too.

  ``call(source_ids)``: ``(batch, src_len)`` int → ``(batch, src_len, d_model)``.
  The padding mask is computed from ``pad_id`` and given to every layer.
  """

  layer_class = EncoderLayer
  tutorial_layers_name = "enc_layers"

  def __init__(self, *, pad_id: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.pad_id = pad_id

  def build(self, source_ids_shape):
    self.embedding.build(source_ids_shape)
    for layer in self.layers:
      layer.build((*source_ids_shape, self.settings.d_model))
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
    return (*source_ids_shape, self.settings.d_model)

  def get_config(self):
    return {**super().get_config(), "pad_id": self.pad_id}
