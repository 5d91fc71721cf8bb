"""BLEU evaluation and checkpoint averaging (paper §6.1; the tutorial stops at
translating single sentences and does not measure BLEU).

BLEU is sacreBLEU's ``corpus_bleu`` with its default ``13a`` tokenization. The
references are the data set's English side, which is already lower-cased and
Moses-tokenized (``did n't``, ``` `` ```), and the hypotheses are our
tokenizer's detokenized output, also lower-cased. The score is therefore
tokenized, lower-cased BLEU: comparable between runs of this project, not with
published detokenized (cased) BLEU scores. Beside it, ``whole_word`` is the
scoring published results on this split use (:mod:`transformer.bleu`).

The WordPiece round trip is not the identity on the references either: it
strips accents and splits Moses' contractions (``did n't`` → ``did n ' t``), so a
perfect translation would not match the raw reference. Given the English
tokenizer, :func:`evaluate_bleu` passes the references through the same
round trip, so that only translation errors cost BLEU.

§6.1: "For the base models, we used a single model obtained by averaging the
last 5 checkpoints, which were written at 10-minute intervals."
:func:`average_checkpoints` does that with the checkpoints ``train.py`` keeps.
"""

import json
import os
from pathlib import Path
from typing import Callable, List, Sequence, Tuple, Union

from absl import logging
import ml_collections
import numpy as np
import sacrebleu
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from transformer import bleu as bleu_lib
from transformer import config as config_lib
from transformer.training.checkpointing import CHECKPOINT_SUBDIR, CheckpointError
from transformer.training.errors import describe_error
from transformer.training.checkpointing import drop_unreadable_newest
from transformer.training.errors import TrainingError

PathLike = Union[str, os.PathLike]
Pair = Tuple[str, str]
TranslateBatch = Callable[[Sequence[str]], List[str]]
TOKENIZED_BLEU_NOTE = ("BLEU of lower-cased, tokenized text (on purpose, see "
                       "transformer/evaluation.py): comparable within this project only")
# Where tf.train.Checkpoint stores its object graph inside a checkpoint.
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def translate_all(translate_batch: TranslateBatch, sentences: Sequence[str],
                  batch_size: int = 64) -> List[str]:
  """Translates ``sentences`` in batches of similar length, returned in input order.

  Sorting by length keeps padding, and the decoding steps spent on sentences
  that already ended, low.
  """
  order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].split()))
  translations = [""] * len(sentences)
  for start in range(0, len(order), batch_size):
    indices = order[start:start + batch_size]
    outputs = translate_batch([sentences[i] for i in indices])
    if len(outputs) != len(indices):
      raise ValueError(f"translate_batch returned {len(outputs)} translations "
                       f"for {len(indices)} sentences")
    for i, output in zip(indices, outputs):
      translations[i] = output
  return translations


def round_trip(tokenizer, sentences: Sequence[str]) -> List[str]:
  """``detokenize(tokenize(s))`` for each sentence: what a perfect output would read."""
  detokenized = tokenizer.detokenize(tokenizer.tokenize(tf.constant(list(sentences))))
  return [s.decode("utf-8") for s in detokenized.numpy()]


def evaluate_bleu(translate_batch: TranslateBatch, pairs: Sequence[Pair], output_dir: PathLike,
                  split_name: str, method: str, batch_size: int = 64,
                  reference_tokenizer=None) -> dict:
  """Translates the source side of ``pairs`` and scores it against the target side.

  Writes ``<output_dir>/<split>.<method>.txt`` (one hypothesis per line, in
  ``pairs`` order) and ``<output_dir>/<split>.<method>.json`` with the score.

  Args:
    translate_batch: list of source strings → list of translations.
    pairs: (source, reference) strings.
    method: how ``translate_batch`` decodes ("greedy", "beam"); recorded only.
    reference_tokenizer: the target-language tokenizer; if given, references
      are scored after its round trip (see the module docstring).
  Returns:
    The JSON's content: bleu, signature, method, split, num_sentences,
    references, hypotheses_file, sacreBLEU's full result line, a note
    that the text is tokenized on purpose, and ``whole_word``: the BLEU of
    :func:`transformer.bleu.whole_word_bleu` on the references as in the data.
  """
  if not pairs:
    raise ValueError(f"no sentence pairs to evaluate on the {split_name} split")
  sources, references = zip(*pairs)
  hypotheses = translate_all(translate_batch, sources, batch_size)
  whole_word = bleu_lib.whole_word_bleu(hypotheses, references)
  if reference_tokenizer is not None:
    references = round_trip(reference_tokenizer, references)
  # force: the text is tokenized on purpose (module docstring), so sacreBLEU's
  # "forgot to detokenize" warning does not apply; the JSON says so instead.
  bleu = sacrebleu.BLEU(force=True)
  score = bleu.corpus_score(hypotheses, [list(references)])
  output_dir = Path(output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  hypotheses_file = output_dir / f"{split_name}.{method}.txt"
  # Hypotheses hold no newlines (the detokenizer joins tokens with spaces).
  hypotheses_file.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
  result = {"bleu": score.score, "signature": str(bleu.get_signature()), "method": method,
            "split": split_name, "num_sentences": len(hypotheses),
            "references": ("tokenizer round trip" if reference_tokenizer is not None
                           else "as in the data"),
            "hypotheses_file": str(hypotheses_file), "details": str(score),
            "note": TOKENIZED_BLEU_NOTE, "whole_word": whole_word}
  (output_dir / f"{split_name}.{method}.json").write_text(
      json.dumps(result, indent=2) + "\n", encoding="utf-8")
  return result


def last_checkpoints(checkpoint_dir: PathLike, n: int) -> List[str]:
  """The last ``n`` checkpoints listed in ``checkpoint_dir``'s ``checkpoint``
  file, oldest first.

  Raises:
    CheckpointError: ``n`` < 1, fewer than ``n`` checkpoints, or an unreadable
      ``checkpoint`` file.
  """
  if n < 1:
    raise CheckpointError(f"the number of checkpoints must be >= 1, got {n}")
  try:
    state = tf.train.get_checkpoint_state(str(checkpoint_dir))
  except Exception as e:  # pylint: disable=broad-except  (ParseError, OpError...)
    raise CheckpointError(f"{Path(checkpoint_dir) / 'checkpoint'} is corrupt: "
                          f"{describe_error(e)}") from e
  paths, unreadable = drop_unreadable_newest(
      list(state.all_model_checkpoint_paths) if state else [])
  for prefix, reason in unreadable:
    logging.warning("skipping the checkpoint %s: it cannot be read (%s)", prefix, reason)
  if len(paths) < n:
    raise CheckpointError(
        f"asked for the last {n} checkpoints but {checkpoint_dir} has "
        f"{len(paths)}{' intact' if unreadable else ''}"
        f"{': ' + ', '.join(paths) if paths else ''}"
        f"{''.join(f'; {p} cannot be read ({r})' for p, r in unreadable)}")
  return paths[-n:]


def average_checkpoints(model, paths: Sequence[str]) -> None:
  """Sets the model's weights to the element-wise mean of the checkpoints
  ``paths`` (§6.1; e.g. :func:`last_checkpoints`).

  Each checkpoint is restored into the model in turn (:func:`restore_model`,
  which refuses incomplete or foreign checkpoints); the optimizer state in
  them is ignored.
  """
  if not paths:
    raise CheckpointError("no checkpoints to average")
  variables = [v for v in model.weights if tf.as_dtype(v.dtype).is_floating]
  sums = [np.zeros(v.shape, np.float64) for v in variables]
  for path in paths:
    restore_model(model, path)
    for total, variable in zip(sums, variables):
      total += variable.numpy()
  for total, variable in zip(sums, variables):
    variable.assign((total / len(paths)).astype(tf.as_dtype(variable.dtype).as_numpy_dtype))


def _saved_model_variables(path: str) -> int:
  """How many variables the checkpoint holds in the object graph below its
  root's ``model`` child.

  Counted in the checkpoint's object graph, not by name: a checkpoint names
  each variable once, by its shortest path from the root, and in the Trainer's
  checkpoints that path runs through the optimizer
  (``optimizer/_trainable_variables/N``) rather than through ``model/...``.
  """
  reader = tf.train.load_checkpoint(path)
  if not reader.has_tensor(_OBJECT_GRAPH_KEY):
    raise CheckpointError(f"{path} has no object graph: it was not written by "
                          "tf.train.Checkpoint")
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
  stack = [child.node_id for child in graph.nodes[0].children if child.local_name == "model"]
  seen = set()
  while stack:
    node = stack.pop()
    if node not in seen:
      seen.add(node)
      stack.extend(child.node_id for child in graph.nodes[node].children)
  return sum(1 for node in seen if graph.nodes[node].attributes)


def restore_model(model, path: str) -> None:
  """Loads the model's weights from a ``tf.train.Checkpoint(model=model, ...)`` file.

  The checkpoint must fit the model exactly, as checked through its object
  graph: it holds as many variables below ``model`` as the model has (more
  means another model, e.g. more layers), every model variable is matched
  with one of them (``tf.train.Checkpoint`` silently skips what it cannot
  reach, and a half-restored model translates garbage), and each has the
  model's shape (else the restore itself fails).

  Raises:
    CheckpointError naming ``path``: an unbuilt model, or a checkpoint that is
    unreadable, incomplete or written by another model.
  """
  if not model.built:
    raise CheckpointError(f"build the model before restoring {path} into it")
  try:
    saved = _saved_model_variables(path)
  except tf.errors.OpError as e:
    raise CheckpointError(f"cannot read the checkpoint {path}: {describe_error(e)}") from e
  if saved != len(model.weights):
    raise CheckpointError(
        f"{path} holds {saved} model variables, this model has {len(model.weights)}: "
        "it was written by a different model (configuration or vocabulary)")
  try:
    status = tf.train.Checkpoint(model=model).restore(path).expect_partial()
    status.assert_existing_objects_matched()
  except Exception as e:  # pylint: disable=broad-except  (AssertionError, OpError, IndexError...)
    raise CheckpointError(f"{path} does not fit the model: {describe_error(e)}") from e


class RunFolderError(TrainingError):
  """A file of a ``train.py`` output folder is unreadable."""


def read_run_config(config_file: Path) -> ml_collections.ConfigDict:
  """A run's ``config.json``; :class:`RunFolderError` if it holds no configuration."""
  try:
    return ml_collections.ConfigDict(config_lib.read_run_config(config_file))
  except config_lib.ConfigError as e:
    raise RunFolderError(str(e)) from e


def restore_model_dir(model_dir: PathLike, average_last: int = 0):
  """The trained model of a ``train.py`` output folder.

  Reads ``config.json`` and ``tokenizer_path.txt``, builds the model and loads
  the latest checkpoint (``average_last`` 0), or the mean of the last
  ``average_last`` ones. The checkpoints are listed before anything is built,
  so that a missing one fails at once.

  Returns:
    ``(config, tokenizers, model, checkpoint paths used)``.
  """
  # Imported here: the tokenizers need tensorflow_text, BLEU alone does not.
  from transformer.model import Transformer  # pylint: disable=g-import-not-at-top
  from transformer.tokenizers import TokenizerError, load_tokenizers, vocab_sizes, vocabulary_mismatch  # pylint: disable=g-import-not-at-top
  model_dir = Path(model_dir)
  for name in ("config.json", "tokenizer_path.txt"):
    if not (model_dir / name).is_file():
      raise FileNotFoundError(f"{model_dir / name} is missing: is {model_dir} a train.py "
                              "output folder?")
  paths = last_checkpoints(model_dir / CHECKPOINT_SUBDIR, max(average_last, 1))
  config = read_run_config(model_dir / "config.json")
  tokenizers = load_tokenizers((model_dir / "tokenizer_path.txt").read_text().strip())
  mismatch = vocabulary_mismatch(model_dir, tokenizers)
  if mismatch:
    raise TokenizerError(f"{model_dir / 'tokenizer_path.txt'}: {mismatch}")
  model = Transformer.from_model_config(config.model, *vocab_sizes(tokenizers))
  model.build(((None, None), (None, None)))
  if average_last:
    average_checkpoints(model, paths)
  else:
    restore_model(model, paths[0])
  return config, tokenizers, model, paths


def teacher_forced_metrics(model, tokenizers, pairs: Sequence[Pair], config) -> dict:
  """The model's label-smoothed loss and masked accuracy on ``pairs``, fed the
  reference as decoder input (what ``train.py`` reports per epoch as
  ``val_loss``/``val_accuracy``), for a restored or averaged model.

  Returns ``{"loss", "accuracy", "tokens"}`` over the real target tokens.
  """
  # Imported here: the pipeline needs the tokenizers' ops.
  from transformer import data  # pylint: disable=g-import-not-at-top
  from transformer import losses  # pylint: disable=g-import-not-at-top
  from transformer import pipeline  # pylint: disable=g-import-not-at-top
  batches = pipeline.make_batches(
      data.pairs_to_dataset(list(pairs)), tokenizers, max_tokens=config.data.max_tokens,
      batch_size=config.data.batch_size, tokens_per_batch=config.data.tokens_per_batch,
      bucketing=config.data.bucketing, shuffle=False)
  loss_sum = correct = count = 0.0
  for inputs, labels in batches:
    logits = model(inputs, training=False)
    batch_loss, batch_count = losses.masked_cross_entropy_sum(
        labels, logits, config.training.label_smoothing)
    loss_sum += float(batch_loss)
    count += float(batch_count)
    correct += float(losses.masked_correct_sum(labels, logits)[0])
  if count == 0:
    raise ValueError("no target tokens to compute the loss on")
  return {"loss": loss_sum / count, "accuracy": correct / count, "tokens": int(count)}


def translator_batch_fn(translator, method: str) -> TranslateBatch:
  """A :data:`TranslateBatch` over an :class:`transformer.export.Translator` or its
  loaded SavedModel: ``method`` "beam" uses ``translate``, "greedy" ``translate_greedy``."""
  name = {"beam": "translate", "greedy": "translate_greedy"}[method]

  def translate_batch(sentences):
    # Looked up on each call: a bound tf.function holds its Translator weakly,
    # so the closure must keep the Translator itself alive.
    outputs = getattr(translator, name)(tf.constant(list(sentences)))
    return [t.decode("utf-8") for t in outputs.numpy()]

  return translate_batch
