"""The tokenizer SavedModel's module: two BERT WordPiece tokenizers with the
interface of the tutorial's ``ted_hrlr_translate_pt_en_converter``
(:mod:`transformer.data.tokenizers` builds, caches and loads it)."""

from pathlib import Path
from typing import Sequence

import tensorflow as tf
# Registers the ops the SavedModel's functions use.
import tensorflow_text as text

from transformer.data import wordpiece
from transformer.data.reserved_tokens import RESERVED_TOKENS
from transformer.run.run_folder import PathLike


def _re2_escape(token: str) -> str:
  """Escapes a literal for an RE2 pattern (tf.strings.regex_full_match)."""
  return "".join(c if c.isalnum() else "\\" + c for c in token)


class CustomTokenizer(tf.Module):
  """A BERT WordPiece tokenizer for one language, exportable as a SavedModel."""

  def __init__(self, reserved_tokens: Sequence[str], vocab_path: PathLike):
    super().__init__()
    vocab_path = str(vocab_path)
    self.tokenizer = text.BertTokenizer(vocab_path, **wordpiece.BERT_TOKENIZER_PARAMS)
    self._reserved_tokens = list(reserved_tokens)
    self._start_id = self._reserved_tokens.index("[START]")
    self._end_id = self._reserved_tokens.index("[END]")
    # An Asset makes tf.saved_model.save copy the file into assets/.
    self._vocab_path = tf.saved_model.Asset(vocab_path)
    # One token per "\n"-terminated line, as BertTokenizer reads the file.
    vocab = Path(vocab_path).read_text(encoding="utf-8").rstrip("\n").split("\n")
    self.vocab = tf.Variable(vocab)
    # Reserved tokens except [UNK], which the reader should still see.
    dropped = [_re2_escape(t) for t in self._reserved_tokens if t != "[UNK]"]
    self._drop_pattern = "|".join(dropped)

    ragged_ids = tf.RaggedTensorSpec(shape=[None, None], dtype=tf.int64)
    dense_ids = tf.TensorSpec(shape=[None, None], dtype=tf.int64)
    # Exporting concrete functions fixes the signatures the SavedModel serves.
    self.tokenize.get_concrete_function(tf.TensorSpec(shape=[None], dtype=tf.string))
    for spec in (ragged_ids, dense_ids):
      self.detokenize.get_concrete_function(spec)
      self.lookup.get_concrete_function(spec)
    for function in (self.get_vocab_size, self.get_vocab_path, self.get_reserved_tokens):
      function.get_concrete_function()

  @tf.function
  def tokenize(self, strings):
    # [batch, words, wordpieces] -> [batch, tokens]
    ids = self.tokenizer.tokenize(strings).merge_dims(-2, -1)
    batch = ids.bounding_shape()[0]
    starts = tf.fill([batch, 1], tf.constant(self._start_id, tf.int64))
    ends = tf.fill([batch, 1], tf.constant(self._end_id, tf.int64))
    return tf.concat([starts, ids, ends], axis=1)

  @tf.function
  def detokenize(self, tokenized):
    words = self.tokenizer.detokenize(tokenized)
    keep = tf.logical_not(tf.strings.regex_full_match(words, self._drop_pattern))
    words = tf.ragged.boolean_mask(words, keep)
    return tf.strings.reduce_join(words, separator=" ", axis=-1)

  @tf.function
  def lookup(self, token_ids):
    return tf.gather(self.vocab, token_ids)

  @tf.function
  def get_vocab_size(self):
    return tf.shape(self.vocab)[0]

  @tf.function
  def get_vocab_path(self):
    return self._vocab_path

  @tf.function
  def get_reserved_tokens(self):
    return tf.constant(self._reserved_tokens)


class Tokenizers(tf.Module):
  """The `.pt` and `.en` tokenizers, saved together like the tutorial's converter."""

  def __init__(self, pt_vocab_path: PathLike, en_vocab_path: PathLike,
               reserved_tokens: Sequence[str] = RESERVED_TOKENS):
    super().__init__()
    self.pt = CustomTokenizer(reserved_tokens, pt_vocab_path)
    self.en = CustomTokenizer(reserved_tokens, en_vocab_path)
