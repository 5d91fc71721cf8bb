"""BLEU under ``KERAS_BACKEND=jax`` from a prepared folder, with no TensorFlow import.

``KERAS_BACKEND=jax python evaluate.py --model_dir=<run> --data=<prepare.py folder>``
scores a run as the TensorFlow evaluation does
(:mod:`transformer.inference.evaluation`), from what ``prepare.py`` wrote:
the split's token ids (the TensorFlow tokenizer's, made once) are decoded by
:class:`transformer.inference.jax_decoding.JaxDecoder`, and the outputs, and
the references' ids for the ``bleu`` scoring's round trip, are turned back
into text by :class:`transformer.data.detokenize.Detokenizer` from the
folder's ``vocab.en.txt``. The ``whole_word`` scoring reads the references
as in the data from the folder's ``references.<split>.en.txt`` (a folder
prepared before it kept them: from the TED files its manifest's ``data``
names). Both files are checked against the manifest's sha256 first. The record (:mod:`transformer.inference.scoring`) is the
TensorFlow evaluation's.

Two things can differ from it, both only for sentences longer than the
prepared ``max_tokens`` (none of the TED dev and test sentences at 128): the
prepared source was cut to ``max_tokens`` ids, where the TensorFlow
translator cuts at the model's ``max_position``, and the prepared reference
to ``max_tokens + 1`` ids before its round trip.
"""

from pathlib import Path
from typing import Callable, List

import ml_collections
import numpy as np

from transformer.data import shards
from transformer.data import ted
from transformer.data.detokenize import Detokenizer
from transformer.inference import scoring
from transformer.inference.jax_decoding import JaxDecoder
from transformer.model import losses
from transformer.model import Transformer
from transformer.run import keras_checkpoints
from transformer.run import files
from transformer.run import progress
from transformer.run import run_folder


class PreparedEvaluationError(ValueError):
  """The run and the prepared folder do not fit together, or a file is missing."""


def restore_run(model_dir: Path, manifest: dict, average_last: int = 0):
  """``(config, model, weights paths)``: the run's model with its last (or the
  mean of its last ``average_last``) ``model.weights.h5``."""
  mismatch = run_folder.vocabulary_mismatch(model_dir, manifest["tokenizer_vocabulary_sha256"])
  if mismatch:
    raise PreparedEvaluationError(f"the prepared folder's ids: {mismatch}")
  checkpoints = run_folder.checkpoint_dir(model_dir)
  if not keras_checkpoints.exist(checkpoints):
    raise PreparedEvaluationError(f"{checkpoints} holds no model.weights.h5 checkpoint (a run "
                                  "trained under JAX); score a TensorFlow run on TensorFlow")
  paths = keras_checkpoints.last_weights(checkpoints, max(average_last, 1))
  config = ml_collections.ConfigDict(
      run_folder.read_run_config(model_dir / run_folder.CONFIG_FILE))
  sizes = manifest["vocab_sizes"]
  model = Transformer.from_model_config(config.model, sizes["pt"], sizes["en"])
  model.build(((None, None), (None, None)))
  keras_checkpoints.load_weights(model, paths)
  return config, model, [str(path) for path in paths]


def decode_sources(decoder: JaxDecoder, sources: List[np.ndarray],
                   batch_size: int) -> List[np.ndarray]:
  """Decodes ``sources`` (1-D id arrays) in batches of similar length, in input order.

  Each batch is padded to ``batch_size`` rows (rows of padding decode
  nothing) and to a multiple of :data:`shards.LENGTH_MULTIPLE` ids, so that
  ``jax.jit`` compiles a few shapes only.
  """
  order = np.argsort([len(ids) for ids in sources], kind="stable")
  outputs = [None] * len(sources)
  for start in range(0, len(order), batch_size):
    rows = order[start:start + batch_size]
    width = -(-max(len(sources[i]) for i in rows) // shards.LENGTH_MULTIPLE)
    batch = np.zeros((batch_size, width * shards.LENGTH_MULTIPLE), np.int32)
    for row, i in enumerate(rows):
      batch[row, :len(sources[i])] = sources[i]
    tokens, _ = decoder(batch)
    for row, i in enumerate(rows):
      outputs[i] = tokens[row]
  return outputs


def teacher_forced_metrics(model, split: shards.Split, config) -> dict:
  """The label-smoothed loss and masked accuracy fed the references, as
  :func:`transformer.inference.evaluation.teacher_forced_metrics` gives them."""
  metrics = losses.TokenMetrics()
  for inputs, labels in shards.epoch_batches(split.trimmed(config.data.max_tokens),
                                             config.data, shuffle=False):
    logits = model(inputs, training=False)
    loss_sum, tokens = losses.masked_cross_entropy_sum(labels, logits,
                                                       config.training.label_smoothing)
    metrics.add(loss_sum, tokens, losses.masked_correct_sum(labels, logits)[0])
  return {"loss": metrics.loss, "accuracy": metrics.accuracy, "tokens": int(metrics.tokens)}


def raw_references(prepared_dir, split: str, count: int) -> List[str]:
  """The first ``count`` English sentences of ``split`` as in the data (the
  ``whole_word`` scoring's references): the folder's own copy, or for a folder
  prepared before it kept one, the TED files it was prepared from."""
  kept = shards.read_references(prepared_dir, split)
  if kept is not None:
    return kept[:count]
  data = shards.read_manifest(prepared_dir).get("data")
  if not data or data == "tfds":
    raise PreparedEvaluationError(
        f"{prepared_dir} holds no {split} references (the whole_word scoring's) and names no "
        "TED files to read them from; run prepare.py again to keep them in the folder")
  try:
    pairs = ted.local_split_pairs(data, split)
  except (ted.DataError, OSError) as e:
    raise PreparedEvaluationError(
        f"the whole_word scoring reads the references from the TED files the folder was "
        f"prepared from, {data} (the folder predates the references kept in "
        f"it: prepare it again to carry them): {e}") from e
  return [en for _, en in pairs[:count]]


def missing_split(prepared_dir, split: str) -> str:
  """The one line for a folder without ``split``: those prepared before
  prepare.py wrote the test split."""
  return (f"{prepared_dir} holds no {split} split (prepared by an older prepare.py, which "
          f"wrote train and validation only); run prepare.py again with the same flags to "
          f"write it")


def evaluate_prepared(model_dir, prepared_dir, split: str, method: str, *, average_last: int = 0,
                      output_dir=None, batch_size: int = 64, max_sentences: int = 0,
                      say: Callable[[str], None] = print) -> dict:
  """Scores the run of ``model_dir`` on ``split`` of ``prepared_dir``; returns
  the BLEU record, also written to ``<output_dir>/<stem>.json`` (default
  ``<model_dir>/bleu``) with the hypotheses beside it."""
  model_dir, prepared_dir = Path(model_dir), Path(prepared_dir)
  output_dir = Path(output_dir or run_folder.bleu_dir(model_dir))
  files.check_writable(output_dir)  # an OSError now, not after the decoding
  manifest = shards.read_manifest(prepared_dir)
  if split not in manifest["splits"]:
    raise PreparedEvaluationError(missing_split(prepared_dir, split))
  # Checked before any decoding: an edited token changes every hypothesis.
  vocabulary = shards.checked_file(prepared_dir, "vocab.en.txt")
  whole_split = shards.load_split(prepared_dir, split)
  pairs = whole_split.take(max_sentences)
  references = raw_references(prepared_dir, split, len(pairs))
  config, model, checkpoints = restore_run(model_dir, manifest, average_last)
  say(f"restored {', '.join(checkpoints)}")
  decoder = JaxDecoder(model, method, **config.decoding.to_dict())
  english = Detokenizer.from_file(vocabulary)
  with progress.announced(f"translating {len(pairs)} {split} sentences ({method}, JAX)", say):
    tokens = decode_sources(decoder, pairs.pt, batch_size)
  hypotheses = english(tokens)
  result = scoring.score_hypotheses(hypotheses, references, output_dir, split, method,
                                    english(pairs.en), len(whole_split))
  with progress.announced(f"teacher-forced loss and accuracy on {len(pairs)} sentences", say):
    teacher_forced = teacher_forced_metrics(model, pairs, config)
  result = {**result, "checkpoints": checkpoints, "export_dir": None,
            "teacher_forced": teacher_forced}
  scoring.write_result(result, hypotheses)
  return result
