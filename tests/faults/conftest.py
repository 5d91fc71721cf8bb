"""Fixtures of the fault tests."""

from pathlib import Path
import time

import pytest

from helpers.fault_runs import finish_driver, run_driver, start_driver, train_args


@pytest.fixture(scope="session")
def small_data(tmp_path_factory, ted_data_dir):
  """The first 96 training, 16 validation and 16 test pairs of the real data: 6
  batches an epoch."""
  folder = tmp_path_factory.mktemp("data")
  for split, count in (("train", 96), ("dev", 16), ("test", 16)):
    for language in ("pt", "en"):
      lines = (ted_data_dir / f"{language}.{split}").read_text(encoding="utf-8").splitlines()
      (folder / f"{language}.{split}").write_text("".join(l + "\n" for l in lines[:count]),
                                                 encoding="utf-8")
  return folder


@pytest.fixture(scope="session")
def finished_and_refused(tmp_path_factory, small_data, tutorial_tokenizer_path):
  """A run folder trained 6 steps (checkpoints 5 and 6) and exported by a run
  that paused after step 1 while a second train.py on the folder ran. Returns
  the folder, the first run's PID and (exit status, output) of the second run
  and of the first."""
  model_dir = tmp_path_factory.mktemp("finished") / "run"
  args = train_args(model_dir, small_data, tutorial_tokenizer_path, 6)
  first = start_driver([a for a in args if a != "--noexport"], "pause_at_step", 1)
  deadline = time.time() + 180
  while not Path(f"{model_dir}.paused").exists():
    assert first.poll() is None and time.time() < deadline, finish_driver(first)[1][-3000:]
    time.sleep(0.2)
  second = run_driver(train_args(model_dir, small_data, tutorial_tokenizer_path, 6,
                                 "--config.training.seed=1"))
  Path(f"{model_dir}.release").touch()
  return model_dir, first.pid, second, finish_driver(first)


@pytest.fixture(scope="session")
def finished_run(finished_and_refused):
  """A run folder trained 6 steps (checkpoints 5 and 6) and exported."""
  model_dir, _, _, (code, output) = finished_and_refused
  assert code == 0, output[-3000:]
  return model_dir
