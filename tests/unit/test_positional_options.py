"""Learned positional embeddings (Table 3, row E), the positional scale and a
free head width (row B): config.model.positional_encoding, positional_scale, key_dim."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import configs.tiny
from transformer.config import ConfigError, validate_config
from transformer.model.embedding import PositionalEmbedding, positional_encoding
from transformer.model import Transformer

D_MODEL, MAX_POSITION, VOCAB = 16, 24, 30


# configs/tiny.py narrower, without dropout (make_model's vocabularies are VOCAB).
SMALL = dict(d_model=D_MODEL, dff=32, dropout_rate=0.0, max_position=MAX_POSITION)


def count(variables):
  return sum(int(np.prod(v.shape)) for v in variables)


def test_default_is_the_sinusoid_table_bit_for_bit():
  layer = PositionalEmbedding(VOCAB, D_MODEL, max_position=MAX_POSITION, dropout_rate=0.0)
  np.testing.assert_array_equal(layer.encoding.numpy(),
                                positional_encoding(MAX_POSITION, D_MODEL).numpy())
  assert layer.position_table is None


@pytest.mark.parametrize("positions", ["sinusoid", "learned"])
def test_positional_scale_multiplies_the_positions_only(positions):
  """output − token part = scale × the position rows, for both kinds."""
  scaled = PositionalEmbedding(VOCAB, D_MODEL, max_position=MAX_POSITION, dropout_rate=0.0,
                               positional_encoding=positions, positional_scale=0.25,
                               scale_embeddings=False)
  ids = np.array([[3, 9, 1, 4, 29]])
  output = scaled(ids).numpy()[0]
  rows = (positional_encoding(5, D_MODEL).numpy() if positions == "sinusoid"
          else scaled.position_table.embeddings.numpy()[:5])
  np.testing.assert_allclose(output - scaled.embeddings.numpy()[ids[0]], 0.25 * rows,
                             rtol=1e-6, atol=1e-7)


def test_learned_table_is_trainable_and_learns(make_model, random_batch):
  model = make_model(**SMALL, positional_encoding="learned")
  table = model.encoder.embedding.position_table.embeddings
  assert tuple(table.shape) == (MAX_POSITION, D_MODEL)
  assert any(v is table for v in model.trainable_variables)
  source, target = random_batch(rows=2)
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(model((source, target)) ** 2)
  gradient = tape.gradient(loss, table)
  # Only the rows of positions the batch holds get a gradient.
  norms = np.linalg.norm(tf.convert_to_tensor(gradient).numpy(), axis=1)
  assert np.all(norms[:7] > 0) and np.all(norms[7:] == 0)


@pytest.mark.parametrize("output_weights, tables", [("tied", 2), ("untied", 2),
                                                     ("shared", 1)])
def test_learned_positions_add_one_table_per_embedding(make_model, output_weights, tables):
  sinusoid = make_model(**SMALL, output_weights=output_weights)
  learned = make_model(**SMALL, output_weights=output_weights, positional_encoding="learned")
  assert (count(learned.trainable_variables) - count(sinusoid.trainable_variables)
          == tables * MAX_POSITION * D_MODEL)


def test_learned_positions_round_trip_get_config_and_keras_file(make_model, random_batch,
                                                                tmp_path):
  model = make_model(**SMALL, positional_encoding="learned", positional_scale=0.5, key_dim=2)
  batch = random_batch(1, rows=2)
  expected = model(batch).numpy()
  assert Transformer.from_config(model.get_config()).get_config() == model.get_config()
  model.save(tmp_path / "model.keras")
  restored = keras.models.load_model(tmp_path / "model.keras")
  assert restored.decoder.embedding.positional_encoding == "learned"
  np.testing.assert_array_equal(restored(batch).numpy(), expected)


def test_cached_decoding_reads_the_learned_row_of_each_position(make_model, random_batch):
  """decode_step at position i equals the full pass at i; with row i of the
  decoder's table zeroed it no longer does (so the row at the offset is used)."""
  model = make_model(**SMALL, positional_encoding="learned")
  source, target = random_batch(2, rows=2)
  full = model((source, target)).numpy()
  context, source_mask = model.encode(source)
  cache = model.initial_cache(context, max_length=target.shape[1])
  for index in range(target.shape[1]):
    logits, cache, _ = model.decode_step(tf.constant(target[:, index]), index, cache,
                                         source_mask)
    np.testing.assert_allclose(logits.numpy(), full[:, index], rtol=1e-4, atol=1e-5)
  table = model.decoder.embedding.position_table.embeddings
  table.assign(tf.tensor_scatter_nd_update(table, [[3]], tf.zeros((1, D_MODEL))))
  cache = model.initial_cache(context, max_length=target.shape[1])
  for index in range(4):
    logits, cache, _ = model.decode_step(tf.constant(target[:, index]), index, cache,
                                         source_mask)
  assert not np.allclose(logits.numpy(), full[:, 3], atol=1e-3)


def test_key_dim_sets_every_heads_width(make_model):
  model = make_model(**SMALL, key_dim=2)
  for attention in (model.encoder.layers[0].self_attention,
                    model.decoder.layers[0].cross_attention):
    assert tuple(attention.mha.query_dense.kernel.shape) == (D_MODEL, 4 * 2)
    assert tuple(attention.mha.value_dense.kernel.shape) == (D_MODEL, 4 * 2)
  cache = model.initial_cache(tf.zeros((1, 3, D_MODEL)), max_length=5)
  assert tuple(cache[0]["key"].shape) == (1, 4, 5, 2)


@pytest.mark.parametrize("field, value, message", [
    ("positional_encoding", "rotary", r"positional_encoding: unknown value 'rotary'"),
    ("positional_scale", 0.0, r"positional_scale: must be > 0"),
    ("key_dim", -8, r"key_dim: must be >= 0"),
])
def test_bad_positional_fields_raise_a_clear_error(field, value, message):
  config = configs.tiny.get_config()
  config.model[field] = value
  with pytest.raises(ConfigError, match=message):
    validate_config(config)


def test_config_fields_reach_the_model():
  config = configs.tiny.get_config()
  config.model.update(positional_encoding="learned", positional_scale=0.5, key_dim=4)
  model = Transformer.from_model_config(validate_config(config).model, VOCAB, VOCAB)
  for embedding in (model.encoder.embedding, model.decoder.embedding):
    assert (embedding.positional_encoding, embedding.positional_scale) == ("learned", 0.5)
  assert model.decoder.layers[0].self_attention.mha.key_dim == 4
