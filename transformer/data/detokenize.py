"""Token ids back to text in Python, as the tokenizers' ``detokenize`` does, without TensorFlow.

Under JAX, :class:`Detokenizer` reads a prepared folder's ``vocab.<language>.txt``
and follows ``tensorflow_text``'s ``WordpieceTokenizer.detokenize`` (2.x) step
for step: ids past the vocabulary read [UNK]; tokens joined with spaces, every
" ##" removed (so "[END] ##s" becomes the word "[END]s", kept), the edges
stripped and the text split on single spaces; then the words [PAD], [START]
and [END] dropped (``tests/unit/test_detokenize.py`` holds it to TensorFlow's).
"""

from pathlib import Path
import re
from typing import Iterable, List, Sequence

from transformer.data.reserved_tokens import RESERVED_TOKENS
from transformer.run.run_folder import PathLike

SUFFIX_INDICATOR = "##"
UNKNOWN_TOKEN = "[UNK]"
_EDGE_SPACES = re.compile("^ +| +$")


class Detokenizer:
  """``detokenizer(rows)``: one string per row of token ids (``(batch, len)``,
  0-padded), from ``vocabulary``, the tokens in id order."""

  def __init__(self, vocabulary: Sequence[str]):
    self._tokens = [*vocabulary, UNKNOWN_TOKEN]
    self._dropped = {token for token in RESERVED_TOKENS if token != UNKNOWN_TOKEN}

  @classmethod
  def from_file(cls, path: PathLike) -> "Detokenizer":
    """From a vocabulary file, a token a line (as ``BertTokenizer`` reads it)."""
    return cls(Path(path).read_text(encoding="utf-8").rstrip("\n").split("\n"))

  def text(self, ids: Iterable[int]) -> str:
    """One row of ids → its text."""
    unknown = len(self._tokens) - 1
    joined = " ".join(self._tokens[min(int(i), unknown)] for i in ids)
    words = _EDGE_SPACES.sub("", joined.replace(" " + SUFFIX_INDICATOR, "")).split(" ")
    return " ".join(word for word in words if word not in self._dropped)

  def __call__(self, rows) -> List[str]:
    return [self.text(row) for row in rows]
