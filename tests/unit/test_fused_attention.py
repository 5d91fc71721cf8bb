"""Fused attention (``keras.ops.dot_product_attention``, cuDNN's under JAX on a
GPU) gives the explicit path's outputs, and is used only where it may be: when
switched on, and with no attention dropout in effect.

Tolerance: float32 on CPU, the two paths differ in the order of their sums
(and multiply by 1/√d_k where the explicit one divides by √d_k); 1e-5 of the
largest value bounds that, where a lost mask or scale moves outputs by 1e-1 or more.
"""

import json
import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

from helpers import fused_attention
from helpers.backends import needs_jax
from transformer.model import Transformer
from transformer.model.attention import MultiHeadAttention

TOLERANCE = 1e-5
REPO_DIR = Path(__file__).resolve().parents[2]


def _check(gaps):
  for name, gap in gaps.items():
    assert gap <= TOLERANCE, f"{name}: fused and explicit attention differ by {gap:.2e}"


def test_fused_attention_matches_the_explicit_path_under_tensorflow():
  _check(fused_attention.gaps())


@needs_jax
@pytest.mark.slow
def test_fused_attention_matches_the_explicit_path_under_jax():
  env = {**os.environ, "KERAS_BACKEND": "jax",
         "PYTHONPATH": os.pathsep.join([str(REPO_DIR), str(REPO_DIR / "tests")])}
  result = subprocess.run([sys.executable, "-m", "helpers.fused_attention"], cwd=REPO_DIR,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  _check(json.loads(result.stdout.strip().splitlines()[-1]))


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
  np.testing.assert_allclose(np.asarray(fused), np.asarray(explicit), atol=TOLERANCE)
  assert model.get_config() == config
