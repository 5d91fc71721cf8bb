"""One decoding in ``keras.ops``, the tokens and scores of the old TensorFlow decoding.

``transformer/inference/decoding.py`` is written once in backend-neutral ops.
This test holds it to the TensorFlow-only decoding it replaced, kept as an
oracle in ``tests/helpers/tf_decoding.py``, on the same weights: the
``configs/tutorial.py``, ``configs/tutorial_2021.py`` and ``configs/base.py``
layer shapes with small vocabularies, and a two-layer tiny model whose beams
depart from greedy (``varied``: the noisy untrained models mostly repeat a
token, where beam search finds what greedy finds), a padded batch of four
sentences, greedy and beam search (beam 4, α 0.6). Here, under TensorFlow,
both decoders run eagerly (``tests/unit/test_decoding.py`` and the export
tests run them as graphs); a child Python under ``KERAS_BACKEND=jax``, with
TensorFlow's import blocked (``helpers/no_tensorflow.py``), rebuilds each model
from its config, loads the same ``.weights.h5`` and decodes with
:class:`transformer.inference.jax_decoding.JaxDecoder` (``jax.jit``).
"""

import importlib
import json
import os
from pathlib import Path
import subprocess
import sys

import keras
import numpy as np
import pytest

from helpers import tf_decoding
from helpers.backends import needs_jax
from helpers.no_tensorflow import BLOCK_TENSORFLOW
from transformer.inference import decoding
from transformer.model import Transformer

REPO_DIR = Path(__file__).resolve().parents[2]
# (input, target) vocabulary sizes; base shares one matrix over a joint vocabulary.
VOCABULARIES = {"tutorial": (500, 400), "tutorial_2021": (500, 400), "base": (600, 600),
                "varied": (400, 400)}
EXTRA_LENGTH = 6  # short outputs keep the base model's beams quick
# Noise on every weight: the outputs of an untrained model vary from sentence to sentence.
WEIGHT_NOISE = 0.3

JAX_CHILD = BLOCK_TENSORFLOW + f"""
import json
from pathlib import Path
import sys

import numpy as np

from transformer.inference.jax_decoding import JaxDecoder
from transformer.model import Transformer

folder = Path(sys.argv[1])
source = np.load(folder / "source.npy")
report = {{}}
for name in {list(VOCABULARIES)!r}:
  model = Transformer.from_config(json.loads((folder / (name + ".config.json")).read_text()))
  model.build(((None, None), (None, None)))
  model.load_weights(folder / (name + ".weights.h5"))
  greedy, _ = JaxDecoder(model, "greedy", extra_length={EXTRA_LENGTH})(source)
  beam, scores = JaxDecoder(model, "beam", extra_length={EXTRA_LENGTH})(source)
  report[name] = dict(greedy=greedy.tolist(), beam=beam.tolist(), scores=scores.tolist())
  teacher = np.load(folder / (name + ".teacher.npy"))
  np.save(folder / (name + ".jax_logits.npy"), np.asarray(model((source, teacher), training=False)))
report["tensorflow_imports_tried"] = TENSORFLOW_IMPORTS_TRIED
print(json.dumps(report))
"""


def padded_source(rng):
  """Four sentences of 9, 5, 2 and 7 tokens ([START] words [END]), 0-padded."""
  source = np.zeros((4, 9), np.int32)
  for row, length in enumerate((9, 5, 2, 7)):
    source[row, :length] = [decoding.START_ID, *rng.integers(4, 400, length - 2),
                            decoding.END_ID]
  return source


def noisy_model(name, rng, tiny_config):
  """The configuration's model with noise on every weight; ``varied``: the
  tiny one, two layers, whose own output layer N(0, 1) never picks [PAD],
  [UNK] or [START] and favours [END] a little (as test_decoding.py's)."""
  if name == "varied":
    model_config = tiny_config(num_layers=2, output_weights="untied", max_position=64).model
  else:
    model_config = importlib.import_module("configs." + name).get_config().model
  model = Transformer.from_model_config(model_config, *VOCABULARIES[name])
  model.build(((None, None), (None, None)))
  for variable in model.weights:
    variable.assign(np.asarray(variable) + rng.normal(0.0, WEIGHT_NOISE, variable.shape))
  if name == "varied":
    model.final_layer.kernel.assign(rng.normal(0.0, 1.0, model.final_layer.kernel.shape))
    model.final_layer.bias.assign([-30.0, -30.0, -30.0, 1.0] + [0.0] * (VOCABULARIES[name][1] - 4))
  return model


def decode_both(model, source):
  """``{decoder: {"greedy", "beam", "scores"}}`` for the oracle and the new decoding."""
  limits = decoding.output_length_limits(source, EXTRA_LENGTH, model.max_position)
  results = {}
  for label, module in (("oracle", tf_decoding), ("keras_ops", decoding)):
    tokens, scores = module.beam_search(model, source, limits, 4, 0.6)
    results[label] = {"greedy": np.asarray(module.greedy_decode(model, source, limits)),
                      "beam": np.asarray(tokens), "scores": np.asarray(scores)}
  return results


def teacher_input(tokens):
  """The decoder input whose full pass gives the logits that scored ``tokens``
  ``(batch, out_len)``: [START], then every token but the last."""
  return np.concatenate([np.full((len(tokens), 1), decoding.START_ID), tokens[:, :-1]], 1)


def strip_padding(rows):
  return [np.trim_zeros(np.asarray(row), "b").tolist() for row in rows]


@pytest.fixture(scope="module")
def decoded(tmp_path_factory, tiny_config):
  """The TensorFlow side: the weights saved for the JAX child, and both decoders' outputs."""
  folder = tmp_path_factory.mktemp("same_decoding")
  keras.utils.set_random_seed(53)
  rng = np.random.default_rng(53)
  source = padded_source(rng)
  np.save(folder / "source.npy", source)
  outputs = {}
  for name in VOCABULARIES:
    model = noisy_model(name, rng, tiny_config)
    model.save_weights(folder / f"{name}.weights.h5")
    (folder / f"{name}.config.json").write_text(json.dumps(model.get_config()))
    outputs[name] = decode_both(model, source)
    teacher = teacher_input(outputs[name]["oracle"]["beam"])
    np.save(folder / f"{name}.teacher.npy", teacher)
    outputs[name]["oracle"]["logits"] = np.asarray(model((source, teacher), training=False))
  return folder, outputs


def score_bounds(oracle, jax_logits):
  """How far float32 lets the JAX beam scores lie from the oracle's, per sentence.

  A score is the sum of its n tokens' log-probabilities x_t - logsumexp(x) over
  lp(n). Moving the logits x by at most δ moves each term by at most 2δ (x_t by
  δ, logsumexp by δ: it is 1-Lipschitz in the max norm), so the score by at most
  2nδ / lp(n); adding the n terms in float32 adds n·eps·|score|. δ is the
  largest gap between the two backends' logits over the sentence's positions
  (one full pass each, on the oracle's tokens): the decoder's rounding, which
  noisy weights amplify, not the decoding's (test_same_logits.py).
  """
  lengths = np.count_nonzero(oracle["beam"], axis=1)  # [END] included
  gaps = np.abs(jax_logits.astype(np.float64) - oracle["logits"])
  deltas = np.array([gaps[row, :n].max() if n else 0.0 for row, n in enumerate(lengths)])
  penalty = np.asarray(decoding.length_penalty(lengths, 0.6))
  eps = np.finfo(np.float32).eps
  return 2 * lengths * deltas / penalty + lengths * eps * np.abs(oracle["scores"])


@pytest.mark.slow  # the base model's beam search, twice
def test_keras_ops_decoding_gives_the_oracles_tokens_and_scores_on_tensorflow(decoded):
  _, outputs = decoded
  departs = False
  for name, results in outputs.items():
    oracle, ours = results["oracle"], results["keras_ops"]
    # Outputs that a wrong cache, mask or reorder would change.
    assert len(set(map(tuple, strip_padding(oracle["beam"])))) == 4, (name, oracle)
    departs |= strip_padding(oracle["beam"]) != strip_padding(oracle["greedy"])
    for method in ("greedy", "beam"):
      np.testing.assert_array_equal(ours[method], oracle[method], err_msg=f"{name} {method}")
    np.testing.assert_allclose(ours["scores"], oracle["scores"], rtol=1e-5, err_msg=name)
  assert departs, "beam search gave greedy's outputs everywhere: it tests nothing of its own"


@pytest.mark.slow  # a child Python compiling six decoders
@needs_jax
def test_jax_decoding_gives_the_oracles_tokens_and_scores_without_tensorflow(decoded):
  folder, outputs = decoded
  child = subprocess.run(
      [sys.executable, "-c", JAX_CHILD, str(folder)], cwd=REPO_DIR, capture_output=True,
      text=True, timeout=600,
      env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO_DIR)})
  assert child.returncode == 0, child.stderr[-3000:]
  on_jax = json.loads(child.stdout.splitlines()[-1])
  assert on_jax.pop("tensorflow_imports_tried") == []
  for name, results in outputs.items():
    oracle = results["oracle"]
    for method in ("greedy", "beam"):
      # The compiled buffers are longer (static shapes), cut at the steps taken.
      np.testing.assert_array_equal(on_jax[name][method], oracle[method],
                                    err_msg=f"{name} {method}")
    # A lost length penalty or a wrong parent's cache moves a score by 0.1 to 1 and more.
    gaps = np.abs(np.asarray(on_jax[name]["scores"]) - oracle["scores"])
    bounds = score_bounds(oracle, np.load(folder / f"{name}.jax_logits.npy"))
    assert np.all(gaps <= bounds), f"{name}: score gaps {gaps} over their bounds {bounds}"
