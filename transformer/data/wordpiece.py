"""Learning a WordPiece vocabulary (the subword-tokenizer guide's ``bert_vocab_from_dataset``).

:func:`learn_vocabulary` gives the vocabulary the guide's ``bert_vocab_from_dataset``
with ``learn_params={}`` gives (tests/unit/test_tokenizers.py compares them), faster.
"""

from pathlib import Path
import time
from typing import Iterable, List, Sequence

from absl import logging
import tensorflow as tf
from tensorflow_text.python.ops import bert_tokenizer
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from transformer.run.run_folder import PathLike

# The guide's BertTokenizer settings, for learning and for tokenizing.
BERT_TOKENIZER_PARAMS = {"lower_case": True}
# Sentences per element of the dataset fed to the vocabulary learner.
_LEARNER_BATCH = 1000


def learn_vocabulary(sentences: Sequence[str], vocab_size: int, reserved_tokens: Sequence[str],
                     name: str = "") -> List[str]:
  """A BERT WordPiece vocabulary as the guide learns it, ``reserved_tokens``
  first (``name`` is for the log)."""
  start = time.time()
  logging.info("learning the %s WordPiece vocabulary (target size %d) from %d "
               "sentences; this takes under a minute on the full training split",
               name, vocab_size, len(sentences))
  vocab = learn_wordpiece(count_words(sentences), vocab_size, list(reserved_tokens))
  logging.info("learned the %s vocabulary: %d tokens in %.1f s",
               name, len(vocab), time.time() - start)
  return vocab


def count_words(sentences: Sequence[str]):
  """{word: count} of ``sentences`` split as BERT's tokenizer splits them."""
  dataset = tf.data.Dataset.from_tensor_slices(
      tf.constant(list(sentences), dtype=tf.string)).batch(_LEARNER_BATCH)
  return learner.count_words(
      dataset.map(bert_tokenizer.BasicTokenizer(**BERT_TOKENIZER_PARAMS).tokenize))


def learn_wordpiece(word_counts, vocab_size: int, reserved_tokens: List[str]) -> List[str]:
  """tensorflow_text's ``wordpiece_tokenizer_learner_lib.learn`` with its default
  parameters, faster: that learner counts every substring of every word again
  for each count threshold it tries; here a count is one per piece
  (:func:`_rest_counts`), and the first iteration's counts are made once."""
  params = learner.Params(
      upper_thresh=int(1e7), lower_thresh=10, num_iterations=4, max_input_tokens=int(5e6),
      max_token_length=50, max_unique_chars=1000, vocab_size=vocab_size, slack_ratio=0.05,
      include_joiner_token=True, joiner="##", reserved_tokens=reserved_tokens)
  word_counts = list(word_counts.items() if isinstance(word_counts, dict) else word_counts)
  upper, lower = learner.get_search_threshs(word_counts, params.upper_thresh,
                                            params.lower_thresh)
  all_counts = learner.get_input_words(word_counts, reserved_tokens, params.max_token_length)
  words = learner.filter_input_words(
      all_counts, learner.get_allowed_chars(all_counts, params.max_unique_chars),
      params.max_input_tokens)
  chars = learner.extract_char_tokens(words)
  every_start = _rest_counts(words, lambda word: range(len(word)), params.joiner)

  def vocabulary_at(threshold):
    def kept(counts):
      return learner.ensure_all_tokens_exist(
          chars, {token: n for token, n in counts.items() if n >= threshold},
          params.include_joiner_token, params.joiner)
    tokens = kept(every_start)
    for _ in range(params.num_iterations - 1):
      tokens = kept(_rest_counts(
          words, lambda word: _piece_starts(word, tokens, params), params.joiner))  # pylint: disable=cell-var-from-loop
    return learner.generate_final_vocabulary(reserved_tokens, chars, tokens)

  # The library's binary search, step for step.
  slack = max(params.slack_ratio * vocab_size, 0)
  while True:
    threshold = (upper + lower) // 2
    vocab = vocabulary_at(threshold)
    if ((len(vocab) <= vocab_size and vocab_size - len(vocab) <= slack)
        or lower >= upper or threshold <= 1):
      return vocab
    if len(vocab) > vocab_size:
      lower = threshold + 1
    else:
      upper = threshold - 1


def _piece_starts(word, tokens, params):
  """Where the pieces of ``word`` start when split greedily with ``tokens``
  (None: it cannot be split)."""
  ends = learner.get_split_indices(word, tokens, params.include_joiner_token, params.joiner)
  return [0, *ends[:-1]] if ends else None


def _rest_counts(words, starts, joiner):
  """{token: count} over ``words`` ((word, count) pairs) of the rest of each
  word from each of ``starts(word)`` (None: skip it), joiner-marked: the
  counts the library keeps tokens by.

  The library counts every substring from a start, then subtracts the counts
  of the longer ones it begins; that telescopes to how often a substring runs
  from a start to the word's end (those left at 0 never pass a threshold).
  """
  counts = {}
  for word, count in words:
    word_starts = starts(word)
    if word_starts is None:
      continue
    for start in word_starts:
      token = joiner + word[start:] if start > 0 else word
      counts[token] = counts.get(token, 0) + count
  return counts


def write_vocab_file(vocab: Iterable[str], path: PathLike) -> Path:
  """Writes ``vocab`` to ``path``, a token a line (``BertTokenizer``'s vocabulary file)."""
  path = Path(path)
  path.write_text("".join(token + "\n" for token in vocab), encoding="utf-8")
  return path
