"""A ``train.py`` output folder (README: What --model_dir holds): the names of its
files and folders, through which every script and both trainers name them, and
its files read back.
"""

import json
import os
from pathlib import Path
import re
from typing import List, Optional, Union

from absl import logging

from transformer.run.errors import TrainingError, describe_error

PathLike = Union[str, os.PathLike]
# The files train.py writes first into its --model_dir.
CONFIG_FILE = "config.json"
TOKENIZER_PATH_FILE = "tokenizer_path.txt"
# One JSON record per line: each epoch's, and train.py's "final" one.
METRICS_FILE = "metrics.jsonl"
VOCABULARY_HASH_FILE = "tokenizer_vocabulary_sha256.txt"  # the tokenizer's identity
# What trained the folder: {"trainer": "tensorflow" or "jax", "data": the --data it read}.
TRAINED_WITH_FILE = "trained_with.json"
LOCK_FILE = "train.lock"  # while a train.py runs
CHECKPOINT_SUBDIR = "checkpoints"
# Where checkpoints that cannot be read are moved, under CHECKPOINT_SUBDIR (kept, not deleted).
UNREADABLE_SUBDIR = "unreadable"
EXPORT_SUBDIR = "export"
# In EXPORT_SUBDIR: the translator SavedModel and the native Keras model.
EXPORT_TRANSLATOR = "translator"
EXPORT_KERAS_MODEL = "transformer.keras"
# In an export folder (train.py's, evaluate.py --export_dir's): the step its files were written at.
EXPORT_INFO_FILE = "export_info.json"
BLEU_SUBDIR = "bleu"  # evaluate.py's and train.py's hypotheses and scores
LOGS_SUBDIR = "logs"  # TensorBoard


def checkpoint_dir(model_dir: PathLike) -> Path:
  """``<model_dir>/checkpoints``: either trainer's checkpoints."""
  return Path(model_dir) / CHECKPOINT_SUBDIR


def export_dir(model_dir: PathLike) -> Path:
  """``<model_dir>/export``: train.py's export, swapped in whole."""
  return Path(model_dir) / EXPORT_SUBDIR


def bleu_dir(model_dir: PathLike) -> Path:
  """``<model_dir>/bleu``: the hypotheses and scores of train.py and evaluate.py."""
  return Path(model_dir) / BLEU_SUBDIR


class RunFolderError(TrainingError):
  """A file of a ``train.py`` output folder is unreadable."""


def not_a_folder(model_dir: PathLike) -> Optional[str]:
  """What is wrong with a ``--model_dir`` that is no folder, or None."""
  path = Path(model_dir)
  if path.is_dir():
    return None
  return (f"--model_dir={model_dir}: {'not a folder' if path.exists() else 'no such folder'}; "
          "pass the folder given to train.py --model_dir")


def exported_step(export_dir: PathLike) -> Optional[int]:
  """The step of the export in ``export_dir`` (:data:`EXPORT_INFO_FILE`), or None."""
  try:
    return int(json.loads((Path(export_dir) / EXPORT_INFO_FILE).read_text(encoding="utf-8"))
               ["step"])
  except (OSError, ValueError, KeyError, TypeError):
    return None


def read_run_config(config_file: PathLike) -> dict:
  """A run folder's ``config.json`` as a dict; :class:`RunFolderError` naming the
  file if it is not a readable JSON object."""
  try:
    with open(config_file, encoding="utf-8") as f:
      stored = json.load(f)
  except (ValueError, OSError) as e:  # ValueError: not JSON, not UTF-8
    raise RunFolderError(f"{config_file} is unreadable ({describe_error(e)})") from e
  if not isinstance(stored, dict):
    raise RunFolderError(f"{config_file} holds a JSON {type(stored).__name__}, "
                         "not a configuration")
  return stored


def trained_with(model_dir: PathLike) -> dict:
  """The folder's :data:`TRAINED_WITH_FILE` ({} where a run before it wrote none)."""
  path = Path(model_dir) / TRAINED_WITH_FILE
  try:
    return json.loads(path.read_text(encoding="utf-8"))
  except FileNotFoundError:
    return {}
  except (OSError, ValueError) as e:
    raise RunFolderError(f"{path} cannot be read ({describe_error(e)}); it says what trained "
                         "the folder: write it again, or use a new --model_dir") from e


def read_metrics(metrics_path: PathLike) -> List[dict]:
  """The records of a run's ``metrics.jsonl``, one dict per line; a line that
  is not a whole JSON object (cut by a kill) is skipped with a warning."""
  records = []
  with open(metrics_path, encoding="utf-8", errors="replace") as f:
    for number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except ValueError:
        record = None
      if isinstance(record, dict):
        records.append(record)
      else:
        logging.warning("%s: line %d is not a whole record (cut short by a kill?); skipped: "
                        "%.60s", metrics_path, number, line.strip())
  return records


def vocabulary_mismatch(model_dir: PathLike, vocabulary_hash: str) -> Optional[str]:
  """Why a tokenizer of ``vocabulary_hash`` is not the one the run in
  ``model_dir`` recorded (:data:`VOCABULARY_HASH_FILE`), or None: it is, or
  none was recorded."""
  recorded_file = Path(model_dir) / VOCABULARY_HASH_FILE
  if not recorded_file.is_file():
    return None
  recorded = recorded_file.read_text(encoding="utf-8", errors="replace").strip()
  if not re.fullmatch(r"[0-9a-f]{64}", recorded):
    return (f"{recorded_file} is damaged (it holds {recorded[:20]!r}, not the 64 hex digits "
            "of a sha256), so the run's tokenizer cannot be checked; if this is the run's "
            "tokenizer, delete the file (the next run records it again)")
  if recorded == vocabulary_hash:
    return None
  return (f"the tokenizer's vocabularies (sha256 {vocabulary_hash[:12]}...) are not those the "
          f"run in {model_dir} was trained with (sha256 {recorded[:12]}..., "
          f"{recorded_file.name}); use that run's tokenizer")
