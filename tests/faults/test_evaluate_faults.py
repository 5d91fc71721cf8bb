"""evaluate.py's folders and results under faults (issue 59, cases 1, 6 and 7):
a folder that --export_dir names, or train.py's export/, is replaced only if
it is an export; the results are checked writable before translating, and
written once, whole, after the scoring, so that a stop or a full disk keeps
the previous result.
On the finished TensorFlow run of conftest.py, two sentences, greedy."""

import json
import re
import signal

import pytest

from helpers.fault_runs import (assert_fails_in_one_line, copy_run, error_lines, files_below,
                                run_driver, run_script, train_args)

pytestmark = pytest.mark.slow


def _evaluate(model_dir, data, *extra):
  return ["evaluate.py", f"--model_dir={model_dir}", f"--data={data}", "--method=greedy",
          "--max_sentences=2", *extra]


def _one_error(code, output, pattern):
  assert code == 1, output[-3000:]
  lines = error_lines(output, "evaluate.py")
  assert len(lines) == 1 and re.match(pattern, lines[0]), output[-3000:]


def test_an_export_dir_that_is_the_run_folder_is_refused_and_nothing_is_lost(
    tmp_path, finished_run, small_data):
  model_dir = copy_run(finished_run, tmp_path)
  before = files_below(model_dir)
  result = run_script(*_evaluate(model_dir, small_data, f"--export_dir={model_dir}"))
  _one_error(result.returncode, result.stderr,
             rf"evaluate\.py: error: {model_dir} holds files that are not an export "
             r"\(bleu, checkpoints, config\.json")
  assert files_below(model_dir) == before
  assert "translating" not in result.stderr  # refused before any work


def test_an_export_dir_holding_other_files_is_refused_and_kept(tmp_path, finished_run,
                                                               small_data):
  folder = tmp_path / "mine"
  (folder / "sub").mkdir(parents=True)
  (folder / "notes.txt").write_text("mine\n")
  (folder / "sub" / "more.txt").write_text("also mine\n")
  before = files_below(folder)
  result = run_script(*_evaluate(finished_run, small_data, f"--export_dir={folder}"))
  _one_error(result.returncode, result.stderr,
             rf"evaluate\.py: error: {folder} holds files that are not an export "
             r"\(notes\.txt, sub\)")
  assert files_below(folder) == before


def test_an_output_dir_that_cannot_be_made_is_one_line_before_translating(
    tmp_path, finished_run, small_data):
  blocker = tmp_path / "a_file"
  blocker.write_text("not a folder\n")
  result = run_script(*_evaluate(finished_run, small_data, f"--output_dir={blocker / 'bleu'}"))
  _one_error(result.returncode, result.stderr,
             rf"evaluate\.py: error: cannot write the results to {blocker / 'bleu'} "
             r"\((NotADirectoryError|FileExistsError)")
  assert "translating" not in result.stderr


@pytest.fixture(scope="module")
def scored_run(tmp_path_factory, finished_run, small_data):
  """A copy of the finished run scored once on two sentences: (folder, result JSON's bytes)."""
  model_dir = copy_run(finished_run, tmp_path_factory.mktemp("scored"))
  result = run_script(*_evaluate(model_dir, small_data))
  assert result.returncode == 0, result.stderr[-3000:]
  return model_dir, (model_dir / "bleu" / "validation.greedy.partial2.json").read_bytes()


def test_a_stop_before_the_results_are_written_keeps_the_previous_ones(scored_run, small_data):
  model_dir, scored = scored_run
  result_file = model_dir / "bleu" / "validation.greedy.partial2.json"
  assert {"checkpoints", "teacher_forced"} <= set(json.loads(scored))
  code, output = run_driver(_evaluate(model_dir, small_data), "sigterm_in_teacher_forced")
  assert code == 128 + signal.SIGTERM, output[-3000:]
  assert "Traceback" not in output, output[-3000:]
  assert "evaluate.py: stopped by SIGTERM" in output, output[-3000:]
  assert result_file.read_bytes() == scored
  assert not list(result_file.parent.glob(".*"))  # no staging left behind


def test_a_full_disk_at_the_results_is_one_line_naming_the_file(scored_run, small_data):
  model_dir, scored = scored_run
  bleu = model_dir / "bleu"
  code, output = run_driver(_evaluate(model_dir, small_data), "full_disk_in_teacher_forced")
  _one_error(code, output,
             rf"evaluate\.py: error: OSError: \[Errno 27\] File too large: "
             rf"'{bleu}/validation\.greedy\.partial2\.(txt|json)'")
  assert (bleu / "validation.greedy.partial2.json").read_bytes() == scored
  assert not list(bleu.glob(".*"))


def test_train_py_keeps_files_of_its_users_in_export(tmp_path, finished_run, small_data,
                                                     tutorial_tokenizer_path):
  model_dir = copy_run(finished_run, tmp_path)
  (model_dir / "export" / "notes.txt").write_text("mine\n")
  before = files_below(model_dir / "export")
  args = [a for a in train_args(model_dir, small_data, tutorial_tokenizer_path, 8)
          if a != "--noexport"]
  code, output = run_driver(args)
  assert_fails_in_one_line(
      code, output, rf"train.py: error: {model_dir / 'export'} holds files that are not an "
      r"export \(notes\.txt\).*: move them, then rerun the same command to export \(the "
      rf"trained model is in {model_dir / 'checkpoints' / 'ckpt-8'}\)")
  assert files_below(model_dir / "export") == before
