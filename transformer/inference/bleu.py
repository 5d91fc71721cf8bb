"""Whole-word BLEU on the references as published: the scoring of Qi et al. (2018).

Qi et al. (2018, NAACL), who made this TED split, score lower-cased, tokenized
BLEU on the original references, which are Moses-tokenized: ``that 's``,
``did n't``, quotes as ``` `` ``` and ``''``, ``solar-powered``, ``6,000``.
The tutorial tokenizer's detokenized English splits every punctuation mark
off (``that ' s``, ``did n ' t``, ``` ` ` ```, ``solar - powered``, ``6 , 000``),
so it has more, shorter tokens than those references.

:func:`moses_join` re-joins that output to the references' conventions, and
:func:`whole_word_bleu` scores it against the references as they are in the
data, split on spaces only (sacreBLEU ``tokenize='none'``, ``lowercase=True``:
what ``multi-bleu.perl -lc`` computes on tokenized text). Not restored:
accents the WordPiece normalization strips (``rūmī``) and Moses' abbreviations
(``u.s.``, ``mr.``); on the dev set's own references these leave the round
trip's score just under 100 (tests/unit/test_bleu_tokenized.py).

:mod:`transformer.inference.evaluation`'s score, computed beside it, is on the
tokenizer's round trip of the references instead and counts ``' s`` as two
tokens: the two do not compare with each other.
"""

import re
from typing import Sequence

import sacrebleu

WHOLE_WORD_NOTE = ("lower-cased BLEU on the references' Moses tokens (sacreBLEU "
                   "tokenize='none'), hypotheses re-joined by transformer/inference/bleu.py: the "
                   "scoring of Qi et al. (2018) for this split")

# (pattern, replacement), applied in order: quotes before the apostrophe rules,
# so that "' '" becomes a closing quote and not a contraction.
_JOINS = (
    (re.compile(r"` `"), "``"),
    (re.compile(r"' '"), "''"),
    (re.compile(r"(?<=\w) n ' t\b"), " n't"),
    (re.compile(r"(?<=\w) ' (s|re|m|ve|ll|d)\b"), r" '\1"),
    (re.compile(r"(?<=\w) - (?=\w)"), "-"),
    (re.compile(r"(?<=\d) , (?=\d{3}\b)"), ","),
    (re.compile(r"(?<=\d) \. (?=\d)"), "."),
    (re.compile(r"\. \. \."), "..."),
)


def moses_join(text: str) -> str:
  """The tutorial detokenizer's English re-joined to Moses' tokens.

  ``"it ' s 6 , 000 ` ` well - known ' '"`` → ``"it 's 6,000 `` well-known ''"``.
  Repeated quote marks pair up from the left (``` ` ` ` ` ``` → ``` `` `` ```).
  """
  for pattern, replacement in _JOINS:
    text = pattern.sub(replacement, text)
  return text


def whole_word_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
  """Corpus BLEU of re-joined ``hypotheses`` on ``references`` as published.

  Returns ``{"bleu", "signature", "precisions", "details", "note"}``.
  """
  # force: tokenized text is what this scoring is about.
  bleu = sacrebleu.BLEU(tokenize="none", lowercase=True, force=True)
  score = bleu.corpus_score([moses_join(h) for h in hypotheses], [list(references)])
  return {"bleu": score.score, "signature": str(bleu.get_signature()),
          "precisions": list(score.precisions), "details": str(score),
          "note": WHOLE_WORD_NOTE}
