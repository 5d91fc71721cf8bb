"""The Transformer model (tutorial: "The Transformer"; paper §3, Figure 1)."""

from typing import Optional

import keras
from keras import ops

from transformer.model import settings
from transformer.model.attention import MultiHeadAttention, padding_mask
from transformer.model.decoder import Decoder
from transformer.model.embedding import PositionalEmbedding
from transformer.model.encoder import Encoder, Stack


@keras.saving.register_keras_serializable(package="transformer")
class Transformer(settings.StoredArguments, keras.Model):
  """Encoder-decoder Transformer.

  ``model((source_ids, target_input_ids), training=...)`` with int ids
  ``(batch, src_len)`` and ``(batch, tgt_len)`` (0 is padding) returns float32
  logits ``(batch, tgt_len, target_vocab_size)``.

  The keyword arguments are ``config.model``'s fields (:mod:`transformer.model.settings`
  describes each, tutorial against paper). The defaults are the tutorial's: its line
  ``Transformer(num_layers=4, d_model=128, num_heads=8, dff=512, input_vocab_size=7765,
  target_vocab_size=7010, dropout_rate=0.1)`` builds its 10,184,162-parameter model, as
  ``configs/tutorial.py`` does; the paper's are ``configs/base.py``'s. ``head_width`` and
  ``output_weights`` act here; ``attention_dropout_rate`` None and ``key_dim`` 0 mean unset.
  """

  def __init__(self, *, num_layers: int, d_model: int, num_heads: int, dff: int,
               input_vocab_size: int, target_vocab_size: int, dropout_rate: float = 0.1,
               attention_dropout_rate: Optional[float] = None,
               residual_dropout_on_attention: bool = False, head_width: str = "full",
               key_dim: int = 0, scale_attention_logits: bool = True,
               layer_norm_epsilon: float = 1e-3, max_position: int = 2048,
               positional_layout: str = "concatenated", positional_encoding: str = "sinusoid",
               positional_scale: float = 1.0, scale_embeddings: bool = True,
               embedding_initializer: str = "uniform", output_weights: str = "untied",
               pad_id: int = 0, **kwargs):
    super().__init__(**kwargs)
    self.store_arguments(
        num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
        # The tutorial passes its tokenizers' vocabulary sizes as NumPy int32.
        input_vocab_size=int(input_vocab_size), target_vocab_size=int(target_vocab_size),
        dropout_rate=dropout_rate,
        # Resolved here, so that get_config records the value the layers use.
        attention_dropout_rate=settings.attention_dropout(dropout_rate, attention_dropout_rate),
        residual_dropout_on_attention=residual_dropout_on_attention, head_width=head_width,
        key_dim=key_dim, scale_attention_logits=scale_attention_logits,
        layer_norm_epsilon=layer_norm_epsilon, max_position=max_position,
        positional_layout=positional_layout, positional_encoding=positional_encoding,
        positional_scale=positional_scale, scale_embeddings=scale_embeddings,
        embedding_initializer=embedding_initializer, output_weights=output_weights,
        pad_id=pad_id)
    # Both routes, from_model_config and direct construction, come through here.
    settings.validate_model(self.arguments_of(self.argument_names))
    self.encoder, self.decoder = self._stacks()
    self.final_layer = (keras.layers.Dense(self.target_vocab_size, name="final_layer")
                        if output_weights == "untied" else None)

  def _stacks(self):
    """The encoder and the decoder of this model's settings, sharing one
    embedding when ``output_weights="shared"``."""
    shared_embedding = None
    if self.output_weights == "shared":
      shared_embedding = PositionalEmbedding(
          self.input_vocab_size, self.d_model, name="shared_embedding",
          **self.arguments_of(PositionalEmbedding.SETTINGS))
    stack_settings = {
        **self.arguments_of(Stack.SETTINGS), "embedding": shared_embedding,
        "key_dim": settings.head_size(self.d_model, self.num_heads, self.head_width,
                                      self.key_dim)}
    return (Encoder(vocab_size=self.input_vocab_size, pad_id=self.pad_id, name="encoder",
                    **stack_settings),
            Decoder(vocab_size=self.target_vocab_size, name="decoder", **stack_settings))

  @classmethod
  def from_model_config(cls, model_config, input_vocab_size: int, target_vocab_size: int):
    """The model of ``config.model``: the one factory from a configuration to the layers.

    A field missing from an older ``config.json`` takes ``config.model``'s default (the
    paper's, :func:`~transformer.model.settings.paper_settings`), not the tutorial's.
    """
    fields = {**settings.paper_settings(), **model_config.to_dict()}
    return cls(input_vocab_size=input_vocab_size, target_vocab_size=target_vocab_size,
               **fields)

  def build(self, inputs_shape=None):
    # Every weight, so that a model restored from a .keras file can load its variables.
    source_shape, target_shape = inputs_shape or ((None, None), (None, None))
    self.encoder.build(tuple(source_shape))
    self.decoder.build(tuple(target_shape), (*source_shape, self.d_model))
    if self.final_layer is not None:
      self.final_layer.build((*target_shape, self.d_model))
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

  def use_fused_attention(self, enabled: bool = True):
    """Lets every attention layer use ``keras.ops.dot_product_attention`` (cuDNN flash
    attention under JAX on a GPU) where no attention dropout is in effect; then
    ``last_attn_scores`` are None, so off by default (the tutorial plots them). A runtime
    switch, not a setting: weights and config.json are the same either way."""
    for layer in self._flatten_layers():  # pylint: disable=protected-access
      if isinstance(layer, MultiHeadAttention):
        layer.fused = enabled

  def initial_cache(self, context, max_length):
    """Decoding state for :meth:`decode_step` (see :meth:`Decoder.initial_cache`)."""
    return self.decoder.initial_cache(context, max_length)

  def reorder_cache(self, cache, gather):
    """See :meth:`Decoder.reorder_cache`."""
    return self.decoder.reorder_cache(cache, gather)

  def decode_step(self, ids, index, cache, source_mask):
    """Logits ``(batch, vocab)`` for the token after ``ids`` ``(batch,)`` at position
    ``index``, the updated cache, and the last layer's cross-attention
    ``(batch, heads, src_len)``. Exactly the last position of a full decoder pass."""
    x, cache, weights = self.decoder.step(ids, index, cache, source_mask)
    return self.logits(x[:, 0]), cache, weights[:, :, 0]
