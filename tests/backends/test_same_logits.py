"""One ``.weights.h5``, the same logits under the TensorFlow and the JAX backend.

A child Python per backend (Keras picks its backend once per process) builds
the ``configs/tutorial.py``, ``configs/tutorial_2021.py`` and ``configs/base.py``
models, with small vocabularies to keep the files and the time down (the
layer shapes are the configurations' own). The TensorFlow child gives every
weight seeded noise and saves it; the JAX child, with TensorFlow's import
blocked, loads that file. Both run the same padded batch, so that the source's
padding mask and the target's causal mask decide the logits, and both check
that ``from_config(get_config())`` with the same weights gives the same logits.
"""

import json
import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

from helpers.backends import needs_jax
from helpers.no_tensorflow import BLOCK_TENSORFLOW

REPO_DIR = Path(__file__).resolve().parents[2]

# (input, target) vocabulary sizes; base shares one matrix over a joint vocabulary.
VOCABULARIES = {"tutorial": (500, 400), "tutorial_2021": (500, 400), "base": (600, 600)}

CHILD = f"""
import importlib
import json
from pathlib import Path
import sys

import keras
import numpy as np

from transformer.model import Transformer

folder = Path(sys.argv[1])
writes_weights = keras.backend.backend() == "tensorflow"
keras.utils.set_random_seed(47)
rng = np.random.default_rng(47)
# Three sentences of 9, 5 and 2 source tokens and 7, 4 and 1 target tokens (0 pads).
source = rng.integers(3, 400, (3, 9))
source[np.arange(9) >= np.array([[9], [5], [2]])] = 0
target = rng.integers(3, 400, (3, 7))
target[np.arange(7) >= np.array([[7], [4], [1]])] = 0

report = {{}}
for name, (input_vocab, target_vocab) in {VOCABULARIES!r}.items():
  model_config = importlib.import_module("configs." + name).get_config().model
  model = Transformer.from_model_config(model_config, input_vocab, target_vocab)
  model.build((source.shape, target.shape))
  weights_file = folder / (name + ".weights.h5")
  if writes_weights:
    # Noise on every weight: biases and LayerNorm offsets start at 0 and scales
    # at 1, where a weight loaded into the wrong place would not show.
    for variable in model.weights:
      variable.assign(np.asarray(variable) + rng.normal(0.0, 0.05, variable.shape))
    model.save_weights(weights_file)
  else:
    model.load_weights(weights_file)
  logits = np.asarray(model((source, target), training=False))
  np.save(folder / (name + "." + keras.backend.backend() + ".npy"), logits)

  config = json.loads(json.dumps(model.get_config()))
  clone = Transformer.from_config(config)
  clone.build((source.shape, target.shape))
  clone.load_weights(weights_file)
  clone_logits = np.asarray(clone((source, target), training=False))
  report[name] = dict(config=config, parameters=model.count_params(),
                      clone_gap=float(np.abs(clone_logits - logits).max()))
report["tensorflow_imports_tried"] = globals().get("TENSORFLOW_IMPORTS_TRIED")  # under JAX
print(json.dumps(report))
"""


def run_child(backend, folder, script):
  child = subprocess.run(
      [sys.executable, "-c", script, str(folder)], cwd=REPO_DIR, capture_output=True,
      text=True, timeout=600,
      env={**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(REPO_DIR)})
  assert child.returncode == 0, f"{backend} child failed:\n{child.stderr[-3000:]}"
  return json.loads(child.stdout.splitlines()[-1])


@pytest.mark.slow  # two child Pythons
@needs_jax
def test_one_weights_file_gives_the_same_logits_on_tensorflow_and_jax(tmp_path):
  on_tensorflow = run_child("tensorflow", tmp_path, CHILD)
  on_jax = run_child("jax", tmp_path, BLOCK_TENSORFLOW + CHILD)
  assert on_jax.pop("tensorflow_imports_tried") == []

  for name in VOCABULARIES:
    tf_logits = np.load(tmp_path / f"{name}.tensorflow.npy")
    jax_logits = np.load(tmp_path / f"{name}.jax.npy")
    assert tf_logits.shape == (3, 7, VOCABULARIES[name][1])
    assert np.isfinite(tf_logits).all()
    # Both backends compute in float32 but sum in different orders (oneDNN or
    # Eigen against XLA), so each sum over d_model to d_ff terms differs in its
    # last bits (float32 keeps 6e-8 relative) and the differences pass through
    # 8 to 12 sub-layers. The largest gap seen was 2e-6 of the largest logit
    # (base); 1e-4 of it leaves a margin of 50. A wrong mask on one side
    # moves logits by far more: source padding not masked, 0.4 to 0.7 of the
    # largest logit; one future target position let in, 0.004 (base) to 0.09.
    tolerance = 1e-4 * np.abs(tf_logits).max()
    gap = np.abs(jax_logits - tf_logits).max()
    assert gap <= tolerance, f"{name}: logits differ by {gap:.3g} (tolerance {tolerance:.3g})"

    assert on_jax[name]["config"] == on_tensorflow[name]["config"]
    assert on_jax[name]["parameters"] == on_tensorflow[name]["parameters"]
    # from_config(get_config()) with the same weights: the same computation.
    assert on_tensorflow[name]["clone_gap"] == 0.0
    assert on_jax[name]["clone_gap"] == 0.0
