"""Masks reach every layer: no look-ahead leakage, no attention to padding.

These are the properties the tutorial's implicit Keras masking loses under
Keras 3 (see transformer/model/attention.py); here they are checked end to end.
"""

import numpy as np
import pytest
import tensorflow as tf

from transformer.model.attention import padding_mask

VOCAB = 40


# configs/tiny.py with three layers and more dropout: a mask lost in any layer,
# or in training mode only, shows.
DEEP = dict(num_layers=3, dropout_rate=0.3, attention_dropout_rate=0.2, max_position=64)


def seed_states(model):
  return [(layer.seed_generator.state, layer.seed_generator.state.numpy())
          for layer in model._flatten_layers() if hasattr(layer, "seed_generator")]


def restore(states):
  for variable, value in states:
    variable.assign(value)


@pytest.mark.parametrize("head_width", ["split", "full"])
def test_no_look_ahead_leakage_in_training_mode_with_dropout(make_model, head_width):
  model = make_model(vocab_sizes=(VOCAB, VOCAB), **DEEP, head_width=head_width)
  rng = np.random.default_rng(0)
  source = rng.integers(1, VOCAB, (2, 9))
  target = rng.integers(1, VOCAB, (2, 8))
  model((source, target))
  states = seed_states(model)
  assert states, "the model should have dropout layers"
  t = 4
  changed = target.copy()
  changed[:, t + 1:] = rng.integers(1, VOCAB, (2, 8 - t - 1))
  assert not np.array_equal(changed, target)

  restore(states)
  before = model((source, target), training=True).numpy()
  restore(states)
  after = model((source, changed), training=True).numpy()
  np.testing.assert_allclose(after[:, :t + 1], before[:, :t + 1], rtol=1e-5, atol=1e-6)
  assert not np.allclose(after[:, t + 1:], before[:, t + 1:])
  # And dropout was really active: a third pass with fresh masks differs.
  assert not np.allclose(model((source, target), training=True).numpy(), before)


def test_returned_self_attention_scores_are_causal(make_model):
  model = make_model(vocab_sizes=(VOCAB, VOCAB), **DEEP)
  rng = np.random.default_rng(1)
  model((rng.integers(1, VOCAB, (2, 5)), rng.integers(1, VOCAB, (2, 6))), training=True)
  for layer in model.decoder.layers:
    scores = layer.self_attention.last_attn_scores.numpy()
    upper = np.triu(np.ones((6, 6), bool), k=1)
    assert np.all(scores[..., upper] == 0.0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, rtol=1e-5)


def encoder_layer_outputs(model, source):
  """Each encoder layer's output, computed layer by layer."""
  mask = padding_mask(source)
  x = model.encoder.embedding(source)
  outputs = []
  for layer in model.encoder.layers:
    x = layer(x, attention_mask=mask)
    outputs.append(x.numpy())
  return outputs


@pytest.mark.parametrize("output_weights", ["tied", "untied"])
def test_padding_the_source_changes_nothing_at_real_positions(make_model, output_weights):
  model = make_model(vocab_sizes=(VOCAB, VOCAB), **DEEP, output_weights=output_weights)
  rng = np.random.default_rng(2)
  source = np.concatenate([rng.integers(1, VOCAB, (2, 6)), np.zeros((2, 1), int)], axis=1)
  source[1, 4:] = 0  # the second sentence is shorter
  target = rng.integers(1, VOCAB, (2, 5))
  padded_source = np.concatenate([source, np.zeros((2, 7), int)], axis=1)

  logits = model((source, target)).numpy()
  padded_logits = model((padded_source, target)).numpy()
  np.testing.assert_allclose(padded_logits, logits, rtol=1e-5, atol=1e-5)

  real = source != 0
  for short, long in zip(encoder_layer_outputs(model, source),
                         encoder_layer_outputs(model, padded_source)):
    np.testing.assert_allclose(long[:, :7][real], short[real], rtol=1e-5, atol=1e-5)

  padded = padded_source == 0
  # Also in training mode, with dropout on the attention weights and outputs.
  for training in (False, True):
    model((padded_source, target), training=training)
    for layer in model.decoder.layers:
      weights = layer.cross_attention.last_attn_scores.numpy()  # (b, h, tgt, src)
      assert np.all(weights.transpose(0, 3, 1, 2)[padded] == 0.0), training
      np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    for layer in model.encoder.layers:
      weights = layer.self_attention.last_attn_scores.numpy()
      assert np.all(weights.transpose(0, 3, 1, 2)[padded] == 0.0), training


def test_padding_the_target_changes_nothing_at_real_positions(make_model):
  model = make_model(vocab_sizes=(VOCAB, VOCAB), **DEEP)
  rng = np.random.default_rng(3)
  source = rng.integers(1, VOCAB, (2, 6))
  target = rng.integers(1, VOCAB, (2, 5))
  target[0, 3:] = 0
  padded_target = np.concatenate([target, np.zeros((2, 6), int)], axis=1)
  logits = model((source, target)).numpy()
  padded_logits = model((source, padded_target)).numpy()
  real = target != 0
  np.testing.assert_allclose(padded_logits[:, :5][real], logits[real], rtol=1e-5, atol=1e-5)
