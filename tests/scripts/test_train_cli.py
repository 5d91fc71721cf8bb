"""train.py as a user runs it: --help, fail-fast flag checks, signals and resume."""

import json
import os
from pathlib import Path
import re
import signal
import subprocess
import sys
import time

import pytest

from helpers.prepared import ted_named_folder

# Each test runs train.py in a fresh Python, most of them training.
pytestmark = pytest.mark.slow

REPO_DIR = Path(__file__).resolve().parents[2]
FLAGS = ("config", "data", "tokenizer", "tokenizer_cache_dir", "model_dir", "strategy",
         "tpu", "mixed_precision", "jit_compile", "train_examples", "validation_examples",
         "eval_bleu_every_epochs", "bleu_examples", "bleu_method", "export",
         "log_every_steps")


# Only there so that a hang fails: on a loaded machine a run that exports and
# scores BLEU can take minutes of wall time.
HANG_TIMEOUT = 600


def _env():
  return {**os.environ, "PYTHONPATH": str(REPO_DIR), "TF_CPP_MIN_LOG_LEVEL": "2"}


def _train(*args):
  return subprocess.run([sys.executable, "train.py", *args], cwd=REPO_DIR, env=_env(),
                        capture_output=True, text=True, timeout=60)


def test_help_mentions_every_flag():
  result = _train("--help")  # absl exits with status 1 after printing help
  for flag in FLAGS:
    assert re.search(rf"--(\[no\])?{flag}\b", result.stdout), flag
  assert "--config.model.d_model" in result.stdout


@pytest.mark.parametrize("args,message", [
    (["--strategy=nccl"], "train.py: error: --strategy=nccl: value should be one of"),
    (["--tpu=grpc://10.0.0.2:8470"], "TPU address .* with strategy 'default'"),
    (["--strategy=tpu", "--mixed_precision=mixed_float16"], "mixed_float16 is for GPUs"),
    # Folders that exist without the files (a path that does not exist:
    # tests/scripts/test_data_download.py).
    (["--tokenizer={tmp}"], r"--tokenizer=\S+: no tokenizer SavedModel"),
    (["--config.model.num_heads=3", "--config.model.head_width=split"],
     "d_model=128 is not divisible by num_heads=3"),
    (["--config.model.output_weights=shared"], "'shared' .* needs data.vocabulary='joint'"),
    (["--data={tmp}"], "not a folder with the TED HRLR files"),
    (["--no_such_flag=1"], "Unknown command line flag 'no_such_flag'"),
    (["--config.model.no_such_field=1"], "no_such_field"),
])
def test_bad_flags_fail_fast(tmp_path, args, message):
  # A folder with the TED files' names: found as ../shared would be, also in a clone without it.
  ted = ted_named_folder(tmp_path / "ted")
  start = time.time()
  result = _train(f"--model_dir={tmp_path / 'run'}", f"--data={ted}",
                  *(arg.format(tmp=tmp_path) for arg in args))
  assert result.returncode != 0
  assert re.search(message, result.stderr), result.stderr[-2000:]
  assert not (tmp_path / "run").exists()  # nothing was started
  assert time.time() - start < 30


def test_model_dir_is_required():
  result = _train()
  assert result.returncode != 0
  assert "--model_dir must have a value" in result.stderr


# ------------------------------------------------------------ real runs

STEPS, INTERVAL = 25, 5


def _run_args(model_dir, tokenizer, data_dir, steps=STEPS):
  return [sys.executable, "train.py", "--config=configs/tiny.py",
          "--config.model.output_weights=untied",
          f"--config.training.train_steps={steps}",
          f"--config.training.checkpoint_every_steps={INTERVAL}",
          "--config.training.keep_checkpoints=20",
          f"--tokenizer={tokenizer}", f"--data={data_dir}", f"--model_dir={model_dir}",
          "--train_examples=320", "--validation_examples=32", "--bleu_examples=0",
          "--noexport", "--log_every_steps=1"]


def _start(args, log_path):
  log = open(log_path, "w")
  return subprocess.Popen(args, cwd=REPO_DIR, env=_env(), stdout=log,
                          stderr=subprocess.STDOUT, text=True)


def _wait_or_fail(proc, timeout, what):
  """Waits for `proc`; kills it and fails the test if it has not exited in time."""
  try:
    proc.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    proc.kill()
    pytest.fail(f"{what} within {timeout} s")


def _wait_for_checkpoint(model_dir, proc, timeout=180):
  """Polls until the CheckpointManager has recorded a checkpoint; returns its step."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  deadline = time.time() + timeout
  while time.time() < deadline:
    latest = tf.train.latest_checkpoint(str(model_dir / "checkpoints"))
    if latest:
      return int(latest.rsplit("-", 1)[1])
    if proc.poll() is not None:
      pytest.fail(f"train.py exited with {proc.returncode} before a checkpoint")
    time.sleep(0.1)
  proc.kill()
  pytest.fail(f"no checkpoint after {timeout} s")


def _latest_step(model_dir):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  latest = tf.train.latest_checkpoint(str(model_dir / "checkpoints"))
  return int(latest.rsplit("-", 1)[1]) if latest else None


def test_kill_and_resume_continues_from_checkpoint(tmp_path, tutorial_tokenizer_path,
                                                   ted_data_dir):
  model_dir = tmp_path / "run"
  args = _run_args(model_dir, tutorial_tokenizer_path, ted_data_dir)
  proc = _start(args, tmp_path / "log1.txt")
  _wait_for_checkpoint(model_dir, proc)
  proc.send_signal(signal.SIGKILL)
  proc.wait(timeout=30)
  killed_at = _latest_step(model_dir)
  assert 0 < killed_at < STEPS, (tmp_path / "log1.txt").read_text()[-3000:]

  # The rerun also exports and scores BLEU at the end (greedy, 8 sentences).
  final_args = [a for a in args if a not in ("--noexport", "--bleu_examples=0")]
  proc = _start(final_args + ["--bleu_examples=8", "--bleu_method=greedy"],
                tmp_path / "log2.txt")
  _wait_or_fail(proc, HANG_TIMEOUT, "the resumed run did not finish")
  log = (tmp_path / "log2.txt").read_text()
  assert proc.returncode == 0, log[-3000:]
  restored = re.search(r"restored checkpoint \S+ckpt-(\d+) at step (\d+)", log)
  assert restored, log[-3000:]
  assert int(restored.group(1)) == int(restored.group(2)) == killed_at
  ran = re.search(r"training done at step (\d+): (\d+) steps? in this run", log)
  assert ran, log[-3000:]
  assert int(ran.group(1)) == STEPS
  # Repeated work is bounded by one checkpoint interval: the first run got at
  # most INTERVAL steps past the checkpoint it was killed after, and the
  # second run did exactly the steps that were missing.
  assert int(ran.group(2)) == STEPS - killed_at
  assert _latest_step(model_dir) == STEPS
  records = [json.loads(line) for line in
             (model_dir / "metrics.jsonl").read_text().splitlines()]
  assert records[-1]["step"] == STEPS
  assert all(r["val_loss"] > 0 for r in records if "val_loss" in r)
  config = json.loads((model_dir / "config.json").read_text())
  assert config["training"]["train_steps"] == STEPS
  assert (model_dir / "tokenizer_path.txt").read_text().strip() == str(
      Path(tutorial_tokenizer_path).resolve())
  assert list((model_dir / "logs" / "train").glob("events.out.tfevents.*"))
  assert list((model_dir / "logs" / "validation").glob("events.out.tfevents.*"))
  assert records[-1]["final"] and records[-1]["bleu"] >= 0
  assert (model_dir / "export" / "translator" / "saved_model.pb").is_file()
  assert (model_dir / "export" / "transformer.keras").is_file()
  assert (model_dir / "bleu" / "validation.greedy.txt").read_text().count("\n") == 8
  bleu_record = json.loads((model_dir / "bleu" / "validation.greedy.json").read_text())
  assert bleu_record["references"] == "tokenizer round trip"

  # Rerunning with another model shape fails at start, naming the field.
  other = [a if not a.startswith("--config.model.output_weights") else
           "--config.model.d_model=64" for a in args]
  result = subprocess.run(other, cwd=REPO_DIR, env=_env(), capture_output=True, text=True,
                          timeout=60)
  assert result.returncode != 0
  assert (f"checkpoint in {model_dir} was trained with a different config: field "
          "model.d_model was 32, now 64") in result.stderr


# train.py run in-process by a driver that records every step's loss and can
# pause after a chosen step (a step no checkpoint falls on), writing
# <model_dir>.paused, until a SIGTERM has come (StopSignals' handler, once it
# has run, puts the previous one back).
_DRIVER = """
import os, runpy, signal, sys, time
from transformer.training.tf_engine import TensorFlowTrainer

fit = TensorFlowTrainer.fit
pause_at = int(os.environ["PAUSE_AT_STEP"])

def recording_fit(self, *args, **kwargs):
  def after_step(step, loss):
    with open(os.environ["LOSSES_FILE"], "a") as f:
      f.write(f"{step} {loss!r}\\n")
    if step == pause_at:
      handler = signal.getsignal(signal.SIGTERM)
      open(os.environ["PAUSED_FILE"], "w").close()
      while signal.getsignal(signal.SIGTERM) == handler:
        time.sleep(0.1)
  return fit(self, *args, step_callback=after_step, **kwargs)

TensorFlowTrainer.fit = recording_fit
sys.argv = sys.argv[1:]
runpy.run_path("train.py", run_name="__main__")
"""


def _recorded_run(model_dir, tokenizer, data_dir, steps, log_path, pause_at=0):
  """Starts train.py (tiny model, dropout on, checkpoints every 10 steps, epochs
  of 20 batches) through the driver; losses go to <model_dir>.losses."""
  args = [a for a in _run_args(model_dir, tokenizer, data_dir, steps)
          if not a.startswith("--config.training.checkpoint_every_steps")]
  args += ["--config.training.checkpoint_every_steps=10",
           "--config.model.attention_dropout_rate=0.1"]
  env = {**_env(), "PAUSE_AT_STEP": str(pause_at), "LOSSES_FILE": f"{model_dir}.losses",
         "PAUSED_FILE": f"{model_dir}.paused"}
  log = open(log_path, "w")
  return subprocess.Popen([sys.executable, "-c", _DRIVER, *args[1:]], cwd=REPO_DIR, env=env,
                          stdout=log, stderr=subprocess.STDOUT, text=True)


def _sigterm_once_paused(proc, model_dir, timeout=180):
  """Sends SIGTERM, as a scheduler would, once the driver has paused."""
  deadline = time.time() + timeout
  while not Path(f"{model_dir}.paused").exists():
    if proc.poll() is not None or time.time() > deadline:
      proc.kill()
      pytest.fail(f"train.py did not pause within {timeout} s (exit status {proc.poll()})")
    time.sleep(0.1)
  proc.send_signal(signal.SIGTERM)


def _losses(model_dir):
  """[(step, loss)] in the order the steps ran, over every process of the run."""
  lines = Path(f"{model_dir}.losses").read_text().splitlines()
  return [(int(step), float(loss)) for step, loss in (line.split() for line in lines)]


def _checkpoint_values(model_dir, step):
  """Every variable of the checkpoint at `step` (model, optimizer moments, data
  position, dropout's random state) but the save counter and the epoch's
  seconds (wall-clock time)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(str(model_dir / "checkpoints" / f"ckpt-{step}"))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if not name.startswith(("save_counter", "epoch_sums/seconds"))}


@pytest.fixture(scope="module")
def straight_and_resumed(tmp_path_factory, tutorial_tokenizer_path, ted_data_dir):
  """30 steps in one process, and the same 30 steps in three: stopped by
  train_steps at step 12, by a SIGTERM from this process while paused after
  step 23 (no checkpoint step: those are every 10 steps and each epoch's end at
  20), then resumed to 30. Returns the two run folders and the logs of the
  three parts; the exit statuses are the tests' to check."""
  root = tmp_path_factory.mktemp("resume")
  straight_dir, resumed_dir = root / "straight", root / "resumed"
  straight = _recorded_run(straight_dir, tutorial_tokenizer_path, ted_data_dir, 30,
                           root / "straight.txt")
  logs, codes = [], []
  for part, (steps, pause_at) in enumerate([(12, 0), (30, 23), (30, 0)]):
    logs.append(root / f"part{part}.txt")
    proc = _recorded_run(resumed_dir, tutorial_tokenizer_path, ted_data_dir, steps, logs[-1],
                         pause_at)
    if pause_at:
      _sigterm_once_paused(proc, resumed_dir)
    _wait_or_fail(proc, HANG_TIMEOUT, f"part {part} of the resumed run did not finish")
    codes.append(proc.returncode)
  _wait_or_fail(straight, HANG_TIMEOUT, "the uninterrupted run did not finish")
  assert straight.returncode == 0, (root / "straight.txt").read_text()[-3000:]
  return straight_dir, resumed_dir, [(code, log.read_text()) for code, log in zip(codes, logs)]


def test_sigterm_writes_checkpoint_and_exits_cleanly(straight_and_resumed):
  _, _, parts = straight_and_resumed
  code, log = parts[1]
  assert code == 128 + signal.SIGTERM, log[-3000:]
  match = re.search(r"train.py: stopped by SIGTERM at step (\d+); checkpoint saved", log)
  assert match, log[-3000:]
  stopped_at = int(match.group(1))
  assert stopped_at == 23
  assert "Traceback" not in log
  # The checkpoint at the stopping step was the newest: the rerun restores it.
  assert re.search(rf"restored checkpoint \S+ckpt-{stopped_at} at step {stopped_at}",
                   parts[2][1]), parts[2][1][-3000:]


def test_resumed_runs_repeat_the_uninterrupted_run_exactly(straight_and_resumed):
  """With dropout on, the per-step losses and the final weights and optimizer
  state of the run in three parts are bitwise equal to the uninterrupted
  one's, which they are not if a resume restarts its epoch at batch 0,
  reshuffles it, or loses the Adam moments or dropout's random state."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  straight_dir, resumed_dir, parts = straight_and_resumed
  for (code, log), expected in zip(parts, (0, 128 + signal.SIGTERM, 0)):
    assert code == expected, log[-3000:]
  assert "stopped by SIGTERM at step 23" in parts[1][1]
  for (_, log), step in ((parts[1], 12), (parts[2], 23)):
    assert re.search(rf"restored checkpoint \S+ckpt-{step} at step {step}", log)
  steps = [step for step, _ in _losses(resumed_dir)]
  assert steps == list(range(1, 31))  # each step ran once, none twice
  assert _losses(resumed_dir) == _losses(straight_dir)
  expected, resumed = _checkpoint_values(straight_dir, 30), _checkpoint_values(resumed_dir, 30)
  assert sorted(resumed) == sorted(expected)
  assert any(name.startswith("optimizer/") for name in expected)
  for name, value in expected.items():
    np.testing.assert_array_equal(resumed[name], value, err_msg=name)


# train.py run in-process with TensorFlowTrainer.fit wrapped to record the padded lengths
# (source, decoder input, labels) of every batch it is handed, then to train.
_BATCH_SHAPES_DRIVER = """
import json, os, runpy, sys
from transformer.training.tf_engine import TensorFlowTrainer

fit = TensorFlowTrainer.fit

def recording_fit(self, make_train_dataset, validation_dataset, **kwargs):
  def lengths(dataset):
    return [[int(t.shape[1]) for t in (source, target_in, labels)]
            for (source, target_in), labels in dataset]
  shapes = {"train": lengths(make_train_dataset(1)), "validation": lengths(validation_dataset)}
  with open(os.environ["SHAPES_FILE"], "w") as f:
    json.dump(shapes, f)
  return fit(self, make_train_dataset, validation_dataset, **kwargs)

TensorFlowTrainer.fit = recording_fit
sys.argv = sys.argv[1:]
runpy.run_path("train.py", run_name="__main__")
"""


@pytest.fixture(scope="module")
def short_runs(tmp_path_factory, tutorial_tokenizer_path):
  """train.py for 2 steps on 24 pairs of 1 to 12 words (the first 3 also the
  validation split), with and without --jit_compile: {jit_compile: (model_dir,
  padded lengths of each batch)}. The run without it also scores BLEU (greedy)
  with --bleu_examples at its default."""
  root = tmp_path_factory.mktemp("short")
  data_dir = root / "data"
  data_dir.mkdir()
  words = "um dois três quatro cinco seis sete oito nove dez onze doze".split()
  train = [(" ".join(words[:n]), " ".join(["one"] * n)) for n in range(1, 13)] * 2
  pairs = {"train": train, "dev": train[:3]}
  for split, split_pairs in pairs.items():
    (data_dir / f"pt.{split}").write_text("".join(p + "\n" for p, _ in split_pairs))
    (data_dir / f"en.{split}").write_text("".join(e + "\n" for _, e in split_pairs))
  runs = {}
  for jit_compile, bleu_flags in ((True, ["--bleu_examples=0"]),
                                  (False, ["--bleu_method=greedy"])):
    model_dir = root / f"jit_compile_{jit_compile}"
    shapes_file = root / f"shapes_{jit_compile}.json"
    args = ["--config=configs/tiny.py", "--config.training.train_steps=2",
            "--config.data.tokens_per_batch=64", f"--jit_compile={jit_compile}", *bleu_flags,
            "--noexport", f"--data={data_dir}", f"--tokenizer={tutorial_tokenizer_path}",
            f"--model_dir={model_dir}"]
    result = subprocess.run([sys.executable, "-c", _BATCH_SHAPES_DRIVER, "train.py", *args],
                            cwd=REPO_DIR, env={**_env(), "SHAPES_FILE": str(shapes_file)},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    runs[jit_compile] = model_dir, json.loads(shapes_file.read_text())
  return runs


def test_bleu_covers_every_validation_pair_by_default(short_runs):
  """--bleu_examples=-1 (the default) scores all validation pairs, the last one included."""
  model_dir, _ = short_runs[False]
  record = json.loads((model_dir / "bleu" / "validation.greedy.json").read_text())
  assert record["num_sentences"] == 3


@pytest.mark.parametrize("jit_compile", [True, False])
def test_jit_compile_trains_on_bucket_padded_batches(short_runs, jit_compile):
  """--jit_compile: train.py pads every batch to its bucket's length (pipeline
  static_shapes), so XLA compiles a step per bucket; without it, to the longest
  sentence of each side."""
  from transformer.data import pipeline
  model_dir, shapes = short_runs[jit_compile]
  records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
  record = [r for r in records if "val_loss" in r][-1]  # the epoch's, before BLEU's
  assert record["step"] == 2 and record["val_loss"] > 0

  batches = shapes["train"] + shapes["validation"]
  assert len(shapes["train"]) > 1 and shapes["validation"]
  max_tokens = 64  # configs/tiny.py
  bucket_lengths = set(pipeline.bucket_max_lengths(pipeline.bucket_boundaries(
      max_tokens, **pipeline.GROWING_BUCKETS) + [max_tokens + 1], max_tokens))
  if jit_compile:
    for source, target_in, labels in batches:
      assert source == target_in == labels and source in bucket_lengths, batches
  else:
    # Sources carry [START] and [END], labels only [END]: never the same length here.
    assert all(source > labels for source, _, labels in batches), batches
    assert all(target_in == labels for _, target_in, labels in batches), batches
