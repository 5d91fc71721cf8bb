"""The two scalings as switches (issue #10): ``model.scale_attention_logits``
(1/√d_k, §3.2.1) and ``model.embedding_initializer`` beside ``scale_embeddings``
(§3.4). The notebook that measures them: tests/notebooks/test_scaling_notebook.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer.inference import decoding
from transformer.config import ConfigError, default_config, validate_config
from transformer.model import Transformer


def with_padding(batch):
  """The batch with the second source sentence padded after 5 tokens, as tensors."""
  source, target = batch
  source[1, 5:] = 0
  return tf.constant(source), tf.constant(target)


def attention_layers(model):
  for layer in model.encoder.layers:
    yield layer.self_attention
  for layer in model.decoder.layers:
    yield layer.self_attention
    yield layer.cross_attention


def softmax(x):
  e = np.exp(x - x.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("scaled", [True, False])
def test_attention_weights_are_softmax_of_qkt_or_qkt_over_root_dk(make_model, random_batch,
                                                                   scaled):
  model = make_model(scale_attention_logits=scaled)
  assert all(a.mha.scale_attention_logits is scaled for a in attention_layers(model))
  source, target = with_padding(random_batch())
  model((source, target))
  # Recompute the first encoder self-attention from its own projections.
  attention = model.encoder.layers[0].self_attention
  mha = attention.mha
  x = model.encoder.embedding(source)
  q = mha.split_heads(mha.query_dense(x)).numpy()
  k = mha.split_heads(mha.key_dense(x)).numpy()
  logits = q @ np.swapaxes(k, -1, -2)  # exactly QKᵀ: (batch, heads, src, src)
  if scaled:
    logits = logits / np.sqrt(mha.key_dim)
  logits = np.where(source.numpy()[:, None, None, :] != 0, logits, -np.inf)
  np.testing.assert_allclose(attention.last_attn_scores.numpy(), softmax(logits),
                             rtol=1e-5, atol=1e-6)


def test_switch_off_changes_the_output(make_model, random_batch):
  on, off = make_model(), make_model(scale_attention_logits=False)
  off.set_weights(on.get_weights())
  batch = with_padding(random_batch(1))
  assert np.abs(on(batch).numpy() - off(batch).numpy()).max() > 1e-3


def test_cached_decoding_honours_the_switch(make_model, random_batch):
  model = make_model(scale_attention_logits=False)
  source, target = with_padding(random_batch(2))
  full = model((source, target)).numpy()
  context, source_mask = model.encode(source)
  cache = model.initial_cache(context, max_length=target.shape[1])
  for index in range(target.shape[1]):
    logits, cache, _ = model.decode_step(target[:, index], index, cache, source_mask)
    np.testing.assert_allclose(logits.numpy(), full[:, index], rtol=1e-4, atol=1e-5)


def test_beam_search_scores_are_full_pass_log_probs_with_the_switch_off(make_model, random_batch):
  model = make_model(scale_attention_logits=False)
  source, _ = with_padding(random_batch(3))
  max_lengths = tf.constant([5, 4, 6])
  tokens, scores = decoding.beam_search(model, source, max_lengths, beam_size=3, alpha=0.0)
  tokens = tokens.numpy()
  decoder_input = np.concatenate([np.full((3, 1), decoding.START_ID), tokens[:, :-1]], 1)
  log_probs = tf.nn.log_softmax(model((source, decoder_input))).numpy()
  for row in range(3):
    ends = np.flatnonzero(tokens[row] == decoding.END_ID)
    length = ends[0] + 1 if len(ends) else int(max_lengths[row])
    chosen = log_probs[row, np.arange(length), tokens[row, :length]]
    np.testing.assert_allclose(scores.numpy()[row], chosen.sum(), rtol=1e-4, atol=1e-4)


def test_get_config_and_keras_file_round_trip_the_new_fields(make_model, random_batch, tmp_path):
  model = make_model(scale_attention_logits=False, embedding_initializer="normal")
  config = model.get_config()
  assert config["scale_attention_logits"] is False
  assert config["embedding_initializer"] == "normal"
  batch = with_padding(random_batch(4))
  expected = model(batch).numpy()
  clone = Transformer.from_config(config)
  clone(batch)
  clone.set_weights(model.get_weights())
  np.testing.assert_array_equal(clone(batch).numpy(), expected)
  path = tmp_path / "model.keras"
  model.save(path)
  restored = keras.models.load_model(path)
  assert all(a.mha.scale_attention_logits is False for a in attention_layers(restored))
  np.testing.assert_array_equal(restored(batch).numpy(), expected)


def test_config_defaults_and_validation():
  config = default_config()
  assert config.model.scale_attention_logits is True
  assert config.model.embedding_initializer == "uniform"
  config.model.embedding_initializer = "xavier"
  with pytest.raises(ConfigError, match="model.embedding_initializer"):
    validate_config(config)


@pytest.mark.parametrize("output_weights", ["tied", "shared"])
def test_embedding_initializer_reaches_the_embedding(make_model, output_weights):
  d_model, vocab = 32, 2000
  for name in ("uniform", "normal"):
    model = make_model(vocab_sizes=(vocab, vocab), d_model=d_model,
                       output_weights=output_weights, embedding_initializer=name)
    weights = model.output_projection.numpy()  # the target embedding (tied)
    if name == "uniform":
      assert np.abs(weights).max() <= 0.05
      assert abs(weights.std() - 0.05 / np.sqrt(3)) < 0.001
    else:
      assert abs(weights.std() - d_model ** -0.5) < 0.005
      assert np.abs(weights).max() > 0.5  # far outside U(-0.05, 0.05)


def test_unknown_embedding_initializer_is_one_clear_error(make_model):
  with pytest.raises(ValueError, match=r"config\.model\.embedding_initializer: unknown value 'xavier'"):
    make_model(embedding_initializer="xavier")
