"""Positional encoding (§3.5) and the √d_model-scaled embedding (§3.4)."""

import math

import numpy as np
import pytest
import tensorflow as tf

from transformer.model.embedding import PositionalEmbedding, positional_encoding


def paper_formula(pos, channel, depth):
  """PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(pos/10000^(2i/d)), one value."""
  i = channel // 2
  angle = pos / 10000 ** (2 * i / depth)
  return math.sin(angle) if channel % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize("pos", [0, 1, 7, 50, 999])
@pytest.mark.parametrize("channel", [0, 1, 2, 3, 62, 63, 126, 127])
def test_interleaved_layout_is_the_papers_formula(pos, channel):
  encoding = positional_encoding(1000, 128, "interleaved").numpy()
  assert encoding[pos, channel] == pytest.approx(paper_formula(pos, channel, 128), abs=1e-6)


@pytest.mark.parametrize("pos", [0, 3, 500])
@pytest.mark.parametrize("i", [0, 1, 31, 63])
def test_concatenated_layout_puts_sines_first_then_cosines(pos, i):
  encoding = positional_encoding(1000, 128, "concatenated").numpy()
  assert encoding[pos, i] == pytest.approx(paper_formula(pos, 2 * i, 128), abs=1e-6)
  assert encoding[pos, 64 + i] == pytest.approx(paper_formula(pos, 2 * i + 1, 128), abs=1e-6)


def test_layouts_are_a_fixed_channel_permutation_of_each_other():
  interleaved = positional_encoding(300, 64, "interleaved").numpy()
  concatenated = positional_encoding(300, 64, "concatenated").numpy()
  permutation = np.concatenate([np.arange(0, 64, 2), np.arange(1, 64, 2)])
  np.testing.assert_array_equal(interleaved[:, permutation], concatenated)
  assert not np.allclose(interleaved, concatenated)


def test_bad_layout_and_odd_depth_are_rejected():
  with pytest.raises(ValueError, match=r"config\.model\.positional_layout: unknown value 'sideways'"):
    positional_encoding(10, 8, "sideways")
  with pytest.raises(ValueError, match=r"config\.model\.d_model: must be even"):
    positional_encoding(10, 7)


@pytest.mark.parametrize("scale", [True, False])
def test_embedding_output_is_scaled_embedding_plus_encoding(scale):
  d_model = 32
  layer = PositionalEmbedding(100, d_model, max_position=64, scale_embeddings=scale,
                              dropout_rate=0.5)
  ids = np.array([[5, 17, 99, 0], [1, 2, 3, 4]])
  output = layer(ids, training=False).numpy()
  table = layer.embeddings.numpy()
  factor = math.sqrt(d_model) if scale else 1.0
  expected = factor * table[ids] + positional_encoding(4, d_model).numpy()[np.newaxis]
  np.testing.assert_allclose(output, expected, rtol=1e-6, atol=1e-6)


def test_embedding_offset_places_tokens_at_later_positions():
  layer = PositionalEmbedding(100, 16, max_position=32, dropout_rate=0.0)
  ids = np.array([[4, 8, 15, 16, 23]])
  full = layer(ids).numpy()
  one = layer(ids[:, 3:4], offset=tf.constant(3)).numpy()
  np.testing.assert_allclose(one[0, 0], full[0, 3], rtol=1e-6)


def test_embedding_dropout_applies_to_the_sum_in_training_only():
  layer = PositionalEmbedding(100, 64, max_position=16, dropout_rate=0.5)
  ids = np.ones((4, 16), dtype=np.int64)
  inference = layer(ids, training=False).numpy()
  training = layer(ids, training=True).numpy()
  dropped = training == 0
  assert 0.3 < dropped.mean() < 0.7
  np.testing.assert_allclose(training[~dropped], 2 * inference[~dropped], rtol=1e-5)
