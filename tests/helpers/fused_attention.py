"""The fused attention path (``keras.ops.dot_product_attention``) against the
explicit one, on the backend this process runs: ``gaps()`` gives the largest
difference of each case relative to its largest value, at the rows that matter
(those with at least one key to attend to), which ``check`` bounds. Imported by
tests/unit/test_fused_attention.py under TensorFlow and run in a child Python
under JAX by tests/backends/test_fused_attention_under_jax.py.

Tolerance: float32 on CPU, the two paths differ in the order of their sums
(and multiply by 1/√d_k where the explicit one divides by √d_k); 1e-5 of the
largest value bounds that, where a lost mask or scale moves outputs by 1e-1 or more."""

import json

import keras
import numpy as np

from transformer.model import Transformer
from transformer.model.attention import MultiHeadAttention, padding_mask

# Source lengths 6, 3 and 0: the last row has no key to attend to (its outputs do not matter).
SOURCE = np.array([[5, 9, 7, 4, 8, 3], [6, 4, 3, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
TARGET = np.array([[2, 7, 5, 9, 3], [2, 8, 3, 0, 0], [2, 3, 0, 0, 0]])
REAL_ROWS = slice(0, 2)
TOLERANCE = 1e-5


def check(gaps_by_case):
  for name, gap in gaps_by_case.items():
    assert gap <= TOLERANCE, f"{name}: fused and explicit attention differ by {gap:.2e}"


def _relative_gap(fused, explicit):
  """Largest |fused - explicit| at the real rows, over the largest |explicit| there."""
  return np.abs(fused - explicit)[REAL_ROWS].max() / np.abs(explicit[REAL_ROWS]).max()


def _layer_gap(scale: bool, causal: bool):
  """One MultiHeadAttention, fused against explicit: padded keys, causal or cross."""
  rng = np.random.default_rng(7)
  layer = MultiHeadAttention(num_heads=4, key_dim=8, scale_attention_logits=scale)
  query = rng.normal(size=(3, 5, 32)).astype("float32")
  value = query if causal else rng.normal(size=(3, 6, 32)).astype("float32")
  mask = None if causal else padding_mask(SOURCE)
  # Large inputs: logits of tens, so that a missing 1/√d_k or mask changes the softmax.
  explicit, _ = layer(3 * query, 3 * value, attention_mask=mask, use_causal_mask=causal)
  layer.fused = True
  fused, weights = layer(3 * query, 3 * value, attention_mask=mask, use_causal_mask=causal)
  assert weights is None
  return _relative_gap(np.asarray(fused), np.asarray(explicit))


def _model_gap(scale: bool):
  """A whole model's logits, both paths (the paper's head width, no attention dropout)."""
  keras.utils.set_random_seed(3)
  model = Transformer(num_layers=2, d_model=32, num_heads=4, dff=64, input_vocab_size=20,
                      target_vocab_size=20, head_width="split",
                      attention_dropout_rate=0.0, scale_attention_logits=scale)
  explicit = np.asarray(model((SOURCE, TARGET), training=False))
  model.use_fused_attention()
  fused = np.asarray(model((SOURCE, TARGET), training=False))
  assert np.isfinite(fused).all()
  return _relative_gap(fused, explicit)


def gaps():
  """Each case's :func:`_relative_gap`: outputs of one layer, or a model's logits."""
  return {"cross": _layer_gap(True, False), "causal": _layer_gap(True, True),
          "cross_no_scale": _layer_gap(False, False), "causal_no_scale": _layer_gap(False, True),
          "model": _model_gap(True), "model_no_scale": _model_gap(False)}


if __name__ == "__main__":
  print(json.dumps({name: float(gap) for name, gap in gaps().items()}))
