"""The model's modules run under the JAX backend with TensorFlow impossible to import.

A child Python under ``KERAS_BACKEND=jax`` blocks every import of
``tensorflow`` and ``tensorflow_text`` (``helpers/no_tensorflow.py``), imports
the layers, the model, the losses and the schedule, builds a tiny model and
uses all of them: a padded batch, the losses and metrics, the schedule and its
config, and cached decoding under ``jax.jit`` (the position a traced number).
"""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from helpers.backends import needs_jax
from helpers.no_tensorflow import BLOCK_TENSORFLOW

REPO_DIR = Path(__file__).resolve().parents[2]
MODEL_MODULES = ("settings", "attention", "embedding", "feed_forward", "encoder", "decoder",
                 "transformer", "losses", "optimization")

CHILD = BLOCK_TENSORFLOW + f"""
import importlib
import json

import jax
import keras
import numpy as np

for name in {MODEL_MODULES!r}:
  importlib.import_module("transformer.model." + name)
from transformer.model import losses
from transformer.model import optimization
from transformer.model import Transformer

keras.utils.set_random_seed(0)
# Tied output and learned positions: the paths the cross-backend test's
# configurations (untied, shared, sinusoids) leave out.
model = Transformer(num_layers=1, d_model=16, num_heads=2, dff=32, input_vocab_size=20,
                    target_vocab_size=20, output_weights="tied",
                    positional_encoding="learned", max_position=8)
source = np.array([[5, 6, 7, 0, 0], [8, 9, 0, 0, 0]])
target = np.array([[1, 4, 5, 0], [1, 3, 0, 0]])
labels = np.array([[4, 5, 2, 0], [3, 2, 0, 0]])
logits = model((source, target), training=False)
model((source, target), training=True)  # dropout draws from JAX's random numbers

loss_sum, tokens = losses.masked_cross_entropy_sum(labels, logits, label_smoothing=0.1)
correct, _ = losses.masked_correct_sum(labels, logits)
schedule = optimization.WarmupInverseSquareRoot(16, warmup_steps=10, cooldown_steps=5,
                                                cooldown_end_step=20)

context, source_mask = model.encode(source)
cache = model.initial_cache(context, target.shape[1])
decode_step = jax.jit(model.decode_step)
step_gaps = []
for index in range(target.shape[1]):
  step_logits, cache, _ = decode_step(target[:, index], index, cache, source_mask)
  step_gaps.append(float(np.abs(np.asarray(step_logits) - np.asarray(logits[:, index])).max()))

print(json.dumps(dict(
    backend=keras.backend.backend(),
    tensorflow_imports_tried=TENSORFLOW_IMPORTS_TRIED, keras_probes=KERAS_PROBES,
    tensorflow_modules=sorted(m for m in sys.modules if m.partition(".")[0] in
                              ("tensorflow", "tensorflow_text")),
    logits_shape=list(logits.shape), logits_dtype=str(logits.dtype),
    logits_finite=bool(np.isfinite(np.asarray(logits)).all()),
    loss=float(losses.masked_loss(labels, logits)), tokens=float(tokens),
    correct=float(correct), accuracy=float(losses.masked_accuracy(labels, logits)),
    rates=[float(schedule(i)) for i in (0, 9, 17, 25)],
    schedule_config=schedule.get_config(),
    step_gaps=step_gaps)))
"""


@pytest.mark.slow  # a child Python: about 13 CPU seconds
@needs_jax
def test_model_modules_run_under_jax_without_tensorflow():
  child = subprocess.run(
      [sys.executable, "-c", CHILD], cwd=REPO_DIR, capture_output=True, text=True, timeout=300,
      env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO_DIR)})
  assert child.returncode == 0, child.stderr[-3000:]
  report = json.loads(child.stdout.splitlines()[-1])

  assert report["backend"] == "jax"
  assert report["tensorflow_imports_tried"] == []
  # keras.utils.set_random_seed asks whether TensorFlow is there, and goes on
  # without it (helpers/no_tensorflow.py).
  assert report["keras_probes"] == ["tensorflow"]
  assert report["tensorflow_modules"] == []
  assert report["logits_shape"] == [2, 4, 20]
  assert report["logits_dtype"] == "float32"
  assert report["logits_finite"]
  assert report["tokens"] == 5.0  # the labels' non-zero entries
  assert 0.0 <= report["correct"] <= 5.0
  assert report["accuracy"] == pytest.approx(report["correct"] / 5.0)
  assert report["loss"] > 0.0
  # d_model^-0.5 · min(step^-0.5, step · 10^-1.5), with the cooldown's fall
  # over steps 15..20 (iteration 17: 3/5 of the rate; 25: zero).
  warmup = lambda step: 16 ** -0.5 * min(step ** -0.5, step * 10 ** -1.5)
  assert report["rates"] == pytest.approx([warmup(1), warmup(10), warmup(18) * 3 / 5, 0.0],
                                          rel=1e-6)
  assert report["schedule_config"] == {"d_model": 16, "warmup_steps": 10, "scale": 1.0,
                                       "cooldown_steps": 5, "cooldown_end_step": 20}
  # Each cached step under jax.jit gives the full pass's logits at its position.
  assert max(report["step_gaps"]) < 1e-5, report["step_gaps"]
