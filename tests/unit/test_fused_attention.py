"""Fused attention (``keras.ops.dot_product_attention``, cuDNN's under JAX on a
GPU) gives the explicit path's outputs (helpers/fused_attention.py), and is used
only where it may be: when switched on, and with no attention dropout in effect.
Under JAX: tests/backends/test_fused_attention_under_jax.py.
"""

import numpy as np

from helpers import fused_attention
from transformer.model import Transformer
from transformer.model.attention import MultiHeadAttention


def test_fused_attention_matches_the_explicit_path_under_tensorflow():
  fused_attention.check(fused_attention.gaps())


def _model(**settings):
  return Transformer(num_layers=1, d_model=16, num_heads=2, dff=32, input_vocab_size=20,
                     target_vocab_size=20, **settings)


def test_a_bare_model_keeps_its_attention_scores():
  """The tutorial reads ``last_attn_scores`` after calling the model."""
  model = _model()
  model((fused_attention.SOURCE, fused_attention.TARGET), training=False)
  assert model.decoder.last_attn_scores.shape == (3, 2, 5, 6)


def test_attention_dropout_in_training_takes_the_explicit_path():
  layer = MultiHeadAttention(num_heads=2, key_dim=4, attention_dropout_rate=0.5)
  layer.fused = True
  x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
  _, weights = layer(x, x, training=True)
  assert weights is not None  # explicit: dropout on its weights
  _, weights = layer(x, x, training=False)
  assert weights is None  # inference: no dropout in effect, fused


def test_decoding_steps_keep_their_weights_and_the_switch_changes_no_setting():
  model = _model(attention_dropout_rate=0.0)
  source = fused_attention.SOURCE[:2]
  model((source, fused_attention.TARGET[:2]), training=False)
  config = model.get_config()
  context, mask = model.encode(source)
  cache = model.initial_cache(context, 4)
  _, _, explicit = model.decode_step(np.array([2, 2]), 0, cache, mask)
  model.use_fused_attention()
  context, mask = model.encode(source)
  cache = model.initial_cache(context, 4)
  _, _, fused = model.decode_step(np.array([2, 2]), 0, cache, mask)
  np.testing.assert_allclose(np.asarray(fused), np.asarray(explicit), atol=fused_attention.TOLERANCE)
  assert model.get_config() == config
