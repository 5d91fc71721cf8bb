"""Whole-word BLEU on the references as published: the scoring of Qi et al. (2018).

Qi et al. (2018, NAACL), who made this TED split, score lower-cased, tokenized
BLEU on Moses-tokenized references (``that 's``, ``did n't``, ``6,000``); the
tutorial tokenizer's English splits every punctuation mark off (``that ' s``).
:func:`moses_join` re-joins it, and :func:`whole_word_bleu` scores it on the
references split on spaces (sacreBLEU ``tokenize='none'``, ``lowercase=True``,
as ``multi-bleu.perl -lc``). Stripped accents and Moses' abbreviations are not
restored: the dev references' own round trip scores just under 100.
"""

import re
from typing import Sequence

import sacrebleu

WHOLE_WORD_NOTE = ("lower-cased BLEU on the references' Moses tokens (sacreBLEU "
                   "tokenize='none'), hypotheses re-joined by transformer/inference/bleu.py: the "
                   "scoring of Qi et al. (2018) for this split")

# Applied in order: quotes first, so that "' '" is a closing quote, not a contraction.
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
  """The tutorial detokenizer's English re-joined to Moses' tokens:
  ``"it ' s 6 , 000 ` ` well - known ' '"`` → ``"it 's 6,000 `` well-known ''"``.
  Repeated quote marks pair up from the left (``` ` ` ` ` ``` → ``` `` `` ```).
  """
  for pattern, replacement in _JOINS:
    text = pattern.sub(replacement, text)
  return text


def whole_word_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
  """Corpus BLEU of re-joined ``hypotheses`` on ``references`` as published:
  ``{"bleu", "signature", "precisions", "details", "note"}``."""
  # force: tokenized text is what this scoring is about.
  bleu = sacrebleu.BLEU(tokenize="none", lowercase=True, force=True)
  score = bleu.corpus_score([moses_join(h) for h in hypotheses], [list(references)])
  return {"bleu": score.score, "signature": str(bleu.get_signature()),
          "precisions": list(score.precisions), "details": str(score),
          "note": WHOLE_WORD_NOTE}
