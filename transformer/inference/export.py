"""The translator and its export (tutorial: "Run inference" and "Export the model").

:class:`Translator` is the tutorial's: called on one sentence, it returns
``(text, tokens, attention_weights)`` by greedy decoding; it also translates
batches with the key/value cache of :mod:`transformer.inference.decoding`.
:class:`ExportTranslator` is the tutorial's wrapper, which
:func:`export_translator` saves as a SavedModel that needs only TensorFlow and
``tensorflow_text`` to load (the tokenizers travel inside it; usage in
docs/decoding_and_export.md). Its batch functions take ``[None]`` tf.string
sentences:

* ``translate`` (also ``serving_default``): beam search with
  ``config.decoding``'s settings (§6.1), fixed at export: ``(batch,)`` strings.
* ``translate_greedy``: greedy decoding, faster, usually a little worse.
* ``translate_with_attention``: the beam-search ``translation`` and what the
  tutorial plots: ``source_tokens`` ``(batch, src_len)`` and ``tokens``
  ``(batch, out_len)`` (strings; padding shows as [PAD]), ``token_ids``, and
  ``attention`` ``(batch, heads, out_len, src_len)``, the last decoder layer's
  cross-attention, row t the attention while predicting token t.

Any input gives one string per sentence: a blank one [START] [END], unknown
characters [UNK]; sentences past ``max_position`` tokens are cut (keeping [END]).
"""

import json
from pathlib import Path

from absl import logging
import tensorflow as tf

from transformer.inference import decoding
from transformer.config import default_config
from transformer.run import files
from transformer.run import run_folder
from transformer.run.run_folder import PathLike
from transformer.run.errors import TrainingError, describe_error

# The tutorial's MAX_TOKENS: the longest output its translator produces.
MAX_TOKENS = 128

SENTENCES = tf.TensorSpec(shape=[None], dtype=tf.string, name="sentences")


class Translator(tf.Module):
  """Tokenizers (``.pt``, ``.en``) + a :class:`transformer.model.Transformer`
  (built here if needed) + ``config.decoding`` for the batch functions (None:
  the paper's), translating strings to strings."""

  def __init__(self, tokenizers, transformer, decoding_config=None):
    super().__init__()
    self.tokenizers = tokenizers
    if not transformer.built:
      transformer.build(((None, None), (None, None)))
    self.transformer = transformer
    decoding_config = decoding_config or default_config().decoding
    # Plain Python values: they become constants of the exported graphs.
    self.beam_size = int(decoding_config.beam_size)
    self.length_penalty = float(decoding_config.length_penalty)
    self.extra_length = int(decoding_config.extra_length)

  def __call__(self, sentence, max_length=MAX_TOKENS):
    """The tutorial's call: one sentence (str, scalar or ``[1]`` tf.string),
    greedy decoding of at most ``max_length`` tokens. Returns ``(text, tokens,
    attention_weights)``: the translation; its ``out_len + 1`` token strings
    from [START]; the cross-attention ``(1, heads, out_len, src_len)``, row t
    while predicting ``tokens[t + 1]``."""
    sentence = tf.reshape(tf.convert_to_tensor(sentence, tf.string), [1])
    return self._translate_one(sentence, tf.constant(max_length, tf.int32))

  @tf.function(input_signature=[SENTENCES, tf.TensorSpec([], tf.int32)],
               autograph=False)
  def _translate_one(self, sentence, max_length):
    source_ids = self._source_ids(sentence)
    max_position = self.transformer.max_position
    max_lengths = tf.fill(tf.shape(source_ids)[:1], tf.minimum(max_length, max_position))
    tokens = decoding.greedy_decode(self.transformer, source_ids, max_lengths)
    with_start = tf.concat([tf.fill([1, 1], decoding.START_ID), tokens], axis=1)
    attention = self._attention(source_ids, tokens)
    return (self._text(tokens)[0], self.tokenizers.en.lookup(tf.cast(with_start, tf.int64))[0],
            attention)

  def _attention(self, source_ids, tokens):
    """The last decoder layer's cross-attention over ``tokens`` ``(batch, out_len)``,
    from one full pass over the chosen output, as the tutorial does."""
    starts = tf.fill([tf.shape(tokens)[0], 1], decoding.START_ID)
    self.transformer((source_ids, tf.concat([starts, tokens[:, :-1]], axis=1)), training=False)
    return self.transformer.decoder.last_attn_scores

  def _source_ids(self, sentences):
    """Token ids ``(batch, src_len)`` int32, cut to what the model can encode
    (here rather than only in decoding, so that the attention outputs match)."""
    ids = self.tokenizers.pt.tokenize(sentences).to_tensor()
    max_position = self.transformer.max_position
    return tf.cast(decoding.trim_source(ids, max_position), tf.int32)

  def _decode(self, source_ids, method):
    return decoding.decode(self.transformer, source_ids, method, beam_size=self.beam_size,
                           length_penalty=self.length_penalty, extra_length=self.extra_length)

  def _text(self, tokens):
    return self.tokenizers.en.detokenize(tf.cast(tokens, tf.int64))

  # autograph is off: decoding uses keras.ops.while_loop (tf.while_loop here) itself.
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
    attention = self._attention(source_ids, tokens)
    token_ids = tf.cast(tokens, tf.int64)
    return {
        "translation": self._text(tokens),
        "source_tokens": self.tokenizers.pt.lookup(tf.cast(source_ids, tf.int64)),
        "tokens": self.tokenizers.en.lookup(token_ids),
        "token_ids": token_ids,
        "attention": attention,
    }


def print_translation(sentence, tokens, ground_truth):
  """The tutorial's printout: input, prediction and reference, a line each."""
  prediction = tokens.numpy() if hasattr(tokens, "numpy") else tokens
  if isinstance(prediction, bytes):
    prediction = prediction.decode("utf-8")
  print(f'{"Input:":15s}: {sentence}')
  print(f'{"Prediction":15s}: {prediction}')
  print(f'{"Ground truth":15s}: {ground_truth}')


class ExportTranslator(tf.Module):
  """The tutorial's wrapper for export: called on one string, the translator's
  greedy text, also after ``tf.saved_model.load``; with the batch functions."""

  def __init__(self, translator: Translator):
    super().__init__()
    self.translator = translator
    self.translate = translator.translate
    self.translate_greedy = translator.translate_greedy
    self.translate_with_attention = translator.translate_with_attention
    # The tokenizers at the top, where the SavedModel's users look for them.
    self.tokenizers = translator.tokenizers

  @tf.function(input_signature=[tf.TensorSpec([], tf.string)], autograph=False)
  def __call__(self, sentence):
    text, _, _ = self.translator(sentence, max_length=MAX_TOKENS)
    return text


def export_translator(model, tokenizers, export_dir: PathLike,
                      decoding_config=None) -> ExportTranslator:
  """Saves an :class:`ExportTranslator` as a SavedModel in ``export_dir`` and
  returns it."""
  translator = ExportTranslator(Translator(tokenizers, model, decoding_config))
  # The save logs kilobytes per function about renamed captured inputs: dropped.
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
  """Saves the model as a ``.keras`` file, for going on training: load it with
  ``keras.models.load_model(path)`` after ``from transformer.model import Transformer``."""
  path = Path(path)
  if path.suffix != ".keras":
    raise ValueError(f"a native Keras model file must end in .keras, got {path}")
  path.parent.mkdir(parents=True, exist_ok=True)
  model.save(path)
  return path


class ExportError(TrainingError):
  """An export cannot be written, or its folder holds what this project did not export."""


# What an export folder may hold; a folder holding anything else is not replaced.
_EXPORT_ENTRIES = frozenset({
    "saved_model.pb", "fingerprint.pb", "variables", "assets", run_folder.EXPORT_INFO_FILE,
    run_folder.EXPORT_TRANSLATOR, run_folder.EXPORT_KERAS_MODEL, "transformer.weights.h5"})


def check_export_target(target: PathLike, advice: str = "choose another folder") -> None:
  """:class:`ExportError` (ending in ``advice``) unless ``target`` is absent,
  empty, or an earlier export: an export replaces its folder whole, and must
  never delete what this project did not write."""
  target = Path(target)
  if not target.exists():
    return
  if not target.is_dir():
    raise ExportError(f"{target} exists and is not a folder")
  foreign = sorted(p.name for p in target.iterdir() if p.name not in _EXPORT_ENTRIES)
  if foreign:
    shown = ", ".join(foreign[:4]) + (", ..." if len(foreign) > 4 else "")
    raise ExportError(f"{target} holds files that are not an export ({shown}); an export "
                      "replaces its folder whole, so it goes only into a new or empty folder "
                      f"or an earlier export: {advice}")


def export_model(model, tokenizers, decoding_config, target: PathLike, step: int,
                 translator_subdir: str = "", keras_model: bool = False, **info):
  """Exports the translator SavedModel (into ``target/translator_subdir``) and,
  with ``keras_model``, the ``.keras`` model, with ``step`` and ``info`` in
  :data:`transformer.run.run_folder.EXPORT_INFO_FILE`; staged and swapped in
  whole (:func:`transformer.run.files.staged`). Returns the translator.
  :class:`ExportError` for a foreign ``target`` or a failed write (``target``
  then left as it was)."""
  target = Path(target)
  check_export_target(target)
  try:
    with files.staged(target, folder=True) as staging:
      if keras_model:
        save_keras_model(model, staging / run_folder.EXPORT_KERAS_MODEL)
      translator = export_translator(model, tokenizers, staging / translator_subdir,
                                     decoding_config)
      (staging / run_folder.EXPORT_INFO_FILE).write_text(
          json.dumps({"step": step, **info}) + "\n", encoding="utf-8")
  except (OSError, tf.errors.OpError) as e:
    raise ExportError(f"cannot write the export to {target}: {describe_error(e)}; {target} "
                      "is left as it was") from e
  return translator
