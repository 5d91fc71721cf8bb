"""Whole-word BLEU on the Moses-tokenized references (transformer/inference/bleu.py)."""

import json

import pytest

from transformer.inference import bleu
from transformer.inference import evaluation


@pytest.mark.parametrize("detokenized, moses", [
    ("that ' s why", "that 's why"),
    ("i did n ' t know", "i did n't know"),
    ("we ' re , i ' m , they ' ve , you ' ll , he ' d",
     "we 're , i 'm , they 've , you 'll , he 'd"),
    ("chris ' s clock", "chris 's clock"),
    ("` ` ` ` ' ' we have no freedom , ' ' ' ' they said . ' '",
     "`` `` '' we have no freedom , '' '' they said . ''"),
    ("solar - powered clocks on the y - axis", "solar-powered clocks on the y-axis"),
    ("6 , 000 people , 4 . 9 meters", "6,000 people , 4.9 meters"),
    ("wait . . . what", "wait ... what"),
    # A list of numbers and a quoted word stay apart.
    ("1 , 2 , 3", "1 , 2 , 3"),
    ("the ' idea ' of it", "the ' idea ' of it"),
])
def test_moses_join_restores_the_references_tokens(detokenized, moses):
  assert bleu.moses_join(detokenized) == moses


def test_a_perfect_output_scores_100_after_rejoining():
  references = ["that 's it , `` he said '' .", "they did n't come to the u-turn ."]
  detokenized = ["that ' s it , ` ` he said ' ' .",
                 "they did n ' t come to the u - turn ."]
  assert bleu.whole_word_bleu(detokenized, references)["bleu"] == pytest.approx(100.0)


def test_upper_case_output_is_scored_lower_cased():
  result = bleu.whole_word_bleu(["That ' s IT ."], ["that 's it ."])
  assert result["bleu"] == pytest.approx(100.0)
  assert "case:lc" in result["signature"] and "tok:none" in result["signature"]


def test_a_contraction_is_one_word_not_three(tmp_path, tutorial_tokenizers):
  """One wrong word after ``n't``, scored both ways by evaluate_bleu.

  Whole words: 8 per side, n-gram matches 7/8, 5/7, 4/6, 3/5, BLEU = 0.25^¼.
  Today's scoring (round-tripped reference, ``n ' t`` is three tokens): 10 per
  side, 9/10, 7/9, 6/8, 5/7, BLEU = (3/8)^¼.
  """
  pairs = [("eu não sei o que dizer .", "i do n't know what to say .")]
  output = "i do n ' t know what to do ."
  result = evaluation.evaluate_bleu(lambda sentences: [output], pairs, tmp_path, "test",
                                    "greedy", reference_tokenizer=tutorial_tokenizers.en)
  whole = result["whole_word"]
  assert whole["precisions"] == pytest.approx([100 * 7 / 8, 100 * 5 / 7, 100 * 4 / 6,
                                               100 * 3 / 5])
  assert whole["bleu"] == pytest.approx(100 * 0.25 ** 0.25)
  assert result["bleu"] == pytest.approx(100 * (3 / 8) ** 0.25)
  record = json.loads((tmp_path / "test.greedy.json").read_text())
  assert record["whole_word"]["bleu"] == pytest.approx(whole["bleu"])


def test_the_dev_sets_own_round_trip_scores_nearly_100(ted_data_dir, tutorial_tokenizers):
  """What a perfect model's detokenized output would be, on all of en.dev:
  re-joined, it nearly matches the references (accents and abbreviations such
  as ``u.s.`` are not restored); not re-joined, it is far from them."""
  references = (ted_data_dir / "en.dev").read_text(encoding="utf-8").splitlines()
  perfect = evaluation.round_trip(tutorial_tokenizers.en, references)
  assert bleu.whole_word_bleu(perfect, references)["bleu"] > 99.0
  not_joined = sum(p == r for p, r in zip(perfect, references))
  joined = sum(bleu.moses_join(p) == r for p, r in zip(perfect, references))
  assert joined > 0.97 * len(references) > 0.7 * len(references) > not_joined
