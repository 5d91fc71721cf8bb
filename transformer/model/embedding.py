"""Positional encoding and token embedding (paper §3.4, §3.5).

Tutorial: "The embedding and positional encoding layer".
"""

import keras
from keras import ops
import numpy as np

from transformer.model import settings


def positional_encoding(length: int, depth: int, positional_layout: str = "concatenated"):
  """The sinusoidal positional encoding of §3.5: float32 ``(length, depth)``, depth = d_model.

  PE(pos, 2i) = sin(pos / 10000^(2i/depth)), PE(pos, 2i+1) = cos(pos / 10000^(2i/depth)).
  ``positional_layout="concatenated"`` (the tutorial's) puts all sines in channels
  [0, depth/2), all cosines after; ``"interleaved"`` puts them in channels 2i and 2i+1, as
  the paper's formula (and the 2021 tutorial). Same values, channels permuted: a model
  trained with one layout does not work with the other.
  """
  settings.validate_model({"d_model": depth, "positional_layout": positional_layout})
  positions = np.arange(length, dtype=np.float64)[:, np.newaxis]
  frequencies = 1.0 / 10000.0 ** (np.arange(0, depth, 2, dtype=np.float64) / depth)
  angles = positions * frequencies  # (length, depth / 2)
  if positional_layout == "interleaved":
    encoding = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(length, depth)
  else:
    encoding = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
  return ops.convert_to_tensor(encoding, dtype="float32")


@keras.saving.register_keras_serializable(package="transformer")
class PositionalEmbedding(settings.StoredArguments, keras.layers.Layer):
  """Token embedding × √d_model + positional encoding, then dropout (§3.4, §3.5, §5.4).

  Token ids ``(batch, length)`` → ``(batch, length, d_model)``. ``PositionalEmbedding(
  vocab_size, d_model)`` is the tutorial's layer (``vocab_size`` may be its NumPy integer);
  the other keyword arguments are ``config.model``'s fields (:mod:`transformer.model.settings`).

  The √d_model factor brings the embeddings to the scale of the positional encoding (RMS
  1/√2): unit RMS with ``embedding_initializer="normal"``; with ``"uniform"`` the RMS is
  0.029·√d_model, below the encoding's up to d_model ≈ 600 (``notebooks/scaling.ipynb``).

  Padding is not masked here (see :mod:`transformer.model.attention`). The dropout the
  tutorial's ``Encoder`` and ``Decoder`` apply after their embedding is this layer's last step.
  """

  # The keyword arguments a Stack or a Transformer hands to its embedding.
  SETTINGS = ("dropout_rate", "max_position", "positional_layout", "positional_encoding",
              "positional_scale", "scale_embeddings", "embedding_initializer")

  def __init__(self, vocab_size: int, d_model: int, *, dropout_rate: float = 0.1,
               max_position: int = 2048, positional_layout: str = "concatenated",
               positional_encoding: str = "sinusoid", positional_scale: float = 1.0,
               scale_embeddings: bool = True, embedding_initializer: str = "uniform",
               **kwargs):
    super().__init__(**kwargs)
    self.store_arguments(  # Keras' Embedding accepts only Python ints.
        vocab_size=int(vocab_size), d_model=d_model, dropout_rate=dropout_rate,
        max_position=max_position, positional_layout=positional_layout,
        positional_encoding=positional_encoding, positional_scale=positional_scale,
        scale_embeddings=scale_embeddings, embedding_initializer=embedding_initializer)
    settings.validate_model(self.arguments_of(self.argument_names))
    vocab_size = self.vocab_size
    self.token_embedding = self._table(vocab_size, "token_embedding")
    self.dropout = keras.layers.Dropout(dropout_rate)
    self.position_table = None
    if positional_encoding == "learned":
      self.position_table = self._table(max_position, "position_embedding")
    else:
      self.encoding = self._sinusoids()

  def _table(self, rows: int, name: str) -> keras.layers.Embedding:
    """A ``(rows, d_model)`` embedding drawn as ``embedding_initializer`` says.

    ``"uniform"``: Keras' default (the tutorial's), σ = 0.05/√3 ≈ 0.029 whatever d_model.
    ``"normal"``: σ = d_model^-0.5 (tensor2tensor): × √d_model gives unit-variance inputs,
    and tied output logits x·Eᵀ of a unit-variance x have unit variance too.
    """
    if self.embedding_initializer == "uniform":
      initializer = keras.initializers.RandomUniform(-0.05, 0.05)
    else:
      initializer = keras.initializers.RandomNormal(0.0, self.d_model ** -0.5)
    return keras.layers.Embedding(rows, self.d_model, embeddings_initializer=initializer,
                                  name=name)

  def _sinusoids(self):
    """The §3.5 table ``(max_position, d_model)`` × ``positional_scale``. A method: in
    ``__init__`` the argument ``positional_encoding`` hides the function."""
    return (positional_encoding(self.max_position, self.d_model, self.positional_layout)
            * self.positional_scale)

  def build(self, ids_shape):
    self.token_embedding.build(ids_shape)
    if self.position_table is not None:
      self.position_table.build((self.max_position,))
    self.built = True

  def encode_positions(self, offset, length):
    """The encodings of positions ``offset .. offset + length - 1``: ``(length, d_model)``."""
    # ops.slice: JAX slices at a traced offset (decoding's position) only with static sizes.
    if self.position_table is None:
      return ops.slice(self.encoding, (offset, 0), (length, self.d_model))
    table = ops.convert_to_tensor(self.position_table.embeddings)
    rows = ops.slice(table, (offset, 0), (length, self.d_model))
    return rows * ops.cast(self.positional_scale, rows.dtype)

  @property
  def embeddings(self):
    """The embedding matrix ``(vocab_size, d_model)``, shared with tied output layers."""
    return self.token_embedding.embeddings

  def call(self, ids, training=None, offset=0):
    """Embeds ``ids`` at positions ``offset, offset + 1, ...`` (decoding embeds one token)."""
    x = self.token_embedding(ids)
    if self.scale_embeddings:
      x = x * ops.cast(ops.sqrt(float(self.d_model)), x.dtype)
    positions = self.encode_positions(offset, ops.shape(ids)[1])
    x = x + ops.cast(positions, x.dtype)[None]
    return self.dropout(x, training=training)

  def compute_output_shape(self, ids_shape):
    return (*ids_shape, self.d_model)
