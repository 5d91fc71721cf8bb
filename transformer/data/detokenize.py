"""Token ids back to text in Python, as the tokenizers' ``detokenize`` does, without TensorFlow.

The exported tokenizers (:mod:`transformer.data.tokenizers`) detokenize with
TensorFlow Text's ``BertTokenizer.detokenize`` and then drop the reserved
tokens other than [UNK]. Under JAX, with no TensorFlow, :class:`Detokenizer`
does the same from a prepared folder's ``vocab.<language>.txt``
(:mod:`transformer.data.shards`), step for step as
``tensorflow_text``'s ``WordpieceTokenizer.detokenize`` (2.x) does it: ids past
the vocabulary read [UNK]; the tokens are joined with spaces, every " ##"
removed (a word piece joins the token before it, whatever that is: "[END] ##s"
becomes the word "[END]s", which is kept), leading and trailing spaces
stripped, and the text split on single spaces into words; then the words
[PAD], [START] and [END] are dropped and the rest joined with single spaces.
``tests/unit/test_detokenize.py`` holds it to the TensorFlow tokenizer.
"""

import os
from pathlib import Path
import re
from typing import Iterable, List, Sequence, Union

from transformer.data.reserved_tokens import RESERVED_TOKENS

SUFFIX_INDICATOR = "##"
UNKNOWN_TOKEN = "[UNK]"
_EDGE_SPACES = re.compile("^ +| +$")


class Detokenizer:
  """``detokenizer(rows)``: one string per row of token ids (``(batch, len)``
  ints, padding 0 allowed), as the tokenizer's ``detokenize`` gives it.

  Args:
    vocabulary: the tokens in id order (the first ones the reserved tokens).
  """

  def __init__(self, vocabulary: Sequence[str]):
    self._tokens = [*vocabulary, UNKNOWN_TOKEN]
    self._dropped = {token for token in RESERVED_TOKENS if token != UNKNOWN_TOKEN}

  @classmethod
  def from_file(cls, path: Union[str, os.PathLike]) -> "Detokenizer":
    """From a vocabulary file, one token per "\\n"-terminated line (as
    ``BertTokenizer`` reads it)."""
    return cls(Path(path).read_text(encoding="utf-8").rstrip("\n").split("\n"))

  def text(self, ids: Iterable[int]) -> str:
    """One row of ids → its text."""
    unknown = len(self._tokens) - 1
    joined = " ".join(self._tokens[min(int(i), unknown)] for i in ids)
    words = _EDGE_SPACES.sub("", joined.replace(" " + SUFFIX_INDICATOR, "")).split(" ")
    return " ".join(word for word in words if word not in self._dropped)

  def __call__(self, rows) -> List[str]:
    return [self.text(row) for row in rows]
