"""Scoring a trained run on a split: BLEU of its translations, its teacher-forced loss (§6.1).

The tutorial does not measure BLEU. :func:`evaluate` serves both backends on
token ids; they differ only in the decoding function and the detokenizer:
:class:`TensorFlowData` (the TED files, the run's tokenizer, a ``tf.function``)
and :class:`~transformer.inference.evaluation_jax.PreparedData` (a ``prepare.py``
folder, no TensorFlow). A translator SavedModel serves strings only:
:func:`evaluate_bleu` scores it on strings.

``bleu`` is sacreBLEU's (``13a``) on lower-cased, Moses-tokenized text, the
references after the tokenizer's round trip (``did n't`` becomes ``did n ' t``):
comparable within this project only; ``whole_word`` is the published scoring of
this split (:mod:`transformer.inference.bleu`). JAX cuts sentences at the
prepared ``max_tokens`` (none of TED's dev and test at 128), TensorFlow sources
at ``max_position``.
"""

from pathlib import Path
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import keras
import ml_collections
import numpy as np

from transformer.data import shards
from transformer.data import ted
from transformer.inference import decoding
from transformer.inference import scoring
from transformer.model import losses
from transformer.model import Transformer
from transformer.run import keras_checkpoints
from transformer.run import progress
from transformer.run import run_folder
from transformer.run.run_folder import PathLike
from transformer.run.errors import DataError

# A batch of sources (id arrays, or strings for a translator) → their outputs, in order.
DecodeBatch = Callable[[list], list]


class Restored(NamedTuple):
  config: ml_collections.ConfigDict
  model: Transformer
  checkpoints: List[str]  # the paths loaded (averaged when several), oldest first
  names: List[str]  # theirs as users see them: ckpt-N, or step-N for weights files


def check_sentences(count: int, split: str) -> None:
  if not count:
    raise DataError(f"no sentence pairs to evaluate on the {split} split")


def padded(rows: Sequence, height: int = 0, multiple: int = 1, dtype=np.int32) -> np.ndarray:
  """``rows`` (1-D ids) as one ``(max(height, len(rows)), width)`` array padded
  with 0, ``width`` the longest row rounded up to a multiple of ``multiple``."""
  width = -(-max((len(row) for row in rows), default=0) // multiple) * multiple
  batch = np.zeros((max(height, len(rows)), width), dtype)
  for i, row in enumerate(rows):
    batch[i, :len(row)] = row
  return batch


def decode_by_length(decode_batch: DecodeBatch, sources: Sequence, batch_size: int = 64,
                     length: Callable = len) -> list:
  """``decode_batch`` over ``sources`` in batches of similar ``length``, returned
  in input order: sorting keeps padding, and steps spent on ended rows, low."""
  order = sorted(range(len(sources)), key=lambda i: length(sources[i]))
  outputs = [None] * len(sources)
  for start in range(0, len(order), batch_size):
    indices = order[start:start + batch_size]
    batch_outputs = decode_batch([sources[i] for i in indices])
    if len(batch_outputs) != len(indices):
      raise ValueError(f"translate_batch returned {len(batch_outputs)} translations "
                       f"for {len(indices)} sentences")
    for i, output in zip(indices, batch_outputs):
      outputs[i] = output
  return outputs


def teacher_forced_metrics(model, ids: shards.Split, config) -> dict:
  """The label-smoothed loss and masked accuracy of ``model`` fed the reference
  ids as decoder input (``train.py``'s ``val_loss``/``val_accuracy``):
  ``{"loss", "accuracy", "tokens"}`` over the real target tokens."""
  metrics = losses.TokenMetrics()
  for inputs, labels in shards.epoch_batches(ids.trimmed(config.data.max_tokens), config.data,
                                             shuffle=False):
    logits = model(inputs, training=False)
    loss_sum, tokens = losses.masked_cross_entropy_sum(labels, logits,
                                                       config.training.label_smoothing)
    metrics.add(loss_sum, tokens, losses.masked_correct_sum(labels, logits)[0])
  if metrics.tokens == 0:
    raise ValueError("no target tokens to compute the loss on")
  return {"loss": metrics.loss, "accuracy": metrics.accuracy, "tokens": int(metrics.tokens)}


def restore_run(model_dir: PathLike, vocabulary_sha256: str, vocab_sizes: Tuple[int, int],
                vocabulary_source: str, average_last: int = 0) -> Restored:
  """The model of a ``train.py`` folder, from its latest checkpoint or the mean
  of its last ``average_last``: Keras weights files (a run trained under JAX)
  or, on TensorFlow, TensorFlow checkpoints. Listed before the model is built,
  so that a missing one fails at once; ``vocabulary_sha256`` must be the run's."""
  model_dir = Path(model_dir)
  checkpoint_dir = run_folder.checkpoint_dir(model_dir)
  from_weights = keras_checkpoints.exist(checkpoint_dir)
  if from_weights:
    paths = keras_checkpoints.last_weights(checkpoint_dir, max(average_last, 1))
  elif keras.backend.backend() == "tensorflow":
    # Deferred: TensorFlow reads its checkpoints; a JAX process reads weights files only.
    from transformer.inference import averaging  # pylint: disable=g-import-not-at-top
    paths = averaging.last_checkpoints(checkpoint_dir, max(average_last, 1))
  else:
    raise DataError(f"{checkpoint_dir} holds no model.weights.h5 checkpoint (a run "
                          "trained under JAX); score a TensorFlow run on TensorFlow")
  if mismatch := run_folder.vocabulary_mismatch(model_dir, vocabulary_sha256):
    raise DataError(f"{vocabulary_source}: {mismatch}")
  config = ml_collections.ConfigDict(
      run_folder.read_run_config(model_dir / run_folder.CONFIG_FILE))
  model = Transformer.from_model_config(config.model, *vocab_sizes)
  model.build(((None, None), (None, None)))
  if from_weights:
    keras_checkpoints.load_weights(model, paths)
  elif average_last:
    averaging.average_checkpoints(model, paths)
  else:
    averaging.restore_model(model, paths[0])
  names = [path.parent.name if from_weights else Path(path).name for path in paths]
  return Restored(config, model, [str(path) for path in paths], names)


def restore_model_dir(model_dir: PathLike, average_last: int = 0):
  """``(config, tokenizers, model, checkpoint paths)``: :func:`restore_run`
  with the run's own tokenizers (``tokenizer_path.txt``, TensorFlow's)."""
  restored, tokenizers = _restore_with_run_tokenizers(model_dir, average_last)
  return restored.config, tokenizers, restored.model, restored.checkpoints


def _restore_with_run_tokenizers(model_dir: PathLike, average_last: int):
  model_dir = Path(model_dir)
  for name in (run_folder.CONFIG_FILE, run_folder.TOKENIZER_PATH_FILE):
    if not (model_dir / name).is_file():
      raise FileNotFoundError(f"{model_dir / name} is missing: is {model_dir} a train.py "
                              "output folder?")
  # Deferred: the tokenizers are TensorFlow's; the JAX path reads a prepared folder's ids.
  from transformer.data import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top
  path_file = model_dir / run_folder.TOKENIZER_PATH_FILE
  tokenizers = tokenizers_lib.load_tokenizers(path_file.read_text().strip())
  restored = restore_run(model_dir, tokenizers_lib.vocabulary_hash(tokenizers),
                         tokenizers_lib.vocab_sizes(tokenizers), str(path_file), average_last)
  return restored, tokenizers


def newer_checkpoints(model_dir: PathLike, used: str) -> List[str]:
  """The names of ``model_dir``'s checkpoints newer than ``used`` (either
  trainer's): those a restore skipped because they cannot be read in full."""
  directory = run_folder.checkpoint_dir(model_dir)
  if keras_checkpoints.exist(directory):
    names = [path.name for path in keras_checkpoints.checkpoint_dirs(directory)]  # oldest first
    return names[names.index(used) + 1:]
  # Deferred: TensorFlow's checkpoint index; a JAX run has weights files only.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer.run.checkpoint_files import checkpoint_step  # pylint: disable=g-import-not-at-top
  state = tf.train.get_checkpoint_state(str(directory))
  names = [Path(path).name for path in (state.all_model_checkpoint_paths if state else [])]
  return [name for name in names if checkpoint_step(name) > checkpoint_step(used)]


def load_pairs(data: PathLike, split: str, limit: int = 0) -> Tuple[List[ted.Pair], int]:
  """``(pairs, split_size)``: the first ``limit`` (all with 0) (pt, en) pairs of
  ``split`` in ``data`` (a folder of the TED files, or "tfds"), and the split's size."""
  pairs = ted.split_pairs(data, split)
  return (pairs[:limit] if limit else pairs), len(pairs)


def tokenized(tokenizers, pairs: Sequence[ted.Pair]) -> shards.Split:
  """The (pt, en) ``pairs``' ids by the TensorFlow ``tokenizers`` ([START] … [END], int32)."""
  # Deferred: TensorFlow's tokenizers; the JAX path reads prepared ids.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def ids(tokenizer, sentences):
    ragged = tokenizer.tokenize(tf.constant(list(sentences)))
    ends = np.cumsum(ragged.row_lengths().numpy())[:-1]
    return np.split(ragged.flat_values.numpy().astype(np.int32), ends)

  return shards.Split(ids(tokenizers.pt, [pt for pt, _ in pairs]),
                      ids(tokenizers.en, [en for _, en in pairs]))


class TensorFlowData:
  """``split`` of the TED files on TensorFlow: tokenized by the run's tokenizer,
  decoded by :func:`decoding.decode` in one ``tf.function``."""

  def __init__(self, data: PathLike, split: str, limit: int = 0):
    self.split = split
    self.pairs, self.split_size = load_pairs(data, split, limit)  # bad data fails at once
    check_sentences(len(self.pairs), split)
    self.references = [en for _, en in self.pairs]
    self.tokenizers = self.ids = None  # the run's, once restored

  def restore(self, model_dir: PathLike, average_last: int = 0) -> Restored:
    restored, self.tokenizers = _restore_with_run_tokenizers(model_dir, average_last)
    self.ids = tokenized(self.tokenizers, self.pairs)
    return restored

  @staticmethod
  def decoder(model, method: str, decoding_config, batch_size: int) -> DecodeBatch:
    del batch_size  # one trace serves every shape
    # Deferred: TensorFlow, which the JAX path never imports.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
    def decode(source_ids):
      return decoding.decode(model, source_ids, method, **decoding_config.to_dict())

    return lambda batch: decode(padded(batch)).numpy()

  def detokenize(self, rows: Sequence) -> List[str]:
    text = self.tokenizers.en.detokenize(padded(rows, dtype=np.int64))
    return [line.decode("utf-8") for line in text.numpy()]


def evaluate(data, run: Restored, method: str, output_dir: PathLike, batch_size: int = 64,
             record: Optional[dict] = None, say: Callable[[str], None] = print) -> dict:
  """Scores ``run`` on ``data`` (:class:`TensorFlowData`, or
  :class:`~transformer.inference.evaluation_jax.PreparedData`, which restored
  it); returns the record, written whole to ``output_dir`` after the scoring
  with the hypotheses beside it, ``record``'s fields after the score's."""
  count = len(data.references)
  decode_batch = data.decoder(run.model, method, run.config.decoding, batch_size)
  with progress.announced(f"translating {count} {data.split} sentences ({method})", say):
    outputs = decode_by_length(progress.counted(decode_batch, count), data.ids.pt,
                               batch_size)
  hypotheses = data.detokenize(outputs)
  result = scoring.score_hypotheses(hypotheses, data.references, output_dir, data.split, method,
                                    data.detokenize(data.ids.en), data.split_size)
  with progress.announced(f"teacher-forced loss and accuracy on {count} sentences", say):
    teacher_forced = teacher_forced_metrics(run.model, data.ids, run.config)
  result = {**result, **(record or {}), "teacher_forced": teacher_forced}
  scoring.write_result(result, hypotheses)
  return result


def evaluate_bleu(translate_batch: DecodeBatch, pairs: Sequence[ted.Pair], output_dir: PathLike,
                  split_name: str, method: str, batch_size: int = 64, reference_tokenizer=None,
                  split_size: Optional[int] = None, record: Optional[dict] = None) -> dict:
  """Scores ``translate_batch`` (strings → strings: a translator) on ``pairs``,
  batched by word count; returns the record, written as :func:`evaluate` does.
  ``bleu`` after the round trip of ``reference_tokenizer`` (the English one) if
  given; ``split_size``: the whole split's pairs (None: ``pairs`` are the split)."""
  check_sentences(len(pairs), split_name)
  sources, references = zip(*pairs)
  hypotheses = decode_by_length(translate_batch, sources, batch_size,
                                length=lambda sentence: len(sentence.split()))
  round_tripped = (round_trip(reference_tokenizer, references)
                   if reference_tokenizer is not None else None)
  result = {**scoring.score_hypotheses(hypotheses, references, output_dir, split_name, method,
                                       round_tripped, split_size), **(record or {})}
  scoring.write_result(result, hypotheses)
  return result


def round_trip(tokenizer, sentences: Sequence[str]) -> List[str]:
  """``detokenize(tokenize(s))`` for each sentence: what a perfect output would read."""
  # Deferred: TensorFlow's tokenizer; the JAX path detokenizes prepared ids.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  detokenized = tokenizer.detokenize(tokenizer.tokenize(tf.constant(list(sentences))))
  return [s.decode("utf-8") for s in detokenized.numpy()]


def translator_batch_fn(translator, method: str) -> DecodeBatch:
  """Strings → strings over a :class:`~transformer.inference.export.Translator`
  or its SavedModel: "beam" calls ``translate``, "greedy" ``translate_greedy``."""
  name = {"beam": "translate", "greedy": "translate_greedy"}[method]
  # Deferred: TensorFlow, which only a translator needs.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def translate_batch(sentences):
    # Looked up on each call: a bound tf.function holds its Translator weakly,
    # so the closure must keep the Translator itself alive.
    outputs = getattr(translator, name)(tf.constant(list(sentences)))
    return [t.decode("utf-8") for t in outputs.numpy()]

  return translate_batch
