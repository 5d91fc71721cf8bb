"""The TensorFlow tutorial's Transformer, written here as a reference for tests and the lab.

"Neural machine translation with a Transformer and Keras" builds its model from
Keras layers and relies on Keras' implicit masks: ``Embedding(mask_zero=True)``
attaches a padding mask to its output and ``MultiHeadAttention`` reads it from
its inputs. This module mirrors that design (its own code, not the tutorial's
text) so that the tests (``tests/notebooks/test_tutorial.py``, ``lab/tests``) and
the lab's benchmarks (``lab/bench/speed.py``, ``learning_parity.py``) can run the
tutorial's model, its ``fit`` step and its ``Translator`` loop beside this project's.

One change is needed for it to compute what the tutorial means under Keras 3:
``MultiHeadAttention`` deletes the masks of the tensors it is given and ``Add``
does not carry them (see the README, "Masks are explicit"), so later layers
would attend to padding. Each sub-layer here re-attaches the masks it found on
its inputs to its output (and to the encoder output it attended over), so that
every attention call sees the padding mask, as in the Keras 2 the tutorial was
written for. Nothing else differs from the tutorial; in particular its
``LayerNormalization`` keeps Keras' default ε = 1e-3 (``configs/tutorial.py``
sets ``model.layer_norm_epsilon`` to it; the paper-lineage default is 1e-6),
and its learning-rate schedule gives 0 at the first step (it is called with
the optimizer's iteration counter, which starts at 0).

Token ids: 0 is padding, as with the tutorial's tokenizers.
"""

import keras
from keras.src.backend import get_keras_mask, set_keras_mask
import numpy as np
import tensorflow as tf

MAX_TOKENS = 128  # The tutorial's longest sequence and its Translator's output limit.


def positional_encoding(length, depth):
  """The tutorial's layout: sines in the first ``depth/2`` channels, cosines in the
  rest (paper §3.5 up to a permutation). ``(length, depth)`` float32."""
  half = depth // 2
  angles = (np.arange(length)[:, np.newaxis]
            / 10000.0 ** (np.arange(half)[np.newaxis, :] / half))
  return tf.constant(np.concatenate([np.sin(angles), np.cos(angles)], -1), tf.float32)


class PositionalEmbedding(keras.layers.Layer):
  """ids ``(batch, length)`` → ``(batch, length, d_model)`` carrying the padding mask."""

  def __init__(self, vocab_size, d_model):
    super().__init__()
    self.d_model = d_model
    self.embedding = keras.layers.Embedding(vocab_size, d_model, mask_zero=True)
    self.pos_encoding = positional_encoding(2048, d_model)

  def compute_mask(self, ids, mask=None):
    return self.embedding.compute_mask(ids, mask)

  def call(self, ids):
    x = self.embedding(ids) * tf.math.sqrt(tf.cast(self.d_model, tf.float32))
    return x + self.pos_encoding[tf.newaxis, :tf.shape(ids)[1]]


class MaskCarrier(keras.layers.Layer):
  """A layer whose output carries the Keras mask of its first input.

  Keras sets it on the output after ``call`` (from the mask it saw on the input
  before ``call``, so MHA deleting it inside does not matter). The tutorial's
  layers do not declare this and, under Keras 3, lose the mask.
  """

  def __init__(self):
    super().__init__()
    self.supports_masking = True


class BaseAttention(MaskCarrier):
  """``LayerNorm(x + MultiHeadAttention(...))``; keyword arguments go to Keras' MHA."""

  def __init__(self, **mha_args):
    super().__init__()
    self.mha = keras.layers.MultiHeadAttention(**mha_args)
    self.layernorm = keras.layers.LayerNormalization()
    self.add = keras.layers.Add()

  def residual(self, x, attended):
    return self.layernorm(self.add([x, attended]))


class CrossAttention(BaseAttention):
  """x ``(batch, tgt_len, d_model)`` attends over context ``(batch, src_len, d_model)``;
  keeps the weights ``(batch, heads, tgt_len, src_len)`` in ``last_attn_scores``."""

  def call(self, x, context):
    context_mask = get_keras_mask(context)
    attended, self.last_attn_scores = self.mha(query=x, key=context, value=context,
                                               return_attention_scores=True)
    # Keras' MHA deleted it; the next decoder layer attends over the same tensor.
    set_keras_mask(context, context_mask)
    return self.residual(x, attended)


class GlobalSelfAttention(BaseAttention):
  """Encoder self-attention over ``(batch, src_len, d_model)``."""

  def call(self, x):
    return self.residual(x, self.mha(query=x, key=x, value=x))


class CausalSelfAttention(BaseAttention):
  """Decoder self-attention over ``(batch, tgt_len, d_model)``, position i sees ≤ i."""

  def call(self, x):
    return self.residual(x, self.mha(query=x, key=x, value=x, use_causal_mask=True))


class FeedForward(MaskCarrier):
  """``LayerNorm(x + Dropout(Dense(ReLU(Dense(x)))))`` on ``(batch, length, d_model)``."""

  def __init__(self, d_model, dff, dropout_rate=0.1):
    super().__init__()
    self.inner = keras.layers.Dense(dff, activation="relu")
    self.outer = keras.layers.Dense(d_model)
    self.dropout = keras.layers.Dropout(dropout_rate)
    self.add = keras.layers.Add()
    self.layer_norm = keras.layers.LayerNormalization()

  def call(self, x):
    y = self.dropout(self.outer(self.inner(x)))
    return self.layer_norm(self.add([x, y]))


class EncoderLayer(MaskCarrier):

  def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
    super().__init__()
    self.self_attention = GlobalSelfAttention(num_heads=num_heads, key_dim=d_model,
                                              dropout=dropout_rate)
    self.ffn = FeedForward(d_model, dff, dropout_rate)

  def call(self, x):
    return self.ffn(self.self_attention(x))


class Encoder(keras.layers.Layer):
  """ids ``(batch, src_len)`` → ``(batch, src_len, d_model)`` carrying the padding mask."""

  def __init__(self, *, num_layers, d_model, num_heads, dff, vocab_size, dropout_rate=0.1):
    super().__init__()
    self.pos_embedding = PositionalEmbedding(vocab_size, d_model)
    self.enc_layers = [EncoderLayer(d_model=d_model, num_heads=num_heads, dff=dff,
                                    dropout_rate=dropout_rate) for _ in range(num_layers)]
    self.dropout = keras.layers.Dropout(dropout_rate)

  def call(self, ids):
    x = self.dropout(self.pos_embedding(ids))
    for layer in self.enc_layers:
      x = layer(x)
    return x


class DecoderLayer(MaskCarrier):

  def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
    super().__init__()
    self.causal_self_attention = CausalSelfAttention(num_heads=num_heads, key_dim=d_model,
                                                     dropout=dropout_rate)
    self.cross_attention = CrossAttention(num_heads=num_heads, key_dim=d_model,
                                          dropout=dropout_rate)
    self.ffn = FeedForward(d_model, dff, dropout_rate)

  def call(self, x, context):
    x = self.cross_attention(self.causal_self_attention(x), context)
    self.last_attn_scores = self.cross_attention.last_attn_scores
    return self.ffn(x)


class Decoder(keras.layers.Layer):
  """ids ``(batch, tgt_len)`` and context → ``(batch, tgt_len, d_model)``."""

  def __init__(self, *, num_layers, d_model, num_heads, dff, vocab_size, dropout_rate=0.1):
    super().__init__()
    self.pos_embedding = PositionalEmbedding(vocab_size, d_model)
    self.dropout = keras.layers.Dropout(dropout_rate)
    self.dec_layers = [DecoderLayer(d_model=d_model, num_heads=num_heads, dff=dff,
                                    dropout_rate=dropout_rate) for _ in range(num_layers)]
    self.last_attn_scores = None

  def call(self, ids, context):
    x = self.dropout(self.pos_embedding(ids))
    for layer in self.dec_layers:
      x = layer(x, context)
    self.last_attn_scores = self.dec_layers[-1].last_attn_scores
    return x


class TutorialTransformer(keras.Model):
  """``model((source_ids, target_input_ids))`` → logits ``(batch, tgt_len, target_vocab)``."""

  def __init__(self, *, num_layers, d_model, num_heads, dff, input_vocab_size,
               target_vocab_size, dropout_rate=0.1):
    super().__init__()
    self.encoder = Encoder(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                           dff=dff, vocab_size=input_vocab_size, dropout_rate=dropout_rate)
    self.decoder = Decoder(num_layers=num_layers, d_model=d_model, num_heads=num_heads,
                           dff=dff, vocab_size=target_vocab_size, dropout_rate=dropout_rate)
    self.final_layer = keras.layers.Dense(target_vocab_size)

  @classmethod
  def from_model_config(cls, model_config, input_vocab_size, target_vocab_size):
    """The tutorial's model with the sizes of ``config.model`` (its other fields are the
    tutorial's choices by construction)."""
    return cls(num_layers=model_config.num_layers, d_model=model_config.d_model,
               num_heads=model_config.num_heads, dff=model_config.dff,
               input_vocab_size=input_vocab_size, target_vocab_size=target_vocab_size,
               dropout_rate=model_config.dropout_rate)

  def call(self, inputs):
    source_ids, target_ids = inputs
    logits = self.final_layer(self.decoder(target_ids, self.encoder(source_ids)))
    # Without this Keras would also mask (and reweight) the loss and metrics.
    set_keras_mask(logits, None)
    return logits


class CustomSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) at the optimizer's iteration
  counter as it is (0 for the first update, so that update has learning rate 0)."""

  def __init__(self, d_model, warmup_steps=4000):
    self.d_model = float(d_model)
    self.warmup_steps = float(warmup_steps)

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    return tf.math.rsqrt(self.d_model) * tf.minimum(tf.math.rsqrt(step),
                                                    step * self.warmup_steps ** -1.5)


def masked_loss(labels, logits):
  """Mean cross-entropy over the batch's real (non-0) labels ``(batch, tgt_len)``."""
  per_token = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)(
      labels, logits)
  mask = tf.cast(labels != 0, per_token.dtype)
  return tf.reduce_sum(per_token * mask) / tf.reduce_sum(mask)


def masked_accuracy(labels, logits):
  """Fraction of real labels that are the argmax of ``logits``."""
  predicted = tf.argmax(logits, axis=-1, output_type=labels.dtype)
  real = labels != 0
  hits = tf.cast((predicted == labels) & real, tf.float32)
  return tf.reduce_sum(hits) / tf.reduce_sum(tf.cast(real, tf.float32))


def compile_as_tutorial(model, d_model, warmup_steps=4000):
  """Adam(0.9, 0.98, 1e-9) on :class:`CustomSchedule`, masked loss and accuracy:
  ``model.fit`` then runs the tutorial's training step."""
  optimizer = keras.optimizers.Adam(CustomSchedule(d_model, warmup_steps), beta_1=0.9,
                                    beta_2=0.98, epsilon=1e-9)
  model.compile(loss=masked_loss, optimizer=optimizer, metrics=[masked_accuracy])
  return model


class Translator(tf.Module):
  """The tutorial's greedy decoding: one sentence, a Python loop over a
  ``tf.TensorArray``, the whole model re-run on the whole output at every token.

  ``translator(sentence, max_length)`` with a scalar ``tf.string`` returns
  ``(text, tokens (1, length) int64 with [START] first, attention
  (1, heads, length - 1, src_len))``. Run eagerly it is the tutorial's
  ``Translator``; under ``tf.function`` autograph turns the loop into a
  ``tf.while_loop`` (see :class:`ExportTranslator`).

  ``transformer`` is any callable ``((source, prefix), training) -> logits`` with
  a ``decoder.last_attn_scores``.
  """

  def __init__(self, tokenizers, transformer):
    super().__init__()
    self.tokenizers = tokenizers
    self.transformer = transformer

  def __call__(self, sentence, max_length=MAX_TOKENS):
    source = self.tokenizers.pt.tokenize(sentence[tf.newaxis]).to_tensor()
    start_end = self.tokenizers.en.tokenize([""])[0]  # [START] [END]
    start, end = start_end[:1], start_end[1]
    output = tf.TensorArray(tf.int64, size=0, dynamic_size=True)
    output = output.write(0, start)
    for i in tf.range(max_length):
      prefix = tf.transpose(output.stack())  # (1, i + 1)
      logits = self.transformer((source, prefix), training=False)
      next_id = tf.argmax(logits[:, -1], axis=-1)  # (1,)
      output = output.write(i + 1, next_id)
      if next_id[0] == end:
        break
    tokens = tf.transpose(output.stack())
    # One more full pass over the result gives the attention to plot.
    self.transformer((source, tokens[:, :-1]), training=False)
    return (self.tokenizers.en.detokenize(tokens)[0], tokens,
            self.transformer.decoder.last_attn_scores)


class ExportTranslator(tf.Module):
  """The tutorial's export wrapper: :class:`Translator` under ``tf.function`` with a
  scalar string signature, returning the text."""

  def __init__(self, translator, max_length=MAX_TOKENS):
    super().__init__()
    self.translator = translator
    self.max_length = max_length

  @tf.function(input_signature=[tf.TensorSpec(shape=[], dtype=tf.string)])
  def __call__(self, sentence):
    text, _, _ = self.translator(sentence, max_length=self.max_length)
    return text


def build(model, source_length=3, target_length=2):
  """Creates the weights by calling ``model`` once on a padding-free batch."""
  model((tf.ones((1, source_length), tf.int64), tf.ones((1, target_length), tf.int64)))
  return model


def copy_weights(ours, tutorial):
  """Sets the built ``tutorial`` model's weights to those of ``ours``.

  ``ours`` is a built :class:`transformer.model.Transformer` with the tutorial's
  layout (``configs/tutorial.py``: ``head_width="full"``, concatenated positional
  encoding, untied output, no residual dropout on attention). Keras' MHA keeps
  its projections per head, ``(d_model, heads, key_dim)`` and
  ``(heads, key_dim, d_model)``; ours keeps them flat, heads outermost, so a
  reshape maps one onto the other.
  """
  def assign(target, source):
    target.assign(tf.reshape(source, target.shape))

  def dense(target, source):
    assign(target.kernel, source.kernel)
    assign(target.bias, source.bias)

  def norm(target, source):
    assign(target.gamma, source.gamma)
    assign(target.beta, source.beta)

  def attention(target, source):
    for name in ("query_dense", "key_dense", "value_dense", "output_dense"):
      dense(getattr(target.mha, name), getattr(source.mha, name))
    norm(target.layernorm, source.layernorm)

  def feed_forward(target, source):
    dense(target.inner, source.inner)
    dense(target.outer, source.outer)
    norm(target.layer_norm, source.layernorm)

  assign(tutorial.encoder.pos_embedding.embedding.embeddings,
         ours.encoder.embedding.embeddings)
  assign(tutorial.decoder.pos_embedding.embedding.embeddings,
         ours.decoder.embedding.embeddings)
  for target, source in zip(tutorial.encoder.enc_layers, ours.encoder.layers, strict=True):
    attention(target.self_attention, source.self_attention)
    feed_forward(target.ffn, source.ffn)
  for target, source in zip(tutorial.decoder.dec_layers, ours.decoder.layers, strict=True):
    attention(target.causal_self_attention, source.self_attention)
    attention(target.cross_attention, source.cross_attention)
    feed_forward(target.ffn, source.ffn)
  dense(tutorial.final_layer, ours.final_layer)
