"""The Transformer model (tutorial: "The Transformer"; paper §3, Figure 1)."""

from typing import Optional

import keras
from keras import ops

from transformer.attention import padding_mask
from transformer.config import HEAD_WIDTHS, OUTPUT_WEIGHTS, default_config
from transformer.decoder import Decoder
from transformer.embedding import PositionalEmbedding
from transformer.encoder import Encoder, LayerSettings


@keras.saving.register_keras_serializable(package="transformer")
class Transformer(keras.Model):
  """Encoder-decoder Transformer.

  ``model((source_ids, target_input_ids), training=...)`` with int ids
  ``(batch, src_len)`` and ``(batch, tgt_len)`` (0 is padding) returns float32
  logits ``(batch, tgt_len, target_vocab_size)``.

  The defaults are the tutorial's: its line ``Transformer(num_layers=4,
  d_model=128, num_heads=8, dff=512, input_vocab_size=7765,
  target_vocab_size=7010, dropout_rate=0.1)`` builds its 10,184,162-parameter
  model. The paper's choices are one argument each (all of them:
  ``configs/base.py`` and :meth:`from_model_config`):

  Args:
    head_width: ``"full"``: each of the ``num_heads`` heads is ``d_model`` wide
      (the tutorial's ``key_dim=d_model``), h times the attention parameters;
      ``"split"``: each head is ``d_model / num_heads`` wide (paper §3.2.2).
    output_weights: ``"untied"``: a separate output Dense layer with bias (the
      tutorial); ``"tied"``: logits = decoder output × (target embedding)ᵀ, one
      matrix for both (§3.4); ``"shared"``: additionally the source embedding is
      that same matrix (three-way sharing over a joint vocabulary, §3.4).
    attention_dropout_rate: None: ``dropout_rate``, as the tutorial's
      ``MultiHeadAttention(dropout=dropout_rate)``; the paper's is 0.
    residual_dropout_on_attention: False (tutorial) or True (paper §5.4).
    positional_layout: ``"concatenated"`` (tutorial) or ``"interleaved"`` (§3.5).
    layer_norm_epsilon: 1e-3 (Keras' default, the tutorial's) or 1e-6 (the
      paper's lineage).
    key_dim: if > 0, every head's width (d_k = d_v), overriding ``head_width``.
    The other arguments are described in :mod:`transformer.config`.
  """

  def __init__(self, *, num_layers: int, d_model: int, num_heads: int, dff: int,
               input_vocab_size: int, target_vocab_size: int, dropout_rate: float = 0.1,
               attention_dropout_rate: Optional[float] = None,
               residual_dropout_on_attention: bool = False, head_width: str = "full",
               positional_layout: str = "concatenated", scale_embeddings: bool = True,
               scale_attention_logits: bool = True, embedding_initializer: str = "uniform",
               output_weights: str = "untied", layer_norm_epsilon: float = 1e-3,
               max_position: int = 2048, pad_id: int = 0,
               positional_encoding: str = "sinusoid", positional_scale: float = 1.0,
               key_dim: int = 0, **kwargs):
    super().__init__(**kwargs)
    # The tutorial passes its tokenizers' vocabulary sizes as NumPy int32.
    input_vocab_size, target_vocab_size = int(input_vocab_size), int(target_vocab_size)
    if head_width not in HEAD_WIDTHS:
      raise ValueError(f"head_width: unknown value {head_width!r}; choose one of {HEAD_WIDTHS}")
    if output_weights not in OUTPUT_WEIGHTS:
      raise ValueError(f"output_weights: unknown value {output_weights!r}; "
                       f"choose one of {OUTPUT_WEIGHTS}")
    if head_width == "split" and d_model % num_heads:
      raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if output_weights == "shared" and input_vocab_size != target_vocab_size:
      raise ValueError("output_weights='shared' needs one joint vocabulary, got "
                       f"input_vocab_size={input_vocab_size} and "
                       f"target_vocab_size={target_vocab_size}")
    settings = LayerSettings(
        d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=dropout_rate,
        key_dim=key_dim or (d_model // num_heads if head_width == "split" else d_model),
        attention_dropout_rate=attention_dropout_rate,
        residual_dropout_on_attention=residual_dropout_on_attention,
        scale_attention_logits=scale_attention_logits, layer_norm_epsilon=layer_norm_epsilon)
    embedding_options = dict(max_position=max_position, positional_layout=positional_layout,
                             scale_embeddings=scale_embeddings,
                             embedding_initializer=embedding_initializer,
                             positional_encoding=positional_encoding,
                             positional_scale=positional_scale)
    self.hyperparameters = dict(
        num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
        input_vocab_size=input_vocab_size, target_vocab_size=target_vocab_size,
        dropout_rate=dropout_rate, attention_dropout_rate=settings.attention_dropout_rate,
        residual_dropout_on_attention=residual_dropout_on_attention, head_width=head_width,
        scale_attention_logits=scale_attention_logits, output_weights=output_weights,
        layer_norm_epsilon=layer_norm_epsilon, pad_id=pad_id, key_dim=key_dim,
        **embedding_options)
    self.output_weights = output_weights
    self.pad_id = pad_id
    self.target_vocab_size = target_vocab_size

    shared_embedding = None
    if output_weights == "shared":
      shared_embedding = PositionalEmbedding(
          input_vocab_size, d_model, max_position=max_position, layout=positional_layout,
          scale_embeddings=scale_embeddings, initializer=embedding_initializer,
          dropout_rate=dropout_rate, positions=positional_encoding,
          position_scale=positional_scale, name="shared_embedding")
    stack_args = dict(num_layers=num_layers, embedding=shared_embedding,
                      **settings.as_dict(), **embedding_options)
    self.encoder = Encoder(vocab_size=input_vocab_size, pad_id=pad_id, name="encoder",
                           **stack_args)
    self.decoder = Decoder(vocab_size=target_vocab_size, name="decoder", **stack_args)
    self.final_layer = (keras.layers.Dense(target_vocab_size, name="final_layer")
                        if output_weights == "untied" else None)

  @classmethod
  def from_model_config(cls, model_config, input_vocab_size: int, target_vocab_size: int):
    """Builds the model from ``config.model`` (see :mod:`transformer.config`).

    A field missing from ``model_config`` (a ``config.json`` written before the
    field existed) takes :func:`default_config`'s value, which is what such runs
    were trained with, not the constructor's (the tutorial's) default.
    """
    fields = {**default_config().model.to_dict(), **model_config.to_dict()}
    return cls(input_vocab_size=input_vocab_size, target_vocab_size=target_vocab_size,
               **fields)

  def build(self, inputs_shape=None):
    # Called with the shapes of (source_ids, target_ids); builds every weight so
    # that a model restored from a .keras file can load its variables.
    source_shape, target_shape = inputs_shape or ((None, None), (None, None))
    self.encoder.build(tuple(source_shape))
    self.decoder.build(tuple(target_shape), (*source_shape, self.hyperparameters["d_model"]))
    if self.final_layer is not None:
      self.final_layer.build((*target_shape, self.hyperparameters["d_model"]))
    self.built = True

  @property
  def output_projection(self):
    """The pre-softmax weight: ``(d_model, vocab)`` kernel, or the ``(vocab, d_model)``
    target embedding itself when tied or shared (the same variable, not a copy)."""
    if self.final_layer is not None:
      return self.final_layer.kernel
    return self.decoder.embedding.embeddings

  def encode(self, source_ids, training=None):
    """Returns the encoder output ``(batch, src_len, d_model)`` and the source padding mask."""
    mask = padding_mask(source_ids, self.pad_id)
    return self.encoder(source_ids, training=training, attention_mask=mask), mask

  def logits(self, x):
    """Pre-softmax projection of decoder outputs ``(..., d_model)`` → float32 ``(..., vocab)``."""
    if self.final_layer is not None:
      logits = self.final_layer(x)
    else:
      embeddings = ops.cast(self.decoder.embedding.embeddings, x.dtype)
      # A 2-D matmul: the gradient of the equivalent einsum is much slower on CPU.
      flat = ops.reshape(x, (-1, ops.shape(x)[-1]))
      logits = ops.reshape(ops.matmul(flat, ops.transpose(embeddings)),
                           (*ops.shape(x)[:-1], -1))
    return ops.cast(logits, "float32")

  def call(self, inputs, training=None):
    source_ids, target_ids = inputs
    context, source_mask = self.encode(source_ids, training=training)
    x = self.decoder(target_ids, context, source_mask=source_mask, training=training)
    return self.logits(x)

  def initial_cache(self, context, max_length):
    """Decoding state for :meth:`decode_step` (see :meth:`Decoder.initial_cache`)."""
    return self.decoder.initial_cache(context, max_length)

  def reorder_cache(self, cache, gather):
    """The cache with ``gather`` applied to its per-hypothesis rows (see
    :meth:`Decoder.reorder_cache`)."""
    return self.decoder.reorder_cache(cache, gather)

  def decode_step(self, ids, index, cache, source_mask):
    """Logits ``(batch, vocab)`` for the token after ``ids`` ``(batch,)`` at position
    ``index``, the updated cache, and the last layer's cross-attention
    ``(batch, heads, src_len)``. Exactly the last position of a full decoder pass."""
    x, cache, weights = self.decoder.step(ids, index, cache, source_mask)
    return self.logits(x[:, 0]), cache, weights[:, :, 0]

  def get_config(self):
    return {**super().get_config(), **self.hyperparameters}
