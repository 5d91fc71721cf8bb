"""BLEU evaluation and checkpoint averaging (transformer/inference/evaluation.py,
transformer/inference/averaging.py, transformer/run/run_folder.py). evaluate.py's whole
evaluation in this process: tests/integration/test_evaluation_runs.py; as a
user runs it: tests/scripts/test_evaluate_cli.py."""

import json
import logging
from pathlib import Path

import keras
import numpy as np
import pytest
import sacrebleu
import tensorflow as tf

from helpers.run_folders import PAIRS, VOCAB, assert_weights, write_trainer_checkpoints
from transformer.data import shards
from transformer.data.detokenize import Detokenizer
from transformer.data.reserved_tokens import END_ID, RESERVED_TOKENS, START_ID
from transformer.inference import averaging
from transformer.inference import evaluation
from transformer.run import run_folder
from transformer.run.checkpoint_files import CheckpointError


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


class EchoData:
  """A backend for :func:`evaluation.evaluate`: each source's ids decode to
  themselves, the words ``w<id>``; the references are the sources' words."""

  split = "test"

  def __init__(self, sources):
    self.ids = shards.Split([np.array([START_ID, *s, END_ID], np.int32) for s in sources],
                            [np.array([START_ID, *s, END_ID], np.int32) for s in sources])
    self.detokenize = Detokenizer([*RESERVED_TOKENS, *(f"w{i}" for i in range(4, VOCAB[1]))])
    self.references = self.detokenize(self.ids.en)
    self.split_size = len(sources) + 1  # a partial score
    self.batches = []

  def decoder(self, model, method, decoding_config, batch_size):
    del model, method, decoding_config, batch_size

    def decode_batch(batch):
      self.batches.append([len(ids) for ids in batch])
      return [ids[1:] for ids in batch]  # no [START], as decoders give them

    return decode_batch


def test_evaluate_decodes_by_id_length_and_writes_the_record_in_order(make_model, short_config,
                                                                       tmp_path):
  config = short_config()
  data = EchoData([[5, 6, 7], [8], [9, 10], [11, 12, 13, 14]])
  run = evaluation.Restored(config, make_model(config, VOCAB), ["a/ckpt-3"], ["ckpt-3"])
  result = evaluation.evaluate(data, run, "greedy", tmp_path, batch_size=2,
                               record={"checkpoints": run.checkpoints, "export_dir": None},
                               say=lambda line: None)
  assert data.batches == [[3, 4], [5, 6]]  # the shortest sources first
  written = (tmp_path / "test.greedy.partial4.txt").read_text(encoding="utf-8").splitlines()
  assert written == data.references == ["w5 w6 w7", "w8", "w9 w10", "w11 w12 w13 w14"]
  assert result["bleu"] == pytest.approx(100.0) and result["partial"]
  assert result["references"] == "tokenizer round trip"
  record = json.loads((tmp_path / "test.greedy.partial4.json").read_text())
  assert list(record)[-4:] == ["whole_word", "checkpoints", "export_dir", "teacher_forced"]
  # Every reference token after [START] is a label: 3 + 1 + 2 + 4 words, 4 [END]s.
  assert record["teacher_forced"]["tokens"] == 14


def test_evaluate_bleu_rejects_wrong_number_of_translations(tmp_path):
  with pytest.raises(ValueError, match="returned 1 translations for 2"):
    evaluation.evaluate_bleu(lambda s: ["x"], PAIRS[:2], tmp_path, "test", "beam")


def test_bleu_on_tokenized_text_says_so_without_sacrebleu_warning(tmp_path, caplog, capfd):
  """The text is tokenized on purpose: sacreBLEU's "forgot to detokenize" warning
  (given for >= 100 hypotheses ending in " .") is silenced, and the JSON says so."""
  pairs = [(f"esta é a frase {i} .", f"this is sentence number {i} .") for i in range(120)]
  references = dict(pairs)
  with caplog.at_level(logging.WARNING, logger="sacrebleu"):
    result = evaluation.evaluate_bleu(lambda sentences: [references[s] for s in sentences],
                                      pairs, tmp_path, "test", "greedy")
  assert result["bleu"] == pytest.approx(100.0)
  assert "detokenize" not in caplog.text + capfd.readouterr().err
  record = json.loads((tmp_path / "test.greedy.json").read_text())
  assert "tokenized" in record["note"] and "transformer/inference/evaluation.py" in record["note"]


def test_averaging_trainer_checkpoints_gives_the_mean_of_each_variable(make_model, short_config,
                                                                       tmp_path):
  config = short_config()
  paths, values = write_trainer_checkpoints(tmp_path, config, 3)
  # What broke name-based checks: the Trainer's checkpoints name the model's
  # variables through the optimizer (optimizer/_trainable_variables/N).
  names = [name for name, _ in tf.train.list_variables(paths[0])]
  assert not any(name.startswith("model/") for name in names)

  checkpoint_dir = run_folder.checkpoint_dir(tmp_path)
  model = make_model(config, VOCAB)
  assert averaging.last_checkpoints(checkpoint_dir, 3) == paths
  averaging.average_checkpoints(model, paths)
  assert_weights(model, [np.mean(arrays, axis=0) for arrays in zip(*values)])
  averaging.average_checkpoints(model, averaging.last_checkpoints(checkpoint_dir, 2))
  assert_weights(model, [np.mean(arrays, axis=0) for arrays in zip(*values[1:])])
  averaging.restore_model(model, paths[0])
  assert_weights(model, values[0])


def test_last_checkpoints_refuses_to_average_more_than_there_are(short_config, tmp_path):
  paths, _ = write_trainer_checkpoints(tmp_path, short_config(), 2)
  checkpoint_dir = run_folder.checkpoint_dir(tmp_path)
  assert averaging.last_checkpoints(checkpoint_dir, 1) == paths[1:]
  with pytest.raises(CheckpointError, match="last 3 checkpoints but .* has 2"):
    averaging.last_checkpoints(checkpoint_dir, 3)
  with pytest.raises(CheckpointError, match="has 0"):
    averaging.last_checkpoints(tmp_path / "empty", 1)
  with pytest.raises(CheckpointError, match=">= 1"):
    averaging.last_checkpoints(checkpoint_dir, 0)


@pytest.mark.parametrize("overrides", [
    {"d_model": 64},    # every shape differs: the restore fails
    {"num_layers": 3},  # all of the model's variables are there, and more
    {"num_layers": 1},  # some of the model's variables are missing
], ids=["d_model", "more_layers", "fewer_layers"])
def test_restore_refuses_a_checkpoint_of_another_model(make_model, short_config, tmp_path,
                                                       overrides):
  two_layers = {"num_layers": 2}  # so that the checkpoint can have fewer
  (path,), _ = write_trainer_checkpoints(tmp_path, short_config(**{**two_layers, **overrides}), 1)
  model = make_model(short_config(**two_layers), VOCAB)
  with pytest.raises(CheckpointError, match=path):
    averaging.restore_model(model, path)
  with pytest.raises(CheckpointError, match=path):
    averaging.average_checkpoints(model, [path])


def test_restore_refuses_a_checkpoint_of_a_submodule(make_model, short_config, tmp_path):
  model = make_model(short_config(), VOCAB)
  path = tf.train.Checkpoint(model=model.decoder).write(str(tmp_path / "decoder"))
  with pytest.raises(CheckpointError, match=path):
    averaging.restore_model(make_model(short_config(), VOCAB), path)


class TwoDense(keras.Model):
  """Two Dense layers under chosen attribute names."""

  def __init__(self, second_name):
    super().__init__()
    self.first = keras.layers.Dense(3)
    setattr(self, second_name, keras.layers.Dense(2))
    self.second_name = second_name

  def call(self, x):
    return getattr(self, self.second_name)(self.first(x))


def test_restore_refuses_as_many_variables_in_other_places(tmp_path):
  """Same number and shapes of variables, but one layer under another name: the
  object graph leaves the model's ``second`` layer unmatched."""
  other = TwoDense("other")
  other(tf.zeros((1, 4)))
  path = tf.train.Checkpoint(model=other).write(str(tmp_path / "other"))
  model = TwoDense("second")
  model(tf.zeros((1, 4)))
  with pytest.raises(CheckpointError, match=f"{path} does not fit the model"):
    averaging.restore_model(model, path)


def test_restore_refuses_a_corrupt_checkpoint(make_model, short_config, tmp_path):
  (path,), _ = write_trainer_checkpoints(tmp_path, short_config(), 1)
  Path(path + ".index").write_bytes(b"not a checkpoint index")
  with pytest.raises(CheckpointError, match=f"cannot read the checkpoint {path}"):
    averaging.restore_model(make_model(short_config(), VOCAB), path)


def test_references_take_the_tokenizer_round_trip(tmp_path, tutorial_tokenizers):
  """A perfect output of the WordPiece detokenizer scores 100 only against
  references that went through the same round trip (``did n't`` → ``did n ' t``)."""
  english = tutorial_tokenizers.en
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
