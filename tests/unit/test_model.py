"""The whole model: parameter counts, weight tying, incremental decoding, saving."""

import json

import ml_collections
import numpy as np
import pytest
import tensorflow as tf
import keras

import configs.base
import configs.big
import configs.tutorial
import configs.tutorial_2021
from transformer.model import Transformer


def test_tutorial_config_has_the_tutorials_parameter_count(make_model):
  # The tutorial's transformer.summary() with its converter's vocabularies.
  assert make_model(configs.tutorial.get_config(), (7765, 7010)).count_params() == 10_184_162


def test_tutorial_2021_config_has_that_versions_parameter_count(make_model):
  # The pre-Keras tutorial's model with the same converter: its heads of width
  # d_model/h give each attention sub-layer 8 times fewer projection weights
  # than the current tutorial's key_dim=d_model.
  model_config = configs.tutorial_2021.get_config().model
  assert parameter_count(model_config, 7765, 7010) == 4_646_882
  assert make_model(configs.tutorial_2021.get_config(), (7765, 7010)).count_params() == 4_646_882


def parameter_count(model_config, input_vocab, target_vocab):
  """The parameters §3 describes, counted by hand: per attention sub-layer
  Q, K, V and output projections with biases and a LayerNorm; per feed-forward
  sub-layer two Dense layers and a LayerNorm; N encoder layers (1 attention)
  and N decoder layers (2); embeddings as ``output_weights`` shares them."""
  d, dff, layers = model_config.d_model, model_config.dff, model_config.num_layers
  width = model_config.num_heads * (d // model_config.num_heads
                                    if model_config.head_width == "split" else d)
  layernorm = 2 * d
  attention = 3 * (d * width + width) + width * d + d + layernorm
  feed_forward = d * dff + dff + dff * d + d + layernorm
  stacks = layers * (attention + feed_forward) + layers * (2 * attention + feed_forward)
  embeddings = {"shared": input_vocab * d,
                "tied": (input_vocab + target_vocab) * d,
                "untied": (input_vocab + target_vocab) * d + d * target_vocab + target_vocab}
  return stacks + embeddings[model_config.output_weights]


@pytest.mark.slow
def test_base_and_big_match_the_papers_table_3(make_model):
  # README: base 63.1M (paper: 65M), big 214.2M (paper: 213M) with a shared
  # 37,000-token vocabulary (§3.4, Table 3).
  for module, count, millions in ((configs.base, 63_082_496, 63.1),
                                  (configs.big, 214_245_376, 214.2)):
    assert parameter_count(module.get_config().model, 37000, 37000) == count
    assert make_model(module.get_config(), (37000, 37000)).count_params() == count
    assert round(count / 1e6, 1) == millions
  assert parameter_count(configs.tutorial.get_config().model, 7765, 7010) == 10_184_162


# configs/tiny.py with two layers, narrower, without dropout (vocabularies of 30).
SMALL = dict(num_layers=2, d_model=16, dff=32, dropout_rate=0.0, max_position=32)


def with_padding(batch):
  """The batch with the third source sentence padded after 5 tokens."""
  source, target = batch
  source[2, 5:] = 0
  return source, target


@pytest.mark.parametrize("output_weights", ["tied", "shared"])
def test_tied_output_projection_is_the_embedding_variable(make_model, random_batch, output_weights):
  model = make_model(**SMALL, output_weights=output_weights)
  model(with_padding(random_batch()))
  assert model.output_projection is model.decoder.embedding.embeddings
  embedding_matrices = [v for v in model.trainable_variables if tuple(v.shape) == (30, 16)]
  assert len(embedding_matrices) == (1 if output_weights == "shared" else 2)
  if output_weights == "shared":
    assert model.encoder.embedding is model.decoder.embedding
  untied = make_model(**SMALL, output_weights="untied")
  untied(with_padding(random_batch()))
  assert untied.count_params() - model.count_params() == (
      16 * 30 + 30 + (30 * 16 if output_weights == "shared" else 0))


def test_tied_embedding_gets_gradients_from_input_and_output_uses(make_model, random_batch):
  model = make_model(**SMALL, output_weights="tied")
  source, target = with_padding(random_batch())
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


def test_shared_weights_need_one_vocabulary(make_model):
  with pytest.raises(ValueError, match="joint vocabulary"):
    make_model(vocab_sizes=(30, 31), **SMALL, output_weights="shared")


@pytest.mark.parametrize("head_width", ["split", "full"])
def test_decode_step_equals_the_last_position_of_a_full_pass(make_model, random_batch, head_width):
  model = make_model(**SMALL, head_width=head_width)
  source, target = with_padding(random_batch(1))
  full = model((source, target)).numpy()
  context, source_mask = model.encode(source)
  cache = model.initial_cache(context, max_length=10)
  for index in range(target.shape[1]):
    logits, cache, weights = model.decode_step(tf.constant(target[:, index]), index, cache,
                                               source_mask)
    np.testing.assert_allclose(logits.numpy(), full[:, index], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(weights.numpy(),
                             model.decoder.last_attn_scores.numpy()[:, :, -1], atol=1e-6)


def test_get_config_round_trip_gives_identical_outputs(make_model, random_batch):
  # The paper's choices: every one differs from the (tutorial's) defaults.
  model = make_model(**SMALL, head_width="split", positional_layout="interleaved",
                     output_weights="tied", scale_embeddings=False, layer_norm_epsilon=1e-6,
                     residual_dropout_on_attention=True, attention_dropout_rate=0.0)
  batch = with_padding(random_batch(2))
  expected = model(batch).numpy()
  clone = Transformer.from_config(model.get_config())
  clone(batch)
  clone.set_weights(model.get_weights())
  assert clone.get_config() == model.get_config()
  np.testing.assert_array_equal(clone(batch).numpy(), expected)


@pytest.mark.parametrize("output_weights", ["tied", "shared", "untied"])
def test_keras_file_round_trip_gives_identical_outputs(make_model, random_batch, tmp_path,
                                                      output_weights):
  model = make_model(**SMALL, output_weights=output_weights)
  batch = with_padding(random_batch(3))
  expected = model(batch).numpy()
  path = tmp_path / "model.keras"
  model.save(path)
  restored = keras.models.load_model(path)
  assert isinstance(restored, Transformer)
  np.testing.assert_array_equal(restored(batch).numpy(), expected)


def test_mixed_precision_keeps_float32_logits(make_model, random_batch):
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    model = make_model(**SMALL)
    logits = model(with_padding(random_batch()))
    assert model.encoder.layers[0].ffn.inner.compute_dtype == "bfloat16"
  finally:
    keras.mixed_precision.set_global_policy("float32")
  assert logits.dtype == tf.float32
  assert np.all(np.isfinite(logits.numpy()))


def layer_cases():
  from transformer.model.attention import (CausalSelfAttention, CrossAttention,
                                     GlobalSelfAttention, MultiHeadAttention)
  from transformer.model.decoder import Decoder, DecoderLayer
  from transformer.model.embedding import PositionalEmbedding
  from transformer.model.encoder import Encoder, EncoderLayer
  from transformer.model.feed_forward import FeedForward
  rng = np.random.default_rng(4)
  x = rng.normal(size=(2, 5, 8)).astype(np.float32)
  context = rng.normal(size=(2, 7, 8)).astype(np.float32)
  ids = rng.integers(1, 20, (2, 5))
  # Values other than the defaults, so that a setting lost by get_config shows.
  stack = dict(key_dim=4, dropout_rate=0.2, attention_dropout_rate=0.0,
               residual_dropout_on_attention=True, max_position=16,
               positional_layout="interleaved", scale_embeddings=False,
               layer_norm_epsilon=1e-6)
  return [
      (PositionalEmbedding(20, 8, max_position=16, positional_layout="interleaved"), (ids,)),
      (MultiHeadAttention(2, 4, attention_dropout_rate=0.1), (x, context)),
      (GlobalSelfAttention(2, 4, dropout=0.1), (x,)),
      (CausalSelfAttention(2, 4, dropout_rate=0.3, layer_norm_epsilon=1e-6), (x,)),
      (CrossAttention(2, 4), (x, context)),
      (FeedForward(8, 12, 0.3, layer_norm_epsilon=1e-6), (x,)),
      (EncoderLayer(d_model=8, num_heads=2, dff=12, key_dim=4, dropout_rate=0.2,
                    layer_norm_epsilon=1e-6), (x,)),
      (DecoderLayer(d_model=8, num_heads=2, dff=12, key_dim=4, attention_dropout_rate=0.1,
                    layer_norm_epsilon=1e-6), (x, context)),
      (Encoder(num_layers=2, d_model=8, num_heads=2, dff=12, vocab_size=20, pad_id=0, **stack),
       (ids,)),
      (Decoder(num_layers=2, d_model=8, num_heads=2, dff=12, vocab_size=20, **stack),
       (ids, context)),
  ]


def test_the_constructors_defaults_are_configs_tutorial():
  """The tutorial's line, with Transformer's defaults for everything else,
  gives configs/tutorial.py's model settings: the defaults are the tutorial's."""
  model = Transformer(num_layers=4, d_model=128, num_heads=8, dff=512, input_vocab_size=7765,
                      target_vocab_size=7010, dropout_rate=0.1)
  tutorial = configs.tutorial.get_config().model.to_dict()
  built = model.get_config()
  assert {name: built[name] for name in tutorial} == tutorial


def test_every_layer_names_its_settings_as_config_model_does():
  """One name per setting: every layer's get_config (so its keyword arguments)
  uses config.model's field names, besides the tutorial's vocabulary sizes and
  the padding id, which are not configuration fields, and the attention
  sub-layers' ``dropout``, which the tutorial's lines pass."""
  from transformer.config import default_config  # pylint: disable=g-import-not-at-top
  allowed = set(default_config().model.to_dict()) | {
      "vocab_size", "input_vocab_size", "target_vocab_size", "pad_id",
      "dropout"}  # the attention sub-layers' (the tutorial's, Keras MultiHeadAttention's)
  keras_own = set(keras.layers.Layer().get_config())
  layers = [layer for layer, _ in layer_cases()]
  layers.append(Transformer(input_vocab_size=20, target_vocab_size=20, **SMALL, num_heads=2))
  for layer in layers:
    settings = set(layer.get_config()) - keras_own
    assert settings <= allowed, (type(layer).__name__, settings - allowed)


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
def test_tf_checkpoint_holds_every_variable(make_model, random_batch, tmp_path, output_weights):
  """tf.train.Checkpoint (what training saves) must reach every layer of the stacks."""
  model = make_model(**SMALL, output_weights=output_weights)
  batch = with_padding(random_batch(5))
  expected = model(batch).numpy()
  path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
  saved = [name for name, _ in tf.train.list_variables(path) if name.startswith("model/")]
  assert len(saved) == len(model.weights)
  restored = make_model(**SMALL, output_weights=output_weights)
  restored(batch)
  tf.train.Checkpoint(model=restored).restore(path).assert_existing_objects_matched()
  np.testing.assert_array_equal(restored(batch).numpy(), expected)


# ------------------------------------------ every config.model field reaches its layer

def small(module, **overrides):
  """``module``'s model configuration with small sizes; its switches unchanged."""
  model_config = module.get_config().model
  model_config.update(dict(num_layers=2, d_model=16, num_heads=4, dff=24, max_position=40))
  model_config.update(overrides)
  return model_config


CONFIG_CASES = {
    "tutorial": lambda: small(configs.tutorial, dropout_rate=0.15),
    "base": lambda: small(configs.base),
    "big": lambda: small(configs.big),
    "ablations": lambda: small(configs.base, output_weights="tied", scale_embeddings=False,
                               scale_attention_logits=False, embedding_initializer="normal",
                               attention_dropout_rate=0.05, positional_layout="concatenated",
                               layer_norm_epsilon=1e-4, positional_scale=0.25, key_dim=2),
    "learned_positions": lambda: small(configs.base, positional_encoding="learned",
                                       positional_scale=0.5),
}


def sinusoids(length, depth, layout):
  """§3.5, written out: sin(p / 10000^(2i/depth)) and cos(...) per channel pair i."""
  table = np.zeros((length, depth))
  for p in range(length):
    for i in range(depth // 2):
      angle = p / 10000 ** (2 * i / depth)
      sin_channel, cos_channel = (2 * i, 2 * i + 1) if layout == "interleaved" else (
          i, depth // 2 + i)
      table[p, sin_channel], table[p, cos_channel] = np.sin(angle), np.cos(angle)
  return table


def check_attention(attention, c, key_dim, rng):
  """Head count and width, the 1/√d_k switch, both dropout rates and the LayerNorm ε
  of one sub-layer."""
  mha = attention.mha
  width = c.num_heads * key_dim
  for dense in (mha.query_dense, mha.key_dense, mha.value_dense):
    assert tuple(dense.kernel.shape) == (c.d_model, width)
  assert tuple(mha.output_dense.kernel.shape) == (width, c.d_model)
  assert mha.weights_dropout.rate == c.attention_dropout_rate
  assert attention.dropout.rate == (c.dropout_rate if c.residual_dropout_on_attention else 0)
  assert attention.layernorm.epsilon == c.layer_norm_epsilon
  # The weights the layer computes, against softmax(QKᵀ/√d_k) (or QKᵀ) by hand.
  x = rng.normal(size=(1, 3, c.d_model)).astype(np.float32)
  context = rng.normal(size=(1, 4, c.d_model)).astype(np.float32)
  _, weights = mha(x, context)

  def heads(dense, inputs):
    projected = inputs[0] @ dense.kernel.numpy() + dense.bias.numpy()
    return projected.reshape(len(inputs[0]), c.num_heads, key_dim).transpose(1, 0, 2)

  logits = heads(mha.query_dense, x) @ heads(mha.key_dense, context).transpose(0, 2, 1)
  if c.scale_attention_logits:
    logits /= np.sqrt(key_dim)
  expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  np.testing.assert_allclose(weights.numpy()[0], expected, rtol=1e-4, atol=1e-6)


def check_embedding(embedding, c, rng):
  """Dropout rate, initializer, √d_model scaling, the positional layout, kind and scale."""
  assert embedding.dropout.rate == c.dropout_rate
  table = embedding.embeddings.numpy()
  if c.embedding_initializer == "uniform":
    assert np.abs(table).max() <= 0.05
  else:
    assert np.std(table) == pytest.approx(c.d_model ** -0.5, rel=0.2)
  ids = rng.integers(1, table.shape[0], (1, c.max_position))
  scale = np.sqrt(c.d_model) if c.scale_embeddings else 1.0
  positions = embedding(ids, training=False).numpy()[0] - table[ids[0]] * scale
  expected = (embedding.position_table.embeddings.numpy()
              if c.positional_encoding == "learned"
              else sinusoids(c.max_position, c.d_model, c.positional_layout))
  np.testing.assert_allclose(positions, c.positional_scale * expected, atol=1e-4)


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_every_model_setting_takes_effect_in_every_layer(case):
  """A model built from a configuration, as training builds it: each field is
  checked where it acts, so a keyword lost between Transformer and the layers
  (which take defaults) shows."""
  c = CONFIG_CASES[case]()
  input_vocab, target_vocab = (30, 30) if c.output_weights == "shared" else (30, 31)
  keras.utils.set_random_seed(0)
  model = Transformer.from_model_config(c, input_vocab, target_vocab)
  model.build(((None, None), (None, None)))
  rng = np.random.default_rng(0)
  key_dim = c.key_dim or (c.d_model // c.num_heads if c.head_width == "split" else c.d_model)
  assert len(model.encoder.layers) == len(model.decoder.layers) == c.num_layers
  for layer in model.encoder.layers:
    check_attention(layer.self_attention, c, key_dim, rng)
  for layer in model.decoder.layers:
    check_attention(layer.self_attention, c, key_dim, rng)
    check_attention(layer.cross_attention, c, key_dim, rng)
  for layer in model.encoder.layers + model.decoder.layers:
    assert tuple(layer.ffn.inner.kernel.shape) == (c.d_model, c.dff)
    assert layer.ffn.dropout.rate == c.dropout_rate
    assert layer.ffn.layernorm.epsilon == c.layer_norm_epsilon
  # Every LayerNorm is one of the 2 per encoder layer and 3 per decoder layer checked above.
  layer_norms = [layer for layer in model._flatten_layers()  # pylint: disable=protected-access
                 if isinstance(layer, keras.layers.LayerNormalization)]
  assert len(layer_norms) == 5 * c.num_layers
  for embedding in (model.encoder.embedding, model.decoder.embedding):
    check_embedding(embedding, c, rng)
  # The decoding cache holds one key and one value per head and position.
  cache = model.initial_cache(tf.zeros((1, 4, c.d_model)), max_length=5)
  assert tuple(cache[0]["key"].shape) == (1, c.num_heads, 5, key_dim)

  assert (model.encoder.embedding is model.decoder.embedding) == (
      c.output_weights == "shared")
  x = rng.normal(size=(2, c.d_model)).astype(np.float32)
  if c.output_weights == "untied":
    final = model.final_layer
    expected = x @ final.kernel.numpy() + final.bias.numpy()
  else:
    assert model.final_layer is None
    expected = x @ model.decoder.embedding.embeddings.numpy().T
  assert expected.shape == (2, target_vocab)
  np.testing.assert_allclose(model.logits(tf.constant(x)).numpy(), expected, rtol=1e-5,
                             atol=1e-5)


def test_model_config_without_layer_norm_epsilon_builds_the_earlier_model():
  """A config.json written before model.layer_norm_epsilon existed (e.g. an older
  tutorial run) was trained with ε = 1e-6: evaluation reads it back as a ConfigDict
  without the field and must build that model, not the tutorial's current 1e-3."""
  stored = json.loads(small(configs.tutorial).to_json())
  del stored["layer_norm_epsilon"]
  model = Transformer.from_model_config(ml_collections.ConfigDict(stored), 30, 31)
  model.build(((None, None), (None, None)))
  epsilons = {layer.epsilon for layer in model._flatten_layers()  # pylint: disable=protected-access
              if isinstance(layer, keras.layers.LayerNormalization)}
  assert epsilons == {1e-6}


def test_checkpoints_and_keras_files_written_before_still_fit(tmp_path):
  """The variables' paths in a tf.train.Checkpoint and in a .keras file are
  those of a tiny paper-style model saved by the code before the layers took
  the tutorial's arguments (tests/data/written_before_tutorial_defaults): runs
  trained then still restore, and their .keras files still load."""
  import io  # pylint: disable=g-import-not-at-top
  import zipfile  # pylint: disable=g-import-not-at-top
  from pathlib import Path  # pylint: disable=g-import-not-at-top
  import h5py  # pylint: disable=g-import-not-at-top
  layout = json.loads((Path(__file__).parents[1] / "data" / "written_before_tutorial_defaults"
                       / "layout.json").read_text())
  model = keras.saving.deserialize_keras_object(layout["keras_config"])
  tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
  variables = sorted([name, shape] for name, shape in tf.train.list_variables(str(tmp_path / "ckpt"))
                     if name.startswith("model/"))
  assert variables == layout["checkpoint_variables"]
  model.save(tmp_path / "model.keras")
  with zipfile.ZipFile(tmp_path / "model.keras") as archive:
    weights = h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r")
    paths = []
    weights.visititems(lambda name, item: paths.append([name, list(item.shape)])
                       if isinstance(item, h5py.Dataset) else None)
  assert sorted(paths) == layout["keras_weights"]
