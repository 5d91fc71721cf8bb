"""train.py's checks of its run folder before any work (transformer/training/run_checks.py):
what trained the folder, read from its record rather than from the checkpoints
left, and records that outlived their checkpoints."""

import json

import pytest

from configs import tiny
from transformer.run import run_folder
from transformer.run.errors import UsageError
from transformer.training import run_checks


def options(data_dir, **changes):
  fields = dict(data=str(data_dir), tokenizer="build", tokenizer_cache_dir=None,
                strategy="default", tpu=None, mixed_precision="none", jit_compile=False,
                train_examples=0, validation_examples=0, eval_bleu_every_epochs=0,
                bleu_examples=-1, bleu_method="beam", export=True, log_every_steps=100,
                compilation_cache="auto", verbose=False)
  return run_checks.RunOptions(**{**fields, **changes})


@pytest.fixture
def ted_files(tmp_path, monkeypatch):
  monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
  data = tmp_path / "ted"
  data.mkdir()
  for name in ("pt.train", "en.train", "pt.dev", "en.dev"):
    (data / name).write_text("a\n")
  return data


def check(model_dir, data):
  run_checks.check_run(tiny.get_config(), options(data), model_dir)


def test_a_jax_run_whose_checkpoints_were_set_aside_is_refused_to_tensorflow(tmp_path, ted_files):
  model_dir = tmp_path / "run"
  model_dir.mkdir()
  (model_dir / run_folder.TRAINED_WITH_FILE).write_text(json.dumps({"trainer": "jax"}))
  with pytest.raises(UsageError, match=r"was trained by the Keras-on-JAX trainer; "
                                                  r"this command would train with the other"):
    check(model_dir, ted_files)
  (model_dir / run_folder.TRAINED_WITH_FILE).write_text(json.dumps({"trainer": "tensorflow"}))
  check(model_dir, ted_files)


def test_a_folder_from_before_the_record_is_judged_by_its_checkpoints(tmp_path, ted_files):
  model_dir = tmp_path / "run"
  (model_dir / "checkpoints" / "step-4").mkdir(parents=True)
  with pytest.raises(UsageError, match="Keras-on-JAX trainer"):
    check(model_dir, ted_files)


def _records(model_dir, *records):
  model_dir.mkdir(exist_ok=True)
  (model_dir / run_folder.METRICS_FILE).write_text(
      "".join(json.dumps(record) + "\n" for record in records))


def test_records_that_outlived_their_checkpoints_are_refused(tmp_path, ted_files):
  model_dir = tmp_path / "run"
  _records(model_dir, {"epoch": 1, "step": 6}, {"epoch": 2, "step": 12},
           {"final": True, "step": 12, "bleu": 1.0})
  with pytest.raises(UsageError,
                     match=r"holds the records of 2 epochs, up to step 12, but .*checkpoints has "
                           r"no checkpoint to resume from: .*Delete metrics.jsonl to start over"):
    check(model_dir, ted_files)
  (model_dir / "checkpoints").mkdir()
  (model_dir / "checkpoints" / "ckpt-12.index").write_text("")
  check(model_dir, ted_files)


def test_one_epochs_record_without_a_checkpoint_is_redone(tmp_path, ted_files):
  """A kill after the first epoch's record, before its checkpoint: the run goes on."""
  model_dir = tmp_path / "run"
  _records(model_dir, {"epoch": 1, "step": 6})
  check(model_dir, ted_files)
