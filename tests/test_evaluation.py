"""BLEU evaluation, checkpoint averaging and evaluate.py (transformer/evaluation.py)."""

import json
from pathlib import Path

import keras
import numpy as np
import pytest
import sacrebleu
import tensorflow as tf

from configs import tiny
from transformer import evaluation
from transformer.model import Transformer
from transformer.optimization import make_optimizer

TOKENIZER_PATH = Path(__file__).resolve().parents[1].parent / "shared" / "data" / \
    "tutorial_tokenizer"
PAIRS = [("um dois três .", "one two three ."), ("olá .", "hello ."),
         ("o gato está no tapete .", "the cat is on the mat ."),
         ("ela não sabia .", "she did n't know ."), ("sim", "yes")]


def tiny_config():
  config = tiny.get_config()
  config.model.max_position = 64
  config.decoding.extra_length = 5
  return config


def build_model(config, input_vocab_size=50, target_vocab_size=40):
  keras.utils.set_random_seed(0)
  model = Transformer.from_model_config(config.model, input_vocab_size, target_vocab_size)
  model.build(((None, None), (None, None)))
  return model


def write_checkpoints(model, checkpoint_dir, values, config):
  """One checkpoint per value, every model variable filled with it (as train.py
  writes them: model and optimizer)."""
  optimizer = make_optimizer(config)
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(model=model, optimizer=optimizer), str(checkpoint_dir), max_to_keep=5)
  for value in values:
    for variable in model.weights:
      variable.assign(tf.fill(variable.shape, value))
    manager.save()
  return manager.checkpoints


def test_evaluate_bleu_scores_writes_and_keeps_order(tmp_path):
  references = dict(PAIRS)
  calls = []

  def translate_batch(sentences):
    calls.append(list(sentences))
    # Perfect except for one sentence.
    return ["the cat sat ." if s.startswith("o gato") else references[s] for s in sentences]

  result = evaluation.evaluate_bleu(translate_batch, PAIRS, tmp_path / "bleu", "validation",
                                    "greedy", batch_size=2)
  hypotheses = [translate_batch([s])[0] for s, _ in PAIRS]
  expected = sacrebleu.corpus_bleu(hypotheses, [[r for _, r in PAIRS]])
  assert result["bleu"] == pytest.approx(expected.score)
  assert 0 < result["bleu"] < 100
  assert [len(c) for c in calls[:3]] == [2, 2, 1]
  # Batches hold sentences of similar length: the shortest ones first.
  assert calls[0] == ["sim", "olá ."]
  written = (tmp_path / "bleu" / "validation.greedy.txt").read_text(encoding="utf-8")
  assert written.splitlines() == hypotheses
  record = json.loads((tmp_path / "bleu" / "validation.greedy.json").read_text())
  assert record["num_sentences"] == 5 and record["split"] == "validation"
  assert record["method"] == "greedy" and record["bleu"] == result["bleu"]
  assert "tok:13a" in record["signature"]


def test_evaluate_bleu_rejects_wrong_number_of_translations(tmp_path):
  with pytest.raises(ValueError, match="returned 1 translations for 2"):
    evaluation.evaluate_bleu(lambda s: ["x"], PAIRS[:2], tmp_path, "test", "beam")


class TwoLayers(keras.Model):
  """A model whose layers tf.train.Checkpoint can reach (plain attributes)."""

  def __init__(self, second_layer=True):
    super().__init__()
    self.first = keras.layers.Dense(3)
    self.second = keras.layers.Dense(2) if second_layer else None

  def call(self, x):
    x = self.first(x)
    return self.second(x) if self.second is not None else x


def built(model):
  model(tf.zeros((1, 4)))
  return model


def test_average_checkpoints_is_the_elementwise_mean(tmp_path):
  model = built(TwoLayers())
  written = write_checkpoints(model, tmp_path / "checkpoints", [1.0, 2.0, 6.0], tiny_config())

  assert evaluation.average_checkpoints(model, tmp_path / "checkpoints", 3) == written
  for variable in model.weights:
    np.testing.assert_allclose(variable.numpy(), 3.0)
  assert evaluation.average_checkpoints(model, tmp_path / "checkpoints", 2) == written[1:]
  for variable in model.weights:
    np.testing.assert_allclose(variable.numpy(), 4.0)

  with pytest.raises(evaluation.CheckpointError, match="last 4 .* has 3"):
    evaluation.average_checkpoints(model, tmp_path / "checkpoints", 4)
  with pytest.raises(evaluation.CheckpointError, match="has 0"):
    evaluation.average_checkpoints(model, tmp_path / "empty", 1)


def test_restore_refuses_checkpoints_missing_model_variables(tmp_path):
  written = write_checkpoints(built(TwoLayers(second_layer=False)), tmp_path, [1.0],
                              tiny_config())
  with pytest.raises(evaluation.CheckpointError, match="holds 2 of the model's 4"):
    evaluation.average_checkpoints(built(TwoLayers()), tmp_path, 1)
  with pytest.raises(evaluation.CheckpointError, match="holds 2 of the model's 4"):
    evaluation.restore_model(built(TwoLayers()), written[0])


def test_average_checkpoints_of_a_transformer(tmp_path):
  config = tiny_config()
  model = build_model(config)
  write_checkpoints(model, tmp_path, [1.0, 2.0, 6.0], config)
  evaluation.average_checkpoints(model, tmp_path, 3)
  for variable in model.weights:
    np.testing.assert_allclose(variable.numpy(), 3.0)


def test_evaluate_cli_scores_an_averaged_model_dir(tmp_path):
  if not TOKENIZER_PATH.exists():
    pytest.skip(f"tutorial tokenizer SavedModel not found at {TOKENIZER_PATH}")
  import evaluate  # pylint: disable=g-import-not-at-top
  config = tiny_config()
  model_dir = tmp_path / "run"
  model_dir.mkdir()
  (model_dir / "config.json").write_text(config.to_json())
  (model_dir / "tokenizer_path.txt").write_text(f"{TOKENIZER_PATH}\n")
  write_checkpoints(build_model(config, 7765, 7010), model_dir / "checkpoints",
                    [0.01, 0.02, 0.03], config)
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  (data_dir / "pt.dev").write_text("".join(s + "\n" for s, _ in PAIRS), encoding="utf-8")
  (data_dir / "en.dev").write_text("".join(r + "\n" for _, r in PAIRS), encoding="utf-8")

  export_dir = tmp_path / "averaged"
  result = evaluate.evaluate(model_dir, "validation", "greedy", 2, data_dir,
                             export_dir=str(export_dir))
  assert result["num_sentences"] == len(PAIRS)
  exported = tf.saved_model.load(str(export_dir))
  assert exported.translate_greedy(tf.constant(["olá ."])).shape == (1,)

  # The exported translator scores the same as the model it was exported from.
  from_export = evaluate.evaluate_translator(export_dir, "validation", "greedy", data_dir,
                                             output_dir=tmp_path / "bleu_export")
  assert from_export["bleu"] == pytest.approx(result["bleu"])
  assert from_export["references"] == "tokenizer round trip"
  assert [Path(p).name for p in result["checkpoints"]] == ["ckpt-2", "ckpt-3"]
  assert (model_dir / "bleu" / "validation.greedy.json").is_file()
  assert len((model_dir / "bleu" / "validation.greedy.txt").read_text().splitlines()) == 5

  _, _, model, _ = evaluation.restore_model_dir(model_dir, average_last=2)
  for variable in model.weights:
    np.testing.assert_allclose(variable.numpy(), 0.025, rtol=1e-6)


def test_references_take_the_tokenizer_round_trip(tmp_path):
  """A perfect output of the WordPiece detokenizer scores 100 only against
  references that went through the same round trip (``did n't`` → ``did n ' t``)."""
  if not TOKENIZER_PATH.exists():
    pytest.skip(f"tutorial tokenizer SavedModel not found at {TOKENIZER_PATH}")
  from transformer.tokenizers import load_tokenizers  # pylint: disable=g-import-not-at-top
  english = load_tokenizers(TOKENIZER_PATH).en
  pairs = [("eu não sei .", "i did n't know ."),
           ("é a casa dele .", "it 's his house , isn't it ?"),
           ("citação", "he said `` yes '' .")]
  perfect = evaluation.round_trip(english, [reference for _, reference in pairs])
  outputs = dict(zip([source for source, _ in pairs], perfect))

  def translate_batch(sentences):
    return [outputs[s] for s in sentences]

  raw = evaluation.evaluate_bleu(translate_batch, pairs, tmp_path, "test", "greedy")
  fair = evaluation.evaluate_bleu(translate_batch, pairs, tmp_path, "test", "greedy",
                                  reference_tokenizer=english)
  assert fair["bleu"] == pytest.approx(100.0)
  assert raw["bleu"] < 60
  assert fair["references"] == "tokenizer round trip"
