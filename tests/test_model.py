"""The whole model: parameter counts, weight tying, incremental decoding, saving."""

import numpy as np
import pytest
import tensorflow as tf
import keras

import configs.base
import configs.big
import configs.tutorial
from transformer.model import Transformer


def built(config_module, input_vocab, target_vocab):
  model = Transformer.from_model_config(config_module.get_config().model, input_vocab,
                                        target_vocab)
  model.build(((None, None), (None, None)))
  return model


def test_tutorial_config_has_the_tutorials_parameter_count():
  # The tutorial's transformer.summary() with its converter's vocabularies.
  assert built(configs.tutorial, 7765, 7010).count_params() == 10_184_162


def test_base_and_big_match_the_papers_table_3():
  assert built(configs.base, 37000, 37000).count_params() == pytest.approx(65e6, rel=0.05)
  assert built(configs.big, 37000, 37000).count_params() == pytest.approx(213e6, rel=0.02)


def tiny_model(**overrides):
  args = dict(num_layers=2, d_model=16, num_heads=4, dff=32, input_vocab_size=30,
              target_vocab_size=30, dropout_rate=0.0, max_position=32)
  args.update(overrides)
  return Transformer(**args)


def random_batch(seed=0, vocab=30):
  rng = np.random.default_rng(seed)
  source = rng.integers(1, vocab, (3, 7))
  source[2, 5:] = 0
  return source, rng.integers(1, vocab, (3, 6))


@pytest.mark.parametrize("output_weights", ["tied", "shared"])
def test_tied_output_projection_is_the_embedding_variable(output_weights):
  model = tiny_model(output_weights=output_weights)
  model(random_batch())
  assert model.output_projection is model.decoder.embedding.embeddings
  embedding_matrices = [v for v in model.trainable_variables if tuple(v.shape) == (30, 16)]
  assert len(embedding_matrices) == (1 if output_weights == "shared" else 2)
  if output_weights == "shared":
    assert model.encoder.embedding is model.decoder.embedding
  untied = tiny_model(output_weights="untied")
  untied(random_batch())
  assert untied.count_params() - model.count_params() == (
      16 * 30 + 30 + (30 * 16 if output_weights == "shared" else 0))


def test_tied_embedding_gets_gradients_from_input_and_output_uses():
  model = tiny_model(output_weights="tied")
  source, target = random_batch()
  target = np.full_like(target, 5)  # only token 5 is a decoder input
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(model((source, target)))
  gradient = tape.gradient(loss, model.decoder.embedding.embeddings.value)
  gradient = tf.convert_to_tensor(gradient).numpy()
  # Output use: d(sum of logits)/dE[v] is the same for every row v.
  output_only = np.delete(gradient, 5, axis=0)
  assert np.abs(output_only).max() > 0
  np.testing.assert_allclose(output_only, np.broadcast_to(output_only[0], output_only.shape),
                             rtol=1e-5, atol=1e-6)
  # Input use: row 5 also gets the gradient of the embedding lookup.
  assert np.abs(gradient[5] - output_only[0]).max() > 1e-4


def test_shared_weights_need_one_vocabulary():
  with pytest.raises(ValueError, match="joint vocabulary"):
    tiny_model(output_weights="shared", target_vocab_size=31)


@pytest.mark.parametrize("head_width", ["split", "full"])
def test_decode_step_equals_the_last_position_of_a_full_pass(head_width):
  model = tiny_model(head_width=head_width)
  source, target = random_batch(1)
  full = model((source, target)).numpy()
  context, source_mask = model.encode(source)
  cache = model.initial_cache(context, max_length=10)
  for index in range(target.shape[1]):
    logits, cache, weights = model.decode_step(tf.constant(target[:, index]), index, cache,
                                               source_mask)
    np.testing.assert_allclose(logits.numpy(), full[:, index], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(weights.numpy(),
                             model.decoder.last_attention_scores.numpy()[:, :, -1], atol=1e-6)


def test_get_config_round_trip_gives_identical_outputs():
  model = tiny_model(head_width="full", positional_layout="concatenated",
                     output_weights="untied", scale_embeddings=False)
  batch = random_batch(2)
  expected = model(batch).numpy()
  clone = Transformer.from_config(model.get_config())
  clone(batch)
  clone.set_weights(model.get_weights())
  assert clone.get_config() == model.get_config()
  np.testing.assert_array_equal(clone(batch).numpy(), expected)


@pytest.mark.parametrize("output_weights", ["tied", "shared", "untied"])
def test_keras_file_round_trip_gives_identical_outputs(tmp_path, output_weights):
  model = tiny_model(output_weights=output_weights)
  batch = random_batch(3)
  expected = model(batch).numpy()
  path = tmp_path / "model.keras"
  model.save(path)
  restored = keras.models.load_model(path)
  assert isinstance(restored, Transformer)
  np.testing.assert_array_equal(restored(batch).numpy(), expected)


def test_mixed_precision_keeps_float32_logits():
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    model = tiny_model()
    logits = model(random_batch())
    assert model.encoder.layers[0].ffn.inner.compute_dtype == "bfloat16"
  finally:
    keras.mixed_precision.set_global_policy("float32")
  assert logits.dtype == tf.float32
  assert np.all(np.isfinite(logits.numpy()))


def layer_cases():
  from transformer.attention import (CausalSelfAttention, CrossAttention,
                                     GlobalSelfAttention, MultiHeadAttention)
  from transformer.decoder import Decoder, DecoderLayer
  from transformer.embedding import PositionalEmbedding
  from transformer.encoder import Encoder, EncoderLayer
  from transformer.feed_forward import FeedForward
  rng = np.random.default_rng(4)
  x = rng.normal(size=(2, 5, 8)).astype(np.float32)
  context = rng.normal(size=(2, 7, 8)).astype(np.float32)
  ids = rng.integers(1, 20, (2, 5))
  stack = dict(key_dim=4, dropout_rate=0.2, attention_dropout_rate=0.1,
               residual_dropout_on_attention=False, max_position=16,
               positional_layout="concatenated", scale_embeddings=False)
  return [
      (PositionalEmbedding(20, 8, max_position=16, layout="concatenated"), (ids,)),
      (MultiHeadAttention(2, 4, dropout=0.1), (x, context)),
      (GlobalSelfAttention(2, 4, attention_dropout_rate=0.1, residual_dropout=False), (x,)),
      (CausalSelfAttention(2, 4, dropout_rate=0.3), (x,)),
      (CrossAttention(2, 4), (x, context)),
      (FeedForward(8, 12, 0.3), (x,)),
      (EncoderLayer(8, 2, 12, 4, dropout_rate=0.2), (x,)),
      (DecoderLayer(8, 2, 12, 4, attention_dropout_rate=0.1), (x, context)),
      (Encoder(2, 8, 2, 12, 20, pad_id=0, **stack), (ids,)),
      (Decoder(2, 8, 2, 12, 20, **stack), (ids, context)),
  ]


@pytest.mark.parametrize("index", range(10))
def test_every_layer_round_trips_through_get_config(index):
  layer, args = layer_cases()[index]
  expected = layer(*args)
  expected = (expected[0] if isinstance(expected, tuple) else expected).numpy()
  clone = type(layer).from_config(layer.get_config())
  clone(*args)
  clone.set_weights(layer.get_weights())
  assert clone.get_config() == layer.get_config()
  output = clone(*args)
  output = (output[0] if isinstance(output, tuple) else output).numpy()
  np.testing.assert_array_equal(output, expected)


@pytest.mark.parametrize("output_weights", ["tied", "shared", "untied"])
def test_tf_checkpoint_holds_every_variable(tmp_path, output_weights):
  """tf.train.Checkpoint (what training saves) must reach every layer of the stacks."""
  model = tiny_model(output_weights=output_weights)
  batch = random_batch(5)
  expected = model(batch).numpy()
  path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
  saved = [name for name, _ in tf.train.list_variables(path) if name.startswith("model/")]
  assert len(saved) == len(model.weights)
  restored = tiny_model(output_weights=output_weights)
  restored(batch)
  tf.train.Checkpoint(model=restored).restore(path).assert_existing_objects_matched()
  np.testing.assert_array_equal(restored(batch).numpy(), expected)
