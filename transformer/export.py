"""Exporting a trained model (tutorial: "Export the model").

:func:`export_translator` writes a SavedModel that translates text to text and
needs nothing but TensorFlow and ``tensorflow_text`` to load (the tokenizers
travel inside it)::

  import tensorflow as tf
  import tensorflow_text  # registers the tokenizers' ops
  translator = tf.saved_model.load(export_dir)
  translator.translate(tf.constant(["este é um problema ."]))  # beam search
  translator.signatures["serving_default"](sentences=tf.constant([...]))["output_0"]

It carries three functions, each over a batch of sentences ``[None]`` tf.string:

* ``translate`` (also the ``serving_default`` signature): beam search with the
  paper's settings from ``config.decoding`` (§6.1: beam 4, α = 0.6, up to input
  length + 50 tokens), fixed at export. Returns ``(batch,)`` strings.
* ``translate_greedy`` (signature ``translate_greedy``): greedy decoding, faster,
  usually a little worse. Returns ``(batch,)`` strings.
* ``translate_with_attention`` (signature of the same name): the beam-search
  translation and what the tutorial plots: ``translation`` ``(batch,)``,
  ``source_tokens`` ``(batch, src_len)`` and ``tokens`` ``(batch, out_len)``
  (strings from the tokenizers' ``lookup``; padding shows as [PAD]),
  ``token_ids`` ``(batch, out_len)`` int64, and ``attention``
  ``(batch, heads, out_len, src_len)``: the last decoder layer's
  cross-attention, row t being the attention while predicting token t.

Any input gives one well-formed string per sentence: empty or blank sentences
become [START] [END], unknown characters [UNK], and sentences longer than the
model's ``max_position`` tokens are cut there (keeping [END]).

:func:`save_keras_model` writes the native ``.keras`` file instead, for going
on training (it needs this package to load).
"""

import json
import os
from pathlib import Path
import shutil
from typing import Union

from absl import logging
import tensorflow as tf

from transformer import decoding

PathLike = Union[str, os.PathLike]
# In a train.py export folder: the training step its files were written at.
EXPORT_INFO_FILE = "export_info.json"
SENTENCES = tf.TensorSpec(shape=[None], dtype=tf.string, name="sentences")


class Translator(tf.Module):
  """Tokenizers + model + decoding settings, translating strings to strings.

  Args:
    tokenizers: a module with ``.pt`` and ``.en`` tokenizers (the tutorial's
      converter or :func:`transformer.tokenizers.load_tokenizers`).
    model: a built :class:`transformer.model.Transformer`.
    decoding_config: ``config.decoding`` (beam_size, length_penalty, extra_length).
  """

  def __init__(self, tokenizers, model, decoding_config):
    super().__init__()
    self.tokenizers = tokenizers
    self.transformer = model
    # Plain Python values: they become constants of the exported graphs.
    self.beam_size = int(decoding_config.beam_size)
    self.length_penalty = float(decoding_config.length_penalty)
    self.extra_length = int(decoding_config.extra_length)

  def _source_ids(self, sentences):
    """Token ids ``(batch, src_len)`` int32, cut to what the model can encode
    (here rather than only in decoding, so that the attention outputs match)."""
    ids = self.tokenizers.pt.tokenize(sentences).to_tensor()
    max_position = self.transformer.hyperparameters["max_position"]
    return tf.cast(decoding.trim_source(ids, max_position), tf.int32)

  def _decode(self, source_ids, method):
    return decoding.decode(self.transformer, source_ids, method, beam_size=self.beam_size,
                           length_penalty=self.length_penalty, extra_length=self.extra_length)

  def _text(self, tokens):
    return self.tokenizers.en.detokenize(tf.cast(tokens, tf.int64))

  # autograph is off: decoding uses tf.while_loop itself.
  @tf.function(input_signature=[SENTENCES], autograph=False)
  def translate(self, sentences):
    return self._text(self._decode(self._source_ids(sentences), "beam"))

  @tf.function(input_signature=[SENTENCES], autograph=False)
  def translate_greedy(self, sentences):
    return self._text(self._decode(self._source_ids(sentences), "greedy"))

  @tf.function(input_signature=[SENTENCES], autograph=False)
  def translate_with_attention(self, sentences):
    source_ids = self._source_ids(sentences)
    tokens = self._decode(source_ids, "beam")
    # One full pass over the chosen output, as the tutorial does, gives the
    # attention of every output position at once.
    starts = tf.fill([tf.shape(tokens)[0], 1], decoding.START_ID)
    decoder_input = tf.concat([starts, tokens[:, :-1]], axis=1)
    self.transformer((source_ids, decoder_input), training=False)
    token_ids = tf.cast(tokens, tf.int64)
    return {
        "translation": self._text(tokens),
        "source_tokens": self.tokenizers.pt.lookup(tf.cast(source_ids, tf.int64)),
        "tokens": self.tokenizers.en.lookup(token_ids),
        "token_ids": token_ids,
        "attention": self.transformer.decoder.last_attention_scores,
    }


def export_translator(model, tokenizers, export_dir: PathLike, decoding_config) -> Translator:
  """Saves a :class:`Translator` as a SavedModel in ``export_dir`` (see the module
  docstring for what it serves). Returns the in-memory Translator."""
  translator = Translator(tokenizers, model, decoding_config)
  # The save logs (through absl), per function, every captured input it
  # renames: several kilobytes each, nothing to act on. Dropped here, other
  # records kept.
  logger = logging.get_absl_logger()
  logger.addFilter(_drop_signature_renaming)
  try:
    tf.saved_model.save(translator, str(export_dir), signatures={
        "serving_default": translator.translate,
        "translate_greedy": translator.translate_greedy,
        "translate_with_attention": translator.translate_with_attention,
    })
  finally:
    logger.removeFilter(_drop_signature_renaming)
  return translator


def _drop_signature_renaming(record) -> bool:
  """False for TensorFlow's "Function `...` contains input name(s)" log records."""
  return record.module != "signature_serialization"


def save_keras_model(model, path: PathLike) -> Path:
  """Saves the model in Keras' native format (architecture + weights), for fine-tuning.

  Load it with ``keras.models.load_model(path)`` after ``import transformer.model``
  (which registers the custom layers). ``path`` must end in ``.keras``.
  """
  path = Path(path)
  if path.suffix != ".keras":
    raise ValueError(f"a native Keras model file must end in .keras, got {path}")
  path.parent.mkdir(parents=True, exist_ok=True)
  model.save(path)
  return path


def _sibling(target: Path, suffix: str) -> Path:
  return target.with_name(target.name + suffix)


def begin_swap(target: PathLike) -> Path:
  """An empty folder beside ``target`` (``<target>.new``) to write its next
  version into, for :func:`finish_swap`. A swap a crash cut short between its
  two renames is undone first, so that ``target`` is whole again."""
  target = Path(target)
  old, staging = _sibling(target, ".old"), _sibling(target, ".new")
  if old.exists() and not target.exists():
    old.rename(target)
  shutil.rmtree(old, ignore_errors=True)
  shutil.rmtree(staging, ignore_errors=True)
  staging.mkdir(parents=True)
  return staging


def finish_swap(staging: PathLike, target: PathLike, step: int) -> None:
  """Records ``step`` in ``staging`` and puts it in place of ``target``: readers
  see the whole old or the whole new folder, one step's files either way."""
  staging, target = Path(staging), Path(target)
  (staging / EXPORT_INFO_FILE).write_text(json.dumps({"step": step}) + "\n",
                                          encoding="utf-8")
  old = _sibling(target, ".old")
  if target.exists():
    target.rename(old)
  staging.rename(target)
  shutil.rmtree(old, ignore_errors=True)
