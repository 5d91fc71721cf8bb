"""Faults lose nothing: each fault injected at a deterministic point into a run
of train.py, evaluate.py or translate.py, and what must be left afterwards
(docs/reliability.md states each behaviour and names its test).

Runs of train.py go through a driver that patches one fault in (a kill inside
TensorFlow's first checkpoint write, a pause, a signal at the export, a
file-size limit: a full disk for root and non-root alike) on 96 training pairs,
one thread each. The rest runs in this process on a tiny model. Kills at an
epoch's end and files changed under a run: test_epoch_end_faults.py.
"""

import json
from pathlib import Path
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from helpers.checkpoints import small_checkpoints
from helpers.fault_runs import (REPO_DIR, assert_fails_in_one_line, checkpoint_steps, copy_run,
                                driver_env, error_lines, files_below, metrics_records,
                                run_driver, run_script, swap_vocabularies, train_args)

# The faults are those of real train.py runs and multi-epoch fits.
pytestmark = pytest.mark.slow


# ------------------------------------------------------------ a kill in the first write

def _paths(folder):
  """Every file and folder below ``folder``, relative to it."""
  return {p.relative_to(folder) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def interrupted_runs(tmp_path_factory, small_data, tutorial_tokenizer_path):
  """One command run three times on one folder: stopped by Ctrl-C during
  start-up, then killed inside its first checkpoint write, then to its end.
  Returns the folder and (exit status, output, _paths after it) of each run."""
  model_dir = tmp_path_factory.mktemp("interrupted") / "run"
  args = train_args(model_dir, small_data, tutorial_tokenizer_path, 6)
  runs = []
  for fault in ("sigint_after_lock", "kill_in_first_checkpoint_write", "none"):
    code, output = run_driver(args, fault)
    runs.append((code, output, _paths(model_dir)))
  return model_dir, runs


def test_a_kill_inside_the_first_checkpoint_write_is_removed_and_the_rerun_resumes(
    interrupted_runs):
  model_dir, (_, killed, resumed) = interrupted_runs
  code, output, paths = killed
  assert code == -signal.SIGKILL, output[-3000:]
  assert {p for p in paths if p.parent == Path("checkpoints")} == {
      Path("checkpoints/ckpt-5_temp")}

  code, output, _ = resumed
  assert code == 0, output[-3000:]
  assert "removing" in output and "ckpt-5_temp" in output
  # The killed run's lock was stale, and is taken over.
  assert re.search(r"taking over the stale lock \S+train.lock of PID \d+", output), output
  assert checkpoint_steps(model_dir) == [5, 6]
  assert not list((model_dir / "checkpoints").glob("*_temp"))


# ------------------------------------------------------------ a truncated newest checkpoint

def _save_at(model_dir, *steps):
  checkpoints, _, optimizer, _ = small_checkpoints(model_dir)
  for step in steps:
    optimizer.iterations.assign(step)
    checkpoints.save()


def _truncate(model_dir, step):
  data = model_dir / "checkpoints" / f"ckpt-{step}.data-00000-of-00001"
  data.write_bytes(data.read_bytes()[:data.stat().st_size // 2])


def test_a_truncated_newest_checkpoint_falls_back_to_the_one_before(tmp_path, caplog):
  _save_at(tmp_path, 5, 10)
  _truncate(tmp_path, 10)
  assert small_checkpoints(tmp_path)[0].restore() == 5
  assert re.search(r"skipping the checkpoint \S+ckpt-10: it cannot be read \(\w+", caplog.text)
  assert (tmp_path / "checkpoints" / "unreadable" / "ckpt-10.index").is_file()
  assert checkpoint_steps(tmp_path) == [5]  # the index lists what is intact

  # Nothing intact is left: refused, never started over.
  _truncate(tmp_path, 5)
  from transformer.run import checkpoint_files  # pylint: disable=g-import-not-at-top
  with pytest.raises(checkpoint_files.CheckpointError,
                     match=r"no intact checkpoint left in .*ckpt-5 \("):
    small_checkpoints(tmp_path)[0].restore()


def test_evaluation_skips_a_truncated_newest_checkpoint(tmp_path, finished_run):
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
  model_dir = copy_run(finished_run, tmp_path)
  newest = checkpoint_steps(model_dir)[-1]
  _truncate(model_dir, newest)
  paths = evaluation.restore_model_dir(model_dir)[3]
  assert paths == [str(model_dir / "checkpoints" / f"ckpt-{checkpoint_steps(model_dir)[-2]}")]


# ------------------------------------------------------------ two runs on one folder

def test_a_second_run_on_a_folder_in_use_is_refused(finished_and_refused):
  model_dir, first_pid, (code, output), first = finished_and_refused
  assert code == 1, output[-3000:]
  assert error_lines(output) == [
      f"train.py: error: {model_dir} is in use by another train.py (PID {first_pid}); wait "
      "for it to end or stop it, or use another --model_dir"]
  code, output = first
  assert code == 0, output[-3000:]
  # One run's epoch and export records, once.
  assert [r["step"] for r in metrics_records(model_dir)] == [6, 6]


# ------------------------------------------------------------ a refused run writes nothing

def test_a_refused_run_leaves_config_json_as_it_was(tmp_path, finished_run, small_data,
                                                    tutorial_tokenizer_path):
  model_dir = copy_run(finished_run, tmp_path)
  (model_dir / "checkpoints" / "checkpoint").unlink()  # the index lost
  before = (model_dir / "config.json").read_bytes()
  result = run_script(*train_args(model_dir, small_data, tutorial_tokenizer_path, 6,
                                  "--config.model.d_model=64"))
  assert result.returncode == 1
  assert [line for line in error_lines(result.stderr)
          if "field model.d_model was 32, now 64" in line], result.stderr[-3000:]
  assert (model_dir / "config.json").read_bytes() == before


# ------------------------------------------------- a signal or a full disk at the export

@pytest.fixture(scope="module")
def export_faults(tmp_path_factory, finished_run, small_data, tutorial_tokenizer_path):
  """A copy of the finished run (exported at step 6) trained on to step 8 by a
  run whose disk fills as its export starts, then rerun with a SIGTERM as its
  export starts. Returns the folder, the export's files before, (exit status,
  output) of the first run, the export's files and the checkpoint steps after
  it, and (exit status, output) of the rerun."""
  model_dir = copy_run(finished_run, tmp_path_factory.mktemp("export_faults"))
  before = files_below(model_dir / "export")
  args = [a for a in train_args(model_dir, small_data, tutorial_tokenizer_path, 8)
          if a != "--noexport"]
  full_disk = run_driver(args, "full_disk_in_export")
  after_full_disk = files_below(model_dir / "export"), checkpoint_steps(model_dir)
  return model_dir, before, full_disk, after_full_disk, run_driver(args, "sigterm_in_export")


def test_sigterm_during_the_export_finishes_it_and_says_so(export_faults):
  model_dir, _, _, _, (code, output) = export_faults
  assert code == 128 + signal.SIGTERM, output[-3000:]
  assert (f"train.py: stopped by SIGTERM during the export, which was finished first: "
          f"{model_dir / 'export'} holds step 8") in output
  export = model_dir / "export"
  assert json.loads((export / "export_info.json").read_text()) == {"step": 8}
  assert sorted(p.name for p in export.iterdir()) == [
      "export_info.json", "transformer.keras", "translator"]
  assert sorted(p.name for p in model_dir.glob("export*")) == ["export"]


# ------------------------------------------------------------ exact resume with dropout

@pytest.fixture(scope="module")
def fit_with_dropout(tiny_config, make_trainer, random_dataset):
  """``fit_with_dropout(model_dir, steps)``: (Trainer, TrainResult) of a tiny
  model with dropout on, restored from ``model_dir`` and trained up to
  ``steps`` (0: the end of the epoch) on 6 batches of 8 random pairs (ids
  1..49), the same for the same epoch."""
  def fit(model_dir, steps):
    config = tiny_config(dropout_rate=0.3, attention_dropout_rate=0.3)
    config.training.train_steps = steps  # tiny.py: epochs = 1
    config.training.checkpoint_every_steps = 100
    trainer = make_trainer(config, (50, 50), model_dir)
    trainer.restore()
    return trainer, trainer.fit(lambda epoch: random_dataset(
        8, seed=epoch, rows=48, source_length=12, target_length=11, vocab=50, lowest=1))
  return fit


@pytest.fixture(scope="module")
def straight_and_resumed(tmp_path_factory, fit_with_dropout):
  """One epoch of 6 steps in one go, and the same epoch stopped at step 4 and
  resumed: (Trainer, TrainResult) of the first, the Trainer stopped at step 4,
  and (Trainer, TrainResult) of the resumed one."""
  root = tmp_path_factory.mktemp("resume")
  straight, straight_result = fit_with_dropout(root / "straight", 0)
  stopped, _ = fit_with_dropout(root / "resumed", 4)
  resumed, resumed_result = fit_with_dropout(root / "resumed", 0)
  return straight, straight_result, stopped, resumed, resumed_result


def test_a_resumed_run_with_dropout_repeats_the_uninterrupted_one(straight_and_resumed):
  straight, _, _, resumed, result = straight_and_resumed
  assert result.start_step == 4 and resumed.step == straight.step == 6
  assert straight.config.model.dropout_rate > 0
  for expected, got in zip(straight.model.weights, resumed.model.weights):
    np.testing.assert_array_equal(got.numpy(), expected.numpy(), err_msg=expected.path)


def test_a_resumed_epochs_record_covers_the_whole_epoch(straight_and_resumed):
  _, straight_result, _, _, resumed_result = straight_and_resumed
  expected, got = straight_result.history[-1], resumed_result.history[-1]
  assert got["complete"] and got["steps_in_epoch"] == expected["steps_in_epoch"] == 6
  for name in ("train_loss", "train_accuracy"):
    assert got[name] == expected[name], name
  assert "partial" not in got


def test_a_checkpoint_without_dropout_state_and_epoch_sums_resumes_marked_partial(
    tmp_path, straight_and_resumed, fit_with_dropout):
  """A checkpoint written as the code wrote it before dropout state and epoch
  sums were saved still restores; the epoch's record then says partial. It
  holds the state of the Trainer straight_and_resumed stopped at step 4."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  trainer = straight_and_resumed[2]
  position = {name: tf.Variable(getattr(trainer, name), dtype=tf.int64)
              for name in ("epoch", "step_in_epoch", "steps_per_epoch")}
  legacy = tf.train.Checkpoint(model=trainer.model, optimizer=trainer.engine.optimizer,
                               **position)
  tf.train.CheckpointManager(legacy, str(tmp_path / "old" / "checkpoints"),
                             max_to_keep=5).save(checkpoint_number=4)
  trainer, result = fit_with_dropout(tmp_path / "old", 0)
  assert result.start_step == 4 and trainer.step == 6
  assert result.history[-1]["partial"] is True


# ------------------------------------------------------------ another tokenizer

@pytest.fixture(scope="module")
def shuffled_tokenizer(tmp_path_factory, tutorial_tokenizers):
  """The tutorial's vocabularies with the English one shuffled: same sizes."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  from transformer.data import wordpiece  # pylint: disable=g-import-not-at-top
  folder = tmp_path_factory.mktemp("shuffled")
  paths = {}
  for language in ("pt", "en"):
    tokenizer = getattr(tutorial_tokenizers, language)
    ids = tf.range(tokenizer.get_vocab_size(), dtype=tf.int64)[tf.newaxis]
    vocab = [t.decode() for t in tokenizer.lookup(ids)[0].numpy()]
    if language == "en":
      reserved = len(tokenizers.RESERVED_TOKENS)
      vocab[reserved:] = np.random.default_rng(0).permutation(vocab[reserved:]).tolist()
    paths[language] = wordpiece.write_vocab_file(vocab, folder / f"{language}.txt")
  tf.saved_model.save(tokenizers.Tokenizers(paths["pt"], paths["en"]), str(folder / "model"))
  return folder / "model"


def test_another_tokenizer_of_the_same_sizes_is_refused(tmp_path, finished_run, small_data,
                                                        shuffled_tokenizer):
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
  model_dir = copy_run(finished_run, tmp_path)
  (model_dir / "tokenizer_path.txt").write_text(f"{shuffled_tokenizer}\n")
  with pytest.raises(evaluation.EvaluationError, match="not those the run in .* was trained"):
    evaluation.restore_model_dir(model_dir)

  (model_dir / "tokenizer_path.txt").unlink()
  code, output = run_driver(train_args(model_dir, small_data, shuffled_tokenizer, 8))
  assert code == 1
  assert [line for line in error_lines(output)
          if line.startswith(f"train.py: error: --tokenizer={shuffled_tokenizer}: the "
                             "tokenizer's vocabularies")], output[-3000:]
  assert not (model_dir / "tokenizer_path.txt").exists()


def test_a_run_folder_without_a_recorded_vocabulary_hash_still_evaluates(tmp_path, finished_run):
  from transformer.run import run_folder  # pylint: disable=g-import-not-at-top
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
  model_dir = copy_run(finished_run, tmp_path)
  (model_dir / run_folder.VOCABULARY_HASH_FILE).unlink()
  assert evaluation.restore_model_dir(model_dir)[3][-1].endswith("ckpt-6")


# ------------------------------------------------------------ one line, not a traceback

def test_a_full_disk_at_a_checkpoint_names_it_and_the_last_good_one(
    tmp_path, small_data, tutorial_tokenizer_path):
  model_dir = tmp_path / "run"
  code, output = run_driver(train_args(model_dir, small_data, tutorial_tokenizer_path, 12),
                            "full_disk_after_step", 7)
  checkpoints = model_dir / "checkpoints"
  # ckpt-6 ends the first epoch; the next one is due 5 steps later, at 11.
  assert_fails_in_one_line(
      code, output,
      rf"train.py: error: cannot write the checkpoint {checkpoints / 'ckpt-11'}: .*File too "
      rf"large.*The last good checkpoint is {checkpoints / 'ckpt-6'}; free space and rerun")
  assert not list(checkpoints.glob("*_temp"))


def test_a_full_disk_at_the_export_keeps_the_old_one_and_the_rerun_exports(export_faults):
  model_dir, before, (code, output), (export_after, steps_after), _ = export_faults
  export = model_dir / "export"
  assert json.loads(before[Path("export_info.json")]) == {"step": 6}
  assert_fails_in_one_line(
      code, output,
      rf"train.py: error: cannot write the export to {export}: .*File too "
      rf"large.*; {export} is left as it was, and the trained model is in "
      rf"{model_dir / 'checkpoints' / 'ckpt-8'}\. Free space and rerun")
  assert export_after == before
  assert steps_after[-1] == 8
  # The rerun (stopped by a signal only after its export, as
  # test_sigterm_during_the_export_finishes_it_and_says_so checks) exported step 8.
  assert json.loads((export / "export_info.json").read_text()) == {"step": 8}
  assert sorted(p.name for p in model_dir.glob("export*")) == ["export"]


def test_running_out_of_memory_while_building_the_model_is_one_line(
    tmp_path, small_data, tutorial_tokenizer_path):
  model_dir = tmp_path / "run"
  # A 7,765 × 262,144 embedding: 8 GB, beyond the 2 GiB the fault leaves.
  code, output = run_driver(train_args(model_dir, small_data, tutorial_tokenizer_path, 6,
                                       "--config.model.d_model=262144",
                                       "--config.model.num_heads=1"),
                            "memory_limit_at_model")
  assert_fails_in_one_line(
      code, output,
      r"train.py: error: out of memory while building the model \((ResourceExhaustedError: "
      r".*OOM when allocating|MemoryError: Unable to allocate).*\); try a smaller configuration")
  # Nothing recorded for a model that never existed, and the lock went with
  # the process: the folder takes another run.
  assert sorted(p.name for p in model_dir.iterdir()) == []


def test_ctrl_c_during_start_up_is_one_line_and_the_rerun_starts(interrupted_runs):
  model_dir, (interrupted, rerun, _) = interrupted_runs
  code, output, paths = interrupted
  assert code == 128 + signal.SIGINT, output[-3000:]
  assert error_lines(output) == [
      "train.py: error: interrupted by Ctrl-C; rerun the same command to resume from the "
      "last checkpoint"], output[-3000:]
  assert Path("config.json") not in paths
  assert Path("train.lock") not in paths  # the interrupted process removed its lock
  # The rerun trains up to its first checkpoint (where interrupted_runs kills
  # it), the next one to the end.
  code, output, paths = rerun
  assert code == -signal.SIGKILL and Path("checkpoints/ckpt-5_temp") in paths, output[-3000:]
  assert checkpoint_steps(model_dir)[-1] == 6


@pytest.mark.parametrize("config_file,override,message", [
    (None, "--config.training.train_step=40", "--config.training.train_step: no such "
     "configuration field; did you mean training.train_steps"),
    ("def get_config():\n  raise RuntimeError('no config here')\n", None,
     r"--config: cannot load the configuration \(RuntimeError: no config here\)"),
    ("def get_config(:\n", None, r"--config: cannot load the configuration \(SyntaxError"),
    ("def get_config():\n  return [1]\n", None,
     r"--config: get_config\(\) returned a list, not an ml_collections.ConfigDict"),
    (None, "--config=configs/tiny.py:bogus", r"--config=configs/tiny.py:bogus: TypeError: "
     r"get_config\(\) takes 0 positional arguments but 1 was given$"),
    (None, "--config.model.num_layers=abc",
     r"--config.model.num_layers=abc: invalid literal for int\(\) with base 10: 'abc'$"),
])
def test_bad_configurations_are_one_line(tmp_path, config_file, override, message):
  args = [override] if override else []
  if config_file is not None:
    (tmp_path / "config.py").write_text(config_file)
    args.insert(0, f"--config={tmp_path / 'config.py'}")
  result = run_script("train.py", f"--model_dir={tmp_path / 'run'}", *args)
  assert result.returncode == 1
  lines = error_lines(result.stderr)
  assert len(lines) == 1 and re.match(f"train.py: error: {message}", lines[0]), result.stderr
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("content", ["", "{\"model\": ", "[1, 2]"])
def test_a_corrupt_config_json_is_one_line(tmp_path, finished_run, small_data,
                                           tutorial_tokenizer_path, content):
  model_dir = copy_run(finished_run, tmp_path)
  (model_dir / "config.json").write_text(content)
  result = run_script(*train_args(model_dir, small_data, tutorial_tokenizer_path, 8))
  assert result.returncode == 1
  lines = error_lines(result.stderr)
  assert len(lines) == 1 and lines[0].startswith(
      f"train.py: error: {model_dir / 'config.json'} "), result.stderr
  assert (model_dir / "config.json").read_text() == content


def test_an_empty_validation_split_is_refused_before_training(tmp_path, small_data,
                                                              tutorial_tokenizer_path):
  data_dir = tmp_path / "data"
  shutil.copytree(small_data, data_dir)
  for language in ("pt", "en"):
    (data_dir / f"{language}.dev").write_text("")
  result = run_script(*train_args(tmp_path / "run", data_dir, tutorial_tokenizer_path, 6))
  assert error_lines(result.stderr) == [
      f"train.py: error: --data={data_dir}: the validation split is empty"], result.stderr
  assert not (tmp_path / "run" / "checkpoints").exists()


def test_evaluate_output_and_export_dirs_that_are_files_are_one_line(tmp_path, finished_run):
  a_file = tmp_path / "file"
  a_file.write_text("")
  for flag in ("output_dir", "export_dir"):
    result = run_script("evaluate.py", f"--model_dir={finished_run}", f"--{flag}={a_file}")
    assert result.returncode == 1
    assert error_lines(result.stderr, "evaluate.py") == [
        f"evaluate.py: error: --{flag}={a_file} exists and is not a folder"], result.stderr


def test_translate_into_a_closed_pipe_ends_quietly(finished_run):
  translator = finished_run / "export" / "translator"
  command = (f"yes 'olá .' | head -200 | {sys.executable} translate.py "
             f"--export_dir={translator} --method=greedy --batch_size=1 | head -1")
  # translate.py's own log level, not driver_env()'s 2: on AVX-512 CPUs the first op
  # logs a oneDNN ERROR line.
  env = {k: v for k, v in driver_env().items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  result = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=REPO_DIR, env=env,
                          capture_output=True, text=True, timeout=240, check=False)
  assert result.stdout.count("\n") == 1
  assert result.stderr == "", result.stderr


# ------------------------------------------------------------ evaluate.py, translate.py, signals

def test_translate_refuses_an_export_with_swapped_vocabulary_files(tmp_path, finished_run):
  translator = shutil.copytree(finished_run / "export" / "translator", tmp_path / "translator")
  swap_vocabularies(translator / "assets")
  result = run_script("translate.py", f"--export_dir={translator}", "olá .")
  assert result.returncode == 1 and result.stdout == ""
  assert error_lines(result.stderr, "translate.py") == [
      f"translate.py: error: --export_dir={translator}: {translator / 'assets' / 'pt_vocab.txt'} "
      "is not the .pt vocabulary this tokenizer was saved with (7010 tokens, not 7765; they "
      "differ from id 12 on): it was changed, cut or swapped since; restore it, or rebuild "
      "the tokenizer"], result.stderr


def test_evaluate_with_a_corrupt_tokenizer_is_one_line(tmp_path, finished_run,
                                                       tutorial_tokenizer_path):
  model_dir = copy_run(finished_run, tmp_path)
  tokenizer = shutil.copytree(tutorial_tokenizer_path, tmp_path / "tokenizer")
  (tokenizer / "saved_model.pb").write_bytes(b"not a SavedModel")
  (model_dir / "tokenizer_path.txt").write_text(f"{tokenizer}\n")
  result = run_script("evaluate.py", f"--model_dir={model_dir}")
  assert result.returncode == 1
  lines = error_lines(result.stderr, "evaluate.py")
  assert len(lines) == 1 and lines[0].startswith(
      f"evaluate.py: error: cannot load the SavedModel {tokenizer} ("), result.stderr


def test_evaluate_exports_whole_and_names_the_checkpoint_it_fell_back_to(
    tmp_path, finished_run, small_data):
  model_dir = copy_run(finished_run, tmp_path)
  export_dir = tmp_path / "averaged"
  shutil.copytree(model_dir / "export" / "translator", export_dir)
  before = files_below(export_dir)
  evaluate = ["evaluate.py", f"--model_dir={model_dir}", f"--export_dir={export_dir}",
              "--method=greedy", "--max_sentences=2", f"--data={small_data}"]
  # A kill once the new SavedModel is written: the previous export is whole.
  code, output = run_driver(evaluate, "kill_after_translator_save")
  assert code == -signal.SIGKILL, output[-3000:]
  assert files_below(export_dir) == before

  _truncate(model_dir, 6)
  result = run_script(*evaluate)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"restored the checkpoint ckpt-5 of {model_dir}" in result.stderr, result.stderr
  assert ("evaluate.py: warning: skipped the newer ckpt-6: cannot be read in full"
          in result.stderr), result.stderr
  assert json.loads((export_dir / "export_info.json").read_text()) == {
      "step": 5, "checkpoints": ["ckpt-5"]}
  assert sorted(p.name for p in tmp_path.glob("averaged*")) == ["averaged"]


def test_rerunning_a_finished_command_changes_nothing(tmp_path, finished_run, small_data,
                                                      tutorial_tokenizer_path):
  model_dir = copy_run(finished_run, tmp_path)
  before = files_below(model_dir / "export"), (model_dir / "metrics.jsonl").read_text()
  info_time = (model_dir / "export" / "export_info.json").stat().st_mtime_ns
  args = train_args(model_dir, small_data, tutorial_tokenizer_path, 6)
  code, output = run_driver([a for a in args if a != "--noexport"])
  assert code == 0, output[-3000:]
  assert f"{model_dir / 'export'} already holds step 6: not exported again" in output
  assert (files_below(model_dir / "export"), (model_dir / "metrics.jsonl").read_text()) == before
  assert (model_dir / "export" / "export_info.json").stat().st_mtime_ns == info_time


def _signal_when(command, ready, signum, stdin=None):
  """Runs ``command``, sends ``signum`` once ``ready(process)`` returns, and
  returns (exit status, stdout, stderr). SIGINT acts as in a terminal, also
  when the suite runs with it ignored."""
  # The scripts' own log level, not driver_env()'s 2: on AVX-512 CPUs the first op logs
  # a oneDNN ERROR line.
  env = {k: v for k, v in driver_env().items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  proc = subprocess.Popen([sys.executable, *command], cwd=REPO_DIR, env=env, text=True,
                          stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  try:
    ready(proc)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
  finally:
    proc.kill()
  return proc.returncode, stdout, stderr


def test_sigterm_during_evaluate_is_one_line(tmp_path, finished_run):
  """SIGINT takes the same path (stop_signals.interrupt_on_signals), tested
  with translate.py below. The results would go to tmp_path (evaluate.py checks
  that it can write them before translating)."""
  def translating(proc):
    for line in proc.stderr:
      if line.startswith("translating"):
        return
  code, stdout, stderr = _signal_when(
      ["evaluate.py", f"--model_dir={finished_run}", f"--output_dir={tmp_path}"],
      translating, signal.SIGTERM)
  assert code == 128 + signal.SIGTERM and stdout == "", stderr
  assert stderr == ("evaluate.py: stopped by SIGTERM before it finished (it leaves no file half "
                    "written); rerun the same command to score\n")


def test_sigterm_during_train_py_start_up_is_one_line(tmp_path, small_data,
                                                      tutorial_tokenizer_path):
  code, output = run_driver(train_args(tmp_path / "run", small_data, tutorial_tokenizer_path, 6),
                            "sigterm_after_lock")
  assert code == 128 + signal.SIGTERM, output[-3000:]
  assert error_lines(output) == [
      "train.py: error: interrupted by SIGTERM; rerun the same command to resume from the "
      "last checkpoint"], output[-3000:]


def test_ctrl_c_while_translate_reads_stdin_is_one_line(finished_run):
  def one_translated(proc):
    proc.stdin.write("olá .\n")
    proc.stdin.flush()
    proc.stdout.readline()
  code, _, stderr = _signal_when(
      ["translate.py", f"--export_dir={finished_run / 'export' / 'translator'}",
       "--method=greedy", "--batch_size=1"], one_translated, signal.SIGINT, stdin=True)
  assert code == 128 + signal.SIGINT, stderr
  assert stderr == "translate.py: stopped by SIGINT\n"
