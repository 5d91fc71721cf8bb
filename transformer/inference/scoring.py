"""BLEU of translations already made, and the files that record it; no TensorFlow.

The scoring step of :mod:`transformer.inference.evaluation` (see it for what the
two scorings compare): one record whatever the backend or the translator.
"""

import json
import os
from pathlib import Path
from typing import Optional, Sequence, Union

import sacrebleu

from transformer.inference import bleu as bleu_lib
from transformer.run.files import write_text_atomically

PathLike = Union[str, os.PathLike]
TOKENIZED_BLEU_NOTE = ("BLEU of lower-cased, tokenized text (on purpose, see "
                       "transformer/inference/evaluation.py): comparable within this project only")


def score_hypotheses(hypotheses: Sequence[str], references: Sequence[str],
                     output_dir: PathLike, split_name: str, method: str,
                     round_tripped_references: Optional[Sequence[str]] = None,
                     split_size: Optional[int] = None) -> dict:
  """The BLEU record of ``hypotheses`` on ``references`` (as in the data), to be
  written by :func:`write_result` as ``<output_dir>/<stem>.txt`` and ``.json``;
  ``bleu`` on ``round_tripped_references`` when given. ``split_size``: the whole
  split's sentences (None: these are all of it).
  """
  whole_word = bleu_lib.whole_word_bleu(hypotheses, references)
  scored = references if round_tripped_references is None else round_tripped_references
  # force: the text is tokenized on purpose (module docstring), so sacreBLEU's
  # "forgot to detokenize" warning does not apply; the JSON says so instead.
  bleu = sacrebleu.BLEU(force=True)
  score = bleu.corpus_score(list(hypotheses), [list(scored)])
  # test.beam.partial200 for the first 200 only: a partial score neither passes
  # for a full one nor overwrites it.
  partial = split_size is not None and len(hypotheses) < split_size
  stem = f"{split_name}.{method}" + (f".partial{len(hypotheses)}" if partial else "")
  return {"bleu": score.score, "signature": str(bleu.get_signature()), "method": method,
          "split": split_name, "num_sentences": len(hypotheses),
          "partial": partial,
          "references": ("tokenizer round trip" if round_tripped_references is not None
                         else "as in the data"),
          "hypotheses_file": str(Path(output_dir) / f"{stem}.txt"), "details": str(score),
          "note": TOKENIZED_BLEU_NOTE, "whole_word": whole_word}


def write_result(result: dict, hypotheses: Sequence[str]) -> None:
  """Writes the hypotheses (``result["hypotheses_file"]``), then the JSON beside
  them, each whole (:func:`transformer.run.files.staged`): a stop leaves the
  previous complete JSON, never a part of this one."""
  hypotheses_file = Path(result["hypotheses_file"])
  hypotheses_file.parent.mkdir(parents=True, exist_ok=True)
  # Hypotheses hold no newlines (the detokenizer joins tokens with spaces).
  write_text_atomically(hypotheses_file, "".join(h + "\n" for h in hypotheses))
  write_text_atomically(hypotheses_file.with_suffix(".json"), json.dumps(result, indent=2) + "\n")
