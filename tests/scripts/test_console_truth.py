"""The console tells the truth: the bar counts the steps an epoch will really
run, "Epoch k/N" knows N, the ETA leaves out the tracing step, the last line
counts what ran; a file or a pipe gets plain lines, one per epoch; evaluate.py
shows progress and takes a limit; export and BLEU say what they do and how long
it took, and BLEU reaches TensorBoard; none of TensorFlow's own log lines
without --verbose."""

import io
import json
import os
from pathlib import Path
import pty
import re
import subprocess
import sys

import pytest

from helpers.tf_log_lines import CPP_LOG_LINE
from helpers.tf_log_lines import TF_PYTHON_LOG_LINE
from transformer.run import progress

ROOT = Path(__file__).resolve().parents[2]
ESCAPE = "\x1b"
# A tiny run of 3 epochs: 200 pairs are 13 batches of 16, train_steps cuts the third.
STEPS = 30
LIVE_LINE = re.compile(r"Epoch (\d+)/(\d+) (\d+)/(\d+)(?: |$)")


class FakeClock:
  """Seconds that move only when a test says so."""

  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


class Terminal(io.StringIO):
  def isatty(self):
    return True


def test_eta_leaves_out_the_first_tracing_step():
  clock = FakeClock()
  line = progress.LiveLine("Epoch 1/2", 0, 10, clock)
  clock.now = 1000.0  # the first step traces the graph
  assert "ETA ?" in line.text(1, {})
  clock.now = 1002.0  # then two steps of 1 s each: 7 left
  assert "ETA 0:07" in line.text(3, {})


def test_a_resumed_epochs_eta_starts_after_its_first_step_too():
  clock = FakeClock()
  line = progress.LiveLine("Epoch 2/2", 50, 60, clock)
  clock.now = 500.0
  assert "ETA ?" in line.text(51, {})
  clock.now = 504.0
  assert "ETA 0:05" in line.text(55, {}) and "55/60" in line.text(55, {})


@pytest.mark.parametrize("epoch, epoch_steps, skip, steps_left, epochs, expected", [
    (0, 13, 0, None, 20, 20),  # no step limit: the configured count
    (0, 13, 0, 30, 20, 3),     # 30 steps of 13-step epochs touch 3 epochs
    (0, 13, 0, 13, 20, 1),
    (1, 13, 5, 8, 20, 2),      # a resumed epoch whose last 8 steps end the run
    (1, 13, 5, 9, 20, 3),
])
def test_planned_epochs(epoch, epoch_steps, skip, steps_left, epochs, expected):
  assert progress.planned_epochs(epoch, epoch_steps, skip, steps_left, epochs) == expected


def test_the_last_line_counts_what_ran():
  cut = [{"epoch": 1, "complete": False, "steps_in_epoch": 30}]
  assert progress.run_summary(30, 0, cut) == (
      "training done at step 30: 30 steps in this run (epoch 1 up to its step 30)")
  whole = [{"epoch": e, "complete": True, "steps_in_epoch": 13} for e in (3, 4)]
  assert progress.run_summary(52, 26, whole) == (
      "training done at step 52: 26 steps in this run (epochs 3-4 whole)")


def test_a_file_gets_one_plain_line_per_epoch():
  stream = io.StringIO()
  bar = progress.EpochProgress(enabled=True, stream=stream)
  record = {"epoch": 1, "step": 13, "train_loss": 7.0, "train_accuracy": 0.1,
            "tokens_per_second": 900.0, "seconds": 2.0}
  bar.start("Epoch 1/3", 0, 13)
  for done in range(1, 14):
    bar.update(done, loss=7.0)
  bar.end()
  bar.summary(record, 3)
  assert stream.getvalue() == (
      "Epoch 1/3 (step 13): train loss 7.0000 acc 0.1000 | 900 tok/s | 2.0 s\n")


def test_a_terminal_gets_the_live_line_redrawn_in_place():
  stream, clock = Terminal(), FakeClock()
  bar = progress.EpochProgress(enabled=True, stream=stream, clock=clock)
  bar.start("Epoch 1/3", 0, 4)
  for done in range(1, 5):
    clock.now += 1.0
    bar.update(done, loss=7.0)
  bar.end()
  lines = stream.getvalue().split("\r")[1:]
  assert [LIVE_LINE.search(line).group(3, 4) for line in lines] == [
      (str(done), "4") for done in range(1, 5)]
  assert stream.getvalue().endswith("\n") and ESCAPE not in stream.getvalue()


@pytest.mark.slow
def test_a_time_budgets_epoch_count_follows_its_plan(tiny_config, random_dataset, monkeypatch,
                                                     capsys):
  # 1 minute of budget, a first epoch of 10 s (6 fit), then 20 s ones: the
  # plan fixes 3 epochs after the second.
  from helpers.fixtures import fixed_epoch_clock  # pylint: disable=g-import-not-at-top
  from transformer.training import loop  # pylint: disable=g-import-not-at-top
  from transformer.training.tf_engine import TensorFlowTrainer  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(loop, "EpochClock",
                      fixed_epoch_clock(lambda epoch: 10.0 if epoch == 1 else 20.0))
  config = tiny_config(output_weights="untied")
  config.training.update(epochs=100, time_budget_minutes=1.0, cooldown_fraction=1 / 3,
                         warmup_steps=4)
  dataset = random_dataset(2, rows=6, source_length=9, target_length=10, vocab=50)
  trainer = TensorFlowTrainer(config, input_vocab_size=60, target_vocab_size=60)
  trainer.fit(lambda epoch: dataset)
  labels = re.findall(r"^(Epoch \d+/~?\d+) ", capsys.readouterr().out, re.MULTILINE)
  # The first epoch's count is an estimate when its line is printed; the plan
  # is fixed after the second.
  assert labels == ["Epoch 1/~6", "Epoch 2/3", "Epoch 3/3"]


# ------------------------------------------------------------- tiny real runs

def _train_args(model_dir, ted_data_dir, tokenizer, *extra):
  """A tiny run: the console is looked at, not the model."""
  return [sys.executable, "train.py", "--config=configs/tiny.py", "--train_examples=200",
          "--validation_examples=32", "--config.training.epochs=5",
          f"--config.training.train_steps={STEPS}", f"--data={ted_data_dir}",
          f"--tokenizer={tokenizer}", f"--model_dir={model_dir}", *extra]


def _env():
  """TF_CPP_MIN_LOG_LEVEL is removed: the scripts' defaults are tested."""
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  return {**env, "PYTHONPATH": str(ROOT), "TF_NUM_INTRAOP_THREADS": "1",
          "TF_NUM_INTEROP_THREADS": "1"}


def _run_in_terminal(args, stderr_path):
  """Runs `args` with stdout on a pseudo-terminal; returns (status, what it showed)."""
  controller, terminal = pty.openpty()
  with open(stderr_path, "wb") as stderr:
    proc = subprocess.Popen(args, cwd=ROOT, env=_env(), stdin=subprocess.DEVNULL,
                            stdout=terminal, stderr=stderr)
  os.close(terminal)
  shown = bytearray()
  while True:
    try:
      chunk = os.read(controller, 65536)
    except OSError:  # EIO: the process closed the terminal
      break
    if not chunk:
      break
    shown += chunk
  os.close(controller)
  return proc.wait(timeout=600), shown.decode()


@pytest.fixture(scope="module")
def terminal_run(tmp_path_factory, ted_data_dir, tutorial_tokenizer_path):
  root = tmp_path_factory.mktemp("terminal")
  status, shown = _run_in_terminal(
      _train_args(root / "run", ted_data_dir, tutorial_tokenizer_path, "--noexport",
                  "--bleu_examples=0"), root / "stderr")
  stderr = (root / "stderr").read_text()
  assert status == 0, stderr[-3000:]
  return shown, stderr


@pytest.fixture(scope="module")
def piped_run(tmp_path_factory, ted_data_dir, tutorial_tokenizer_path):
  model_dir = tmp_path_factory.mktemp("piped") / "run"
  result = subprocess.run(
      _train_args(model_dir, ted_data_dir, tutorial_tokenizer_path, "--bleu_examples=4",
                  "--bleu_method=greedy", "--eval_bleu_every_epochs=1"),
      cwd=ROOT, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
      timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return result, model_dir


def _last_live_lines(shown):
  """Each epoch's live line as last drawn: (epoch, planned, done, total)."""
  last = {}
  for epoch, planned, done, total in LIVE_LINE.findall(shown):
    last[int(epoch)] = (int(epoch), int(planned), int(done), int(total))
  return [last[epoch] for epoch in sorted(last)]


@pytest.mark.slow
def test_the_bar_counts_the_steps_each_epoch_really_runs(terminal_run):
  shown, _ = terminal_run
  lines = _last_live_lines(shown)
  assert [epoch for epoch, *_ in lines] == [1, 2, 3], shown[-3000:]
  assert all(planned == 3 and done == total for _, planned, done, total in lines), lines
  assert sum(total for *_, total in lines) == STEPS
  assert lines[2][3] < lines[0][3]  # the third epoch is cut short by train_steps


@pytest.mark.slow
def test_the_terminals_eta_never_counts_the_tracing_step(terminal_run):
  shown, _ = terminal_run
  etas = re.findall(r"ETA (\S+)", shown)
  assert etas and etas[0] == "?"
  # A tiny epoch takes seconds: an ETA in hours or minutes would be the tracing step's.
  assert all(eta == "?" or re.fullmatch(r"0:\d\d", eta) for eta in etas), etas


@pytest.mark.slow
def test_the_last_line_says_what_the_run_trained(terminal_run):
  _, stderr = terminal_run
  assert f"training done at step {STEPS}: {STEPS} steps in this run (epochs 1-2 whole, " \
         "epoch 3 up to its step" in stderr, stderr[-3000:]
  assert "0 epochs" not in stderr


@pytest.mark.slow
def test_a_pipe_gets_one_plain_line_per_epoch(piped_run):
  result, _ = piped_run
  assert ESCAPE not in result.stdout and "\r" not in result.stdout
  lines = result.stdout.splitlines()
  assert [line.split(" (step")[0] for line in lines] == ["Epoch 1/3", "Epoch 2/3",
                                                          "Epoch 3/3"], result.stdout
  assert all("BLEU" in line for line in lines[:2])  # --eval_bleu_every_epochs=1


@pytest.mark.slow
def test_train_shows_its_progress_and_no_tensorflow_logs(piped_run):
  result, _ = piped_run
  output = result.stdout + result.stderr
  assert not CPP_LOG_LINE.search(output), output[-3000:]
  assert "InitializeLog" not in output and "signature_serialization" not in output
  assert not TF_PYTHON_LOG_LINE.search(output), output[-3000:]
  # The pairs each pass uses: --train_examples, --validation_examples (the
  # loss), --bleu_examples; the same counts the JAX path prints.
  for needed in ("200 training pairs, 32 validation pairs\n", "exported",
                 "validation BLEU (greedy, 4 sentences)"):
    assert needed in output, output[-3000:]
  # Lines a person reads: no absl prefix (time, thread id, file:line), no
  # TensorFlow class names, no raw JSON record before each epoch's summary.
  assert not re.search(r"^[IWEF]\d{4} \d\d:\d\d:\d\d", output, re.MULTILINE), output[-3000:]
  assert "strategy default: 1 replica\n" in result.stderr, result.stderr[-3000:]
  assert "Strategy" not in output and "(s)" not in output and "{" not in output, output[-3000:]


@pytest.mark.slow
def test_export_and_bleu_say_what_they_do_and_how_long_it_took(piped_run):
  result, _ = piped_run
  for doing in ("exporting", "translating 4 validation sentences (greedy) for BLEU"):
    assert re.search(rf"{re.escape(doing)}.* \.\.\.\n", result.stderr), result.stderr[-3000:]
    assert re.search(rf"{re.escape(doing)}.*: took \d+\.\d s", result.stderr), (
        result.stderr[-3000:])


@pytest.mark.slow
def test_bleu_is_a_tensorboard_scalar_beside_the_losses(piped_run):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  _, model_dir = piped_run
  scalars = {}
  for path in (model_dir / "logs" / "validation").glob("events.out.tfevents.*"):
    for event in tf.compat.v1.train.summary_iterator(str(path)):
      for value in event.summary.value:
        scalars.setdefault(value.tag, []).append(event.step)
  assert {"loss", "accuracy", "bleu"} <= set(scalars), scalars
  # Two epochs' BLEU (the third is cut short) and the final one at the last step.
  assert sorted(scalars["bleu"]) == sorted(scalars["loss"][:2] + [STEPS])


def _evaluate(*args):
  return subprocess.run([sys.executable, "evaluate.py", *args], cwd=ROOT, env=_env(),
                        stdin=subprocess.DEVNULL, capture_output=True, text=True,
                        timeout=600, check=False)


@pytest.mark.slow
def test_evaluate_takes_a_limit_and_shows_its_progress(piped_run, ted_data_dir):
  _, model_dir = piped_run
  result = _evaluate(f"--model_dir={model_dir}", "--method=greedy", "--max_sentences=3",
                     f"--data={ted_data_dir}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads(result.stdout)["num_sentences"] == 3
  for doing in ("restored the checkpoint ckpt-", "translating 3 validation sentences",
                "teacher-forced loss and accuracy on 3 sentences"):
    assert re.search(rf"{re.escape(doing)}.*: took \d+\.\d s", result.stderr), (
        result.stderr[-3000:])


@pytest.mark.slow
def test_evaluates_old_data_flag_still_works_and_says_it_is_deprecated(piped_run,
                                                                       ted_data_dir):
  _, model_dir = piped_run
  result = _evaluate(f"--translator={model_dir / 'export' / 'translator'}",
                     "--method=greedy", "--max_sentences=2", f"--data_dir={ted_data_dir}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "--data_dir is deprecated; use --data" in result.stderr
  assert json.loads(result.stdout)["num_sentences"] == 2
