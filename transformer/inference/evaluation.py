"""Scoring a model on a split: BLEU of its translations, its teacher-forced loss.

Paper §6.1. The tutorial stops at translating single sentences and does not measure BLEU.

BLEU is sacreBLEU's ``corpus_bleu`` with its default ``13a`` tokenization. The
references are the data set's English side, which is already lower-cased and
Moses-tokenized (``did n't``, ``` `` ```), and the hypotheses are our
tokenizer's detokenized output, also lower-cased. The score is therefore
tokenized, lower-cased BLEU: comparable between runs of this project, not with
published detokenized (cased) BLEU scores. Beside it, ``whole_word`` is the
scoring published results on this split use (:mod:`transformer.inference.bleu`).

The WordPiece round trip is not the identity on the references either: it
strips accents and splits Moses' contractions (``did n't`` → ``did n ' t``), so a
perfect translation would not match the raw reference. Given the English
tokenizer, :func:`evaluate_bleu` passes the references through the same
round trip, so that only translation errors cost BLEU.

The model scored is a restored or averaged one (:mod:`transformer.run.run_folder`,
:mod:`transformer.inference.averaging`) or the one in training (``train.py``).
"""

import os
from typing import Callable, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from transformer.inference import scoring
from transformer.model import losses
from transformer.data import pipeline
from transformer.data import ted

PathLike = Union[str, os.PathLike]
Pair = Tuple[str, str]
TranslateBatch = Callable[[Sequence[str]], List[str]]


def translate_by_length(translate_batch: TranslateBatch, sentences: Sequence[str],
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
                  reference_tokenizer=None, split_size: Optional[int] = None) -> dict:
  """:func:`score_bleu`, then its files written (:func:`write_result`); returns the result."""
  result, hypotheses = score_bleu(translate_batch, pairs, output_dir, split_name, method,
                                  batch_size, reference_tokenizer, split_size)
  scoring.write_result(result, hypotheses)
  return result


def score_bleu(translate_batch: TranslateBatch, pairs: Sequence[Pair], output_dir: PathLike,
               split_name: str, method: str, batch_size: int = 64,
               reference_tokenizer=None,
               split_size: Optional[int] = None) -> Tuple[dict, List[str]]:
  """Translates the source side of ``pairs`` and scores it against the target side.

  Its files, written by :func:`write_result`, are ``<output_dir>/<stem>.txt``
  (one hypothesis per line, in ``pairs`` order) and ``<output_dir>/<stem>.json``
  with the score, the stem
  :func:`result_stem`: ``<split>.<method>``, or ``<split>.<method>.partial<N>``
  when ``split_size`` says that ``pairs`` are only the first N of the split.

  Args:
    translate_batch: list of source strings → list of translations.
    pairs: (source, reference) strings.
    method: how ``translate_batch`` decodes ("greedy", "beam"); recorded only.
    reference_tokenizer: the target-language tokenizer; if given, references
      are scored after its round trip (see the module docstring).
    split_size: the number of pairs in the whole split (None: ``pairs`` are
      the whole split).
  Returns:
    ``(result, hypotheses)``, the result being the JSON's content: bleu,
    signature, method, split, num_sentences,
    partial (whether they are only the split's first ones), references,
    hypotheses_file, sacreBLEU's full result line, a note that the text is
    tokenized on purpose, and ``whole_word``: the BLEU of
    :func:`transformer.inference.bleu.whole_word_bleu` on the references as in the data.
  """
  if not pairs:
    raise ValueError(f"no sentence pairs to evaluate on the {split_name} split")
  sources, references = zip(*pairs)
  hypotheses = translate_by_length(translate_batch, sources, batch_size)
  round_tripped = (round_trip(reference_tokenizer, references)
                   if reference_tokenizer is not None else None)
  return scoring.score_hypotheses(hypotheses, references, output_dir, split_name, method,
                                  round_tripped, split_size), hypotheses


def load_pairs(data: PathLike, split: str, limit: int = 0) -> Tuple[List[Pair], int]:
  """``(pairs, split_size)``: the (pt, en) pairs of ``split`` from ``data`` (a
  folder of the TED files, or "tfds"), the first ``limit`` when > 0, and how
  many the whole split has."""
  pairs = ted.split_pairs(data, split)
  return (pairs[:limit] if limit else pairs), len(pairs)


def teacher_forced_metrics(model, tokenizers, pairs: Sequence[Pair], config) -> dict:
  """The model's label-smoothed loss and masked accuracy on ``pairs``, fed the
  reference as decoder input (what ``train.py`` reports per epoch as
  ``val_loss``/``val_accuracy``), for a restored or averaged model.

  Returns ``{"loss", "accuracy", "tokens"}`` over the real target tokens.
  """
  metrics = losses.TokenMetrics()
  for inputs, labels in pipeline.evaluation_batches(pairs, tokenizers, config.data):
    logits = model(inputs, training=False)
    loss_sum, tokens = losses.masked_cross_entropy_sum(labels, logits,
                                                       config.training.label_smoothing)
    metrics.add(loss_sum, tokens, losses.masked_correct_sum(labels, logits)[0])
  if metrics.tokens == 0:
    raise ValueError("no target tokens to compute the loss on")
  return {"loss": metrics.loss, "accuracy": metrics.accuracy, "tokens": int(metrics.tokens)}


def translator_batch_fn(translator, method: str) -> TranslateBatch:
  """A :data:`TranslateBatch` over an :class:`transformer.inference.export.Translator` or its
  loaded SavedModel: ``method`` "beam" uses ``translate``, "greedy" ``translate_greedy``."""
  name = {"beam": "translate", "greedy": "translate_greedy"}[method]

  def translate_batch(sentences):
    # Looked up on each call: a bound tf.function holds its Translator weakly,
    # so the closure must keep the Translator itself alive.
    outputs = getattr(translator, name)(tf.constant(list(sentences)))
    return [t.decode("utf-8") for t in outputs.numpy()]

  return translate_batch
