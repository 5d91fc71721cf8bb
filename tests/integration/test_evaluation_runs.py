"""evaluate.py's evaluation in this process, with the tutorial's tokenizers: a
run folder's averaged checkpoints scored, exported and scored again from the
export, and its teacher-forced metrics against the Trainer's
(transformer/inference/evaluation.py, transformer/run/run_folder.py). The parts:
tests/unit/test_evaluation.py; evaluate.py as a user runs it:
tests/scripts/test_evaluate_cli.py."""

import json
from pathlib import Path

import numpy as np
import pytest

from helpers.run_folders import PAIRS, assert_weights, write_data_dir, write_model_dir
from transformer.inference import evaluation
from transformer.run import run_folder


@pytest.mark.slow
def test_evaluate_scores_an_averaged_model_dir_as_its_export_does(
    short_config, tmp_path, tutorial_tokenizer_path, tutorial_tokenizers):
  import evaluate  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "run"
  _, values = write_model_dir(model_dir, short_config(), tutorial_tokenizer_path,
                              tutorial_tokenizers, 3)
  data_dir = write_data_dir(tmp_path / "data", PAIRS)

  export_dir = tmp_path / "averaged"
  result = evaluate.evaluate(model_dir, "validation", "greedy", 2, data_dir,
                             export_dir=str(export_dir))
  assert [Path(p).name for p in result["checkpoints"]] == ["ckpt-2", "ckpt-3"]
  assert result["num_sentences"] == len(PAIRS)
  hypotheses = Path(result["hypotheses_file"]).read_text(encoding="utf-8").splitlines()
  assert len(hypotheses) == len(PAIRS) and all(h.strip() for h in hypotheses)

  # The exported translator translates exactly as the averaged model did.
  from_export = evaluate.evaluate_translator(export_dir, "validation", "greedy", data_dir,
                                             output_dir=tmp_path / "bleu_export")
  exported = Path(from_export["hypotheses_file"]).read_text(encoding="utf-8").splitlines()
  assert exported == hypotheses
  assert from_export["bleu"] == pytest.approx(result["bleu"])
  assert from_export["references"] == "tokenizer round trip"

  # The JSON on disk names the averaged checkpoints and the teacher-forced metrics.
  on_disk = json.loads((model_dir / "bleu" / "validation.greedy.json").read_text())
  assert on_disk["checkpoints"] == result["checkpoints"]
  assert on_disk["teacher_forced"] == result["teacher_forced"]

  _, _, model, _ = evaluation.restore_model_dir(model_dir, average_last=2)
  assert_weights(model, [np.mean(arrays, axis=0) for arrays in zip(*values[1:])])
  _, _, model, used = evaluation.restore_model_dir(model_dir)
  assert [Path(p).name for p in used] == ["ckpt-3"]
  assert_weights(model, values[2])


@pytest.mark.slow
def test_teacher_forced_metrics_are_the_trainers_validation_metrics(tiny_config, make_trainer,
                                                                    tutorial_tokenizers):
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  from transformer.data.tokenizers import vocab_sizes  # pylint: disable=g-import-not-at-top
  config = tiny_config()
  config.training.label_smoothing = 0.1
  trainer = make_trainer(config, vocab_sizes(tutorial_tokenizers))
  expected = trainer.evaluate(pipeline.make_batches(
      ted.pairs_to_dataset(PAIRS), tutorial_tokenizers, max_tokens=config.data.max_tokens,
      batch_size=config.data.batch_size, shuffle=False))
  metrics = evaluation.teacher_forced_metrics(
      trainer.model, evaluation.tokenized(tutorial_tokenizers, PAIRS), config)
  assert metrics["tokens"] == expected["tokens"]
  assert metrics["loss"] == pytest.approx(expected["loss"], rel=1e-5)
  assert metrics["accuracy"] == pytest.approx(expected["accuracy"], rel=1e-6)
