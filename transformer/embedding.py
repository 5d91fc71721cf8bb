"""Positional encoding and token embedding (tutorial: "The embedding and positional encoding layer").

Paper §3.4 and §3.5.
"""

import keras
from keras import ops
import numpy as np

from transformer.config import EMBEDDING_INITIALIZERS, POSITIONAL_ENCODINGS, POSITIONAL_LAYOUTS


def embedding_initializer(name: str, d_model: int) -> keras.initializers.Initializer:
  """The token embeddings' initializer (``config.model.embedding_initializer``).

  ``"uniform"``: Keras' ``Embedding`` default, U(-0.05, 0.05), standard deviation
  0.05/√3 ≈ 0.029 whatever d_model (the tutorial's, by not choosing).
  ``"normal"``: N(0, σ = d_model^-0.5), the paper's lineage (tensor2tensor):
  × √d_model gives unit-variance inputs, and tied output logits
  x·Eᵀ of a unit-variance x have unit variance too.
  """
  if name not in EMBEDDING_INITIALIZERS:
    raise ValueError(f"unknown embedding initializer {name!r}; "
                     f"choose one of {', '.join(EMBEDDING_INITIALIZERS)}")
  if name == "uniform":
    return keras.initializers.RandomUniform(-0.05, 0.05)
  return keras.initializers.RandomNormal(0.0, d_model ** -0.5)


def positional_encoding(length: int, depth: int, layout: str = "concatenated"):
  """The sinusoidal positional encoding of §3.5, shape ``(length, depth)``, a
  float32 tensor of the Keras backend.

  PE(pos, 2i) = sin(pos / 10000^(2i/depth)), PE(pos, 2i+1) = cos(pos / 10000^(2i/depth)).

  Args:
    length: number of positions.
    depth: number of channels (d_model); must be even.
    layout: ``"concatenated"`` (the default, the tutorial's) puts all sines in
      channels [0, depth/2) and all cosines in [depth/2, depth).
      ``"interleaved"`` puts sin(pos·ω_i) in channel 2i and cos(pos·ω_i) in
      channel 2i+1, as the paper's formula and the 2021 tutorial do. Same
      values, channels permuted: both are correct, but a model trained with
      one layout does not work with the other.
  """
  if layout not in POSITIONAL_LAYOUTS:
    raise ValueError(f"unknown positional layout {layout!r}; "
                     f"choose one of {', '.join(POSITIONAL_LAYOUTS)}")
  if depth % 2:
    raise ValueError(f"depth must be even, got {depth}")
  positions = np.arange(length, dtype=np.float64)[:, np.newaxis]
  frequencies = 1.0 / 10000.0 ** (np.arange(0, depth, 2, dtype=np.float64) / depth)
  angles = positions * frequencies  # (length, depth / 2)
  if layout == "interleaved":
    encoding = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(length, depth)
  else:
    encoding = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)
  return ops.convert_to_tensor(encoding, dtype="float32")


@keras.saving.register_keras_serializable(package="transformer")
class PositionalEmbedding(keras.layers.Layer):
  """Token embedding × √d_model + positional encoding, then dropout (§3.4, §3.5, §5.4).

  Input: token ids ``(batch, length)``. Output: ``(batch, length, d_model)``.

  The √d_model factor brings the embeddings to the scale of the positional
  encoding, whose entries are in [-1, 1] (root mean square 1/√2 at every
  position): it is what makes the N(0, d_model^-1) ``initializer="normal"``,
  natural for tied output weights, give unit-RMS inputs. With Keras' default
  U(-0.05, 0.05) (``"uniform"``) the product's RMS is 0.029·√d_model, below the
  encoding's up to d_model ≈ 600. ``scale_embeddings=False`` is the ablation;
  ``notebooks/scaling.ipynb`` measures both.

  ``positions="learned"`` (``config.model.positional_encoding``) adds a
  trainable ``(max_position, d_model)`` table instead of the sinusoids (Table 3,
  row E), initialized like the token embeddings (``initializer``); ``layout``
  then does not apply. ``position_scale`` (``config.model.positional_scale``)
  multiplies the positions (sinusoids or table) before they are added: with
  ``scale_embeddings=False`` and d_model^-0.5 it keeps the scaled model's ratio
  of token to position at the unscaled magnitude.

  Padding is not masked here: masks are built from the token ids and passed to
  the attention layers explicitly (see ``attention.py``). The dropout that the
  tutorial's ``Encoder`` and ``Decoder`` apply after their embedding is this
  layer's last step. ``vocab_size`` may be a NumPy or TensorFlow integer, as the
  tutorial's ``tokenizers.pt.get_vocab_size().numpy()`` is.
  """

  def __init__(self, vocab_size: int, d_model: int, *, max_position: int = 2048,
               layout: str = "concatenated", scale_embeddings: bool = True,
               initializer: str = "uniform", dropout_rate: float = 0.1,
               positions: str = "sinusoid", position_scale: float = 1.0, **kwargs):
    super().__init__(**kwargs)
    if positions not in POSITIONAL_ENCODINGS:
      raise ValueError(f"unknown positional encoding {positions!r}; "
                       f"choose one of {', '.join(POSITIONAL_ENCODINGS)}")
    # Keras' Embedding accepts only Python ints.
    self.vocab_size = vocab_size = int(vocab_size)
    self.d_model = d_model
    self.max_position = max_position
    self.layout = layout
    self.scale_embeddings = scale_embeddings
    self.initializer = initializer
    self.dropout_rate = dropout_rate
    self.positions = positions
    self.position_scale = position_scale
    self.token_embedding = keras.layers.Embedding(
        vocab_size, d_model, embeddings_initializer=embedding_initializer(initializer, d_model),
        name="token_embedding")
    self.dropout = keras.layers.Dropout(dropout_rate)
    self.position_table = None
    if positions == "learned":
      self.position_table = keras.layers.Embedding(
          max_position, d_model,
          embeddings_initializer=embedding_initializer(initializer, d_model),
          name="position_embedding")
    else:
      # × 1.0 is exact: the default is the sinusoid table bit for bit.
      self.encoding = positional_encoding(max_position, d_model, layout) * position_scale

  def build(self, ids_shape):
    self.token_embedding.build(ids_shape)
    if self.position_table is not None:
      self.position_table.build((self.max_position,))
    self.built = True

  def encode_positions(self, offset, length):
    """The encodings of positions ``offset .. offset + length - 1``: ``(length, d_model)``."""
    # ops.slice, not [offset:offset + length]: JAX slices at a traced offset
    # (decoding's position) only with static sizes.
    if self.position_table is None:
      return ops.slice(self.encoding, (offset, 0), (length, self.d_model))
    table = ops.convert_to_tensor(self.position_table.embeddings)
    rows = ops.slice(table, (offset, 0), (length, self.d_model))
    return rows * ops.cast(self.position_scale, rows.dtype)

  @property
  def embeddings(self):
    """The embedding matrix ``(vocab_size, d_model)``, shared with tied output layers."""
    return self.token_embedding.embeddings

  def call(self, ids, training=None, offset=0):
    """Embeds ``ids`` placed at positions ``offset, offset + 1, ...``.

    ``offset`` lets incremental decoding embed one token at its position.
    """
    x = self.token_embedding(ids)
    if self.scale_embeddings:
      x = x * ops.cast(ops.sqrt(float(self.d_model)), x.dtype)
    positions = self.encode_positions(offset, ops.shape(ids)[1])
    x = x + ops.cast(positions, x.dtype)[None]
    return self.dropout(x, training=training)

  def compute_output_shape(self, ids_shape):
    return (*ids_shape, self.d_model)

  def get_config(self):
    return {**super().get_config(), "vocab_size": self.vocab_size, "d_model": self.d_model,
            "max_position": self.max_position, "layout": self.layout,
            "scale_embeddings": self.scale_embeddings, "initializer": self.initializer,
            "dropout_rate": self.dropout_rate, "positions": self.positions,
            "position_scale": self.position_scale}
