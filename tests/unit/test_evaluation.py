"""BLEU evaluation, checkpoint averaging and evaluate.py (transformer/evaluation.py,
transformer/averaging.py, transformer/run_folder.py)."""

import json
import logging
import os
from pathlib import Path
import subprocess
import sys

import keras
import numpy as np
import pytest
import sacrebleu
import tensorflow as tf

from transformer import averaging
from transformer import evaluation
from transformer import run_folder
from transformer.checkpoint_files import CheckpointError
from transformer.training.trainer import Trainer
from transformer import checkpoint_files

REPO_DIR = Path(__file__).resolve().parents[2]
PAIRS = [("um dois três .", "one two three ."), ("olá .", "hello ."),
         ("o gato está no tapete .", "the cat is on the mat ."),
         ("ela não sabia .", "she did n't know ."), ("sim", "yes")]
VOCAB = (50, 40)  # (pt, en) vocabulary sizes of the models without a tokenizer


def write_trainer_checkpoints(model_dir, config, count, vocab=VOCAB, seed=0):
  """``count`` checkpoints written as train.py writes them (the Trainer's model,
  optimizer and data position), each with distinct random values in every
  model variable.

  Returns:
    (checkpoint paths, values): ``values[c][i]`` is the array written for
    ``model.weights[i]`` in checkpoint ``c``.
  """
  trainer = Trainer(config, input_vocab_size=vocab[0], target_vocab_size=vocab[1],
                    model_dir=model_dir, progress=False)
  rng = np.random.default_rng(seed)
  paths, values = [], []
  for step in range(1, count + 1):
    current = [rng.normal(0.0, 0.1, v.shape).astype(np.float32) for v in trainer.model.weights]
    for variable, value in zip(trainer.model.weights, current):
      variable.assign(value)
    trainer.optimizer.iterations.assign(step)  # checkpoints are numbered by the step
    paths.append(trainer.save_checkpoint())
    values.append(current)
  return paths, values


def assert_weights(model, expected):
  assert len(model.weights) == len(expected)
  for variable, value in zip(model.weights, expected):
    np.testing.assert_allclose(variable.numpy(), value, rtol=1e-5, atol=1e-7,
                               err_msg=variable.path)


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
  assert "tokenized" in record["note"] and "transformer/evaluation.py" in record["note"]


def test_averaging_trainer_checkpoints_gives_the_mean_of_each_variable(make_model, short_config,
                                                                       tmp_path):
  config = short_config()
  paths, values = write_trainer_checkpoints(tmp_path, config, 3)
  # What broke name-based checks: the Trainer's checkpoints name the model's
  # variables through the optimizer (optimizer/_trainable_variables/N).
  names = [name for name, _ in tf.train.list_variables(paths[0])]
  assert not any(name.startswith("model/") for name in names)

  checkpoint_dir = tmp_path / checkpoint_files.CHECKPOINT_SUBDIR
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
  checkpoint_dir = tmp_path / checkpoint_files.CHECKPOINT_SUBDIR
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


def write_model_dir(model_dir, config, tokenizer_path, tokenizers, count):
  """A train.py output folder of ``config``: config.json, tokenizer_path.txt and
  ``count`` Trainer checkpoints with random weights. Returns write_trainer_checkpoints'."""
  from transformer.tokenizers import vocab_sizes  # pylint: disable=g-import-not-at-top
  model_dir.mkdir(parents=True)
  (model_dir / "config.json").write_text(config.to_json())
  (model_dir / "tokenizer_path.txt").write_text(f"{tokenizer_path}\n")
  return write_trainer_checkpoints(model_dir, config, count, vocab=vocab_sizes(tokenizers))


def write_data_dir(data_dir, pairs, split_suffix="dev"):
  data_dir.mkdir(parents=True)
  (data_dir / f"pt.{split_suffix}").write_text("".join(s + "\n" for s, _ in pairs),
                                               encoding="utf-8")
  (data_dir / f"en.{split_suffix}").write_text("".join(r + "\n" for _, r in pairs),
                                               encoding="utf-8")
  return data_dir


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

  _, _, model, _ = run_folder.restore_model_dir(model_dir, average_last=2)
  assert_weights(model, [np.mean(arrays, axis=0) for arrays in zip(*values[1:])])
  _, _, model, used = run_folder.restore_model_dir(model_dir)
  assert [Path(p).name for p in used] == ["ckpt-3"]
  assert_weights(model, values[2])


@pytest.mark.slow
def test_teacher_forced_metrics_are_the_trainers_validation_metrics(tiny_config, make_trainer,
                                                                    tutorial_tokenizers):
  from transformer import data  # pylint: disable=g-import-not-at-top
  from transformer import pipeline  # pylint: disable=g-import-not-at-top
  from transformer.tokenizers import vocab_sizes  # pylint: disable=g-import-not-at-top
  config = tiny_config()
  config.training.label_smoothing = 0.1
  trainer = make_trainer(config, vocab_sizes(tutorial_tokenizers))
  expected = trainer.evaluate(pipeline.make_batches(
      data.pairs_to_dataset(PAIRS), tutorial_tokenizers, max_tokens=config.data.max_tokens,
      batch_size=config.data.batch_size, shuffle=False))
  metrics = evaluation.teacher_forced_metrics(trainer.model, tutorial_tokenizers, PAIRS, config)
  assert metrics["tokens"] == expected["tokens"]
  assert metrics["loss"] == pytest.approx(expected["loss"], rel=1e-5)
  assert metrics["accuracy"] == pytest.approx(expected["accuracy"], rel=1e-6)


# evaluate.py as a user runs it: bad input gives one line and exit status 1.

def run_evaluate(*args, verbose=False):
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  env["PYTHONPATH"] = str(REPO_DIR)
  return subprocess.run([sys.executable, "evaluate.py", *args, *(["--verbose"] * verbose)],
                        cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=300)


def assert_one_line_error(result, message):
  assert result.returncode == 1, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("evaluate.py: error: "), result.stderr[-3000:]
  assert message in lines[0]


@pytest.fixture(scope="module")
def cli_dirs(short_config, tmp_path_factory, tutorial_tokenizer_path, tutorial_tokenizers):
  """(model_dir with 2 checkpoints, data folder with a validation split)."""
  root = tmp_path_factory.mktemp("cli")
  write_model_dir(root / "run", short_config(), tutorial_tokenizer_path, tutorial_tokenizers,
                  2)
  return root / "run", write_data_dir(root / "data", PAIRS)


@pytest.mark.slow
@pytest.mark.parametrize("case,message", [
    ("no_source", "give exactly one of --model_dir and --translator"),
    ("missing_data", "not a folder with the TED HRLR files of the validation split "
                     "(missing pt.dev, en.dev)"),
    ("empty_model_dir", "not a train.py output folder (missing config.json, "
                        "tokenizer_path.txt, checkpoints/checkpoint)"),
    ("translator_missing", "not a SavedModel folder"),
    ("translator_keras_file", "not a SavedModel folder"),
    ("translator_checkpoint_dir", "not a SavedModel folder"),
    ("translator_with_average", "--average_last and --export_dir need --model_dir"),
    ("positional", "unexpected arguments: extra"),
])
def test_bad_input_fails_in_one_line_before_tensorflow(tmp_path, case, message):
  data_dir = write_data_dir(tmp_path / "data", PAIRS)
  keras_file = tmp_path / "transformer.keras"
  keras_file.write_bytes(b"PK")
  (tmp_path / "empty").mkdir()
  (tmp_path / "checkpoints").mkdir()
  (tmp_path / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
  args = {
      "no_source": [],
      # A folder without the files (an absent one gives way to 'tfds').
      "missing_data": [f"--model_dir={tmp_path}", f"--data={tmp_path / 'empty'}"],
      "empty_model_dir": [f"--model_dir={tmp_path / 'empty'}"],
      "translator_missing": [f"--translator={tmp_path / 'nowhere'}"],
      "translator_keras_file": [f"--translator={keras_file}"],
      "translator_checkpoint_dir": [f"--translator={tmp_path / 'checkpoints'}"],
      "translator_with_average": [f"--translator={tmp_path}", "--average_last=2"],
      "positional": [f"--model_dir={tmp_path}", "extra"],
  }[case]
  if case != "missing_data":
    args.append(f"--data={data_dir}")
  result = run_evaluate(*args)
  assert_one_line_error(result, message)
  assert "tensorflow" not in result.stderr.lower()


@pytest.mark.slow
def test_averaging_more_checkpoints_than_there_are_fails_in_one_line(cli_dirs):
  model_dir, data_dir = cli_dirs
  result = run_evaluate(f"--model_dir={model_dir}", f"--data={data_dir}",
                        "--average_last=3")
  assert_one_line_error(result, "asked for the last 3 checkpoints but")
  assert "has 2" in result.stderr
  # TensorFlow's own logs (its start-up lines at least) only with --verbose.
  verbose = run_evaluate(f"--model_dir={model_dir}", f"--data={data_dir}",
                         "--average_last=3", verbose=True)
  assert verbose.returncode == 1 and "Traceback" not in verbose.stderr
  assert len(verbose.stderr.strip().splitlines()) > 1


@pytest.mark.slow
def test_corrupt_checkpoints_fail_in_one_line(tmp_path, cli_dirs):
  """Every checkpoint corrupt (a corrupt newest one alone is skipped, issue #32:
  tests/faults/test_faults.py)."""
  import shutil  # pylint: disable=g-import-not-at-top
  model_dir, data_dir = cli_dirs
  corrupt = tmp_path / "run"
  shutil.copytree(model_dir, corrupt)
  latest = tf.train.latest_checkpoint(str(corrupt / "checkpoints"))
  for index in (corrupt / "checkpoints").glob("ckpt-*.index"):
    index.write_bytes(b"garbage")
  result = run_evaluate(f"--model_dir={corrupt}", f"--data={data_dir}", "--method=greedy")
  assert_one_line_error(result, f"{latest} cannot be read")


@pytest.mark.slow
def test_a_savedmodel_that_is_no_translator_fails_in_one_line(cli_dirs,
                                                              tutorial_tokenizer_path):
  _, data_dir = cli_dirs
  result = run_evaluate(f"--translator={tutorial_tokenizer_path}", f"--data={data_dir}")
  assert_one_line_error(result, "is a SavedModel but not an exported translator")


@pytest.mark.slow
def test_unreadable_data_fails_in_one_line(tmp_path, cli_dirs):
  model_dir, _ = cli_dirs
  data_dir = write_data_dir(tmp_path / "data", PAIRS)
  (data_dir / "en.dev").write_bytes(b"one\n\xff two\n")
  result = run_evaluate(f"--model_dir={model_dir}", f"--data={data_dir}")
  assert_one_line_error(result, "is not valid UTF-8")


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
