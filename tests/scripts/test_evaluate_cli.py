"""evaluate.py as a user runs it: bad input gives one line and exit status 1,
before TensorFlow is imported where the flags alone are wrong. The evaluation
itself: tests/integration/test_evaluation_runs.py."""

import json
import os
from pathlib import Path
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from helpers.backends import needs_jax
from helpers.prepared import random_prepared_folder, ted_named_folder
from helpers.run_folders import PAIRS, write_data_dir, write_model_dir


REPO_DIR = Path(__file__).resolve().parents[2]


def run_evaluate(*args, verbose=False, script="evaluate.py", **env_vars):
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  env.update(PYTHONPATH=str(REPO_DIR), **env_vars)
  return subprocess.run([sys.executable, script, *args, *(["--verbose"] * verbose)],
                        cwd=REPO_DIR, env=env, capture_output=True, text=True, timeout=300)


def assert_one_line_error(result, message, script="evaluate.py"):
  assert result.returncode == 1, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"{script}: error: "), result.stderr[-3000:]
  assert message in lines[0]


@pytest.mark.parametrize("script", ["evaluate.py", "translate.py"])
@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_model_dir_that_is_no_folder_is_worded_alike_by_both_scripts(tmp_path, script, kind):
  model_dir = tmp_path / "run"
  if kind == "file":
    model_dir.write_text("")
  ted = ted_named_folder(tmp_path / "ted")  # evaluate.py finds its data first
  result = run_evaluate(f"--model_dir={model_dir}", *(["olá ."] if script == "translate.py"
                                                      else [f"--data={ted}"]), script=script)
  what = "no such folder" if kind == "missing" else "not a folder"
  assert_one_line_error(result, f"{script}: error: --model_dir={model_dir}: {what}; pass the "
                        "folder given to train.py --model_dir", script)


@needs_jax
def test_a_folder_prepared_without_the_test_split_names_the_fix(tmp_path):
  """Folders prepared before prepare.py wrote the test split (train and
  validation only, as random_prepared_folder writes) still load; asked for
  the test split, evaluate.py under JAX says in one line how to get it."""
  prepared = random_prepared_folder(tmp_path / "prepared")
  (tmp_path / "run").mkdir()
  result = run_evaluate(f"--model_dir={tmp_path / 'run'}", f"--data={prepared}", "--split=test",
                        f"--output_dir={tmp_path / 'bleu'}", KERAS_BACKEND="jax")
  assert_one_line_error(result, f"evaluate.py: error: {prepared} holds no test split (prepared "
                        "by an older prepare.py, which wrote train and validation only); run "
                        "prepare.py again with the same flags to write it")


def test_the_compilation_cache_flag_is_refused_on_the_tensorflow_path(tmp_path):
  # As train.py's: the TED files are scored on TensorFlow, which has no such cache.
  result = run_evaluate(f"--model_dir={tmp_path}", f"--data={ted_named_folder(tmp_path / 'ted')}",
                        f"--compilation_cache={tmp_path / 'cache'}")
  assert_one_line_error(result, "evaluate.py: error: --compilation_cache is JAX's: it applies "
                        "under KERAS_BACKEND=jax with a prepare.py folder as --data")
  assert not (tmp_path / "cache").exists()


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
      # A folder without the files.
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


@pytest.mark.slow
def test_without_data_the_runs_recorded_data_is_read(tmp_path, cli_dirs):
  """No --data: the folder trained_with.json names (here one made unreadable, so
  that its reading shows) is the one read, and a line says so."""
  model_dir, _ = cli_dirs
  run = tmp_path / "run"
  shutil.copytree(model_dir, run)
  data_dir = write_data_dir(tmp_path / "data", PAIRS)
  (data_dir / "en.dev").write_bytes(b"one\n\xff two\n")
  (run / "trained_with.json").write_text(json.dumps({"trainer": "tensorflow",
                                                     "data": str(data_dir)}))
  result = run_evaluate(f"--model_dir={run}")
  said, error = result.stderr.strip().splitlines()
  assert said == f"evaluate.py: the data {data_dir} the run trained on (trained_with.json)"
  assert result.returncode == 1 and error.startswith("evaluate.py: error: ") and (
      "is not valid UTF-8" in error), result.stderr[-3000:]
