"""A ``train.py`` output folder read back: its configuration and its trained model."""

import json
import os
from pathlib import Path
from typing import List, Union

from absl import logging

from transformer.run.errors import TrainingError, describe_error

PathLike = Union[str, os.PathLike]
# The files train.py writes first into its --model_dir (README: What --model_dir holds).
CONFIG_FILE = "config.json"
TOKENIZER_PATH_FILE = "tokenizer_path.txt"
# One JSON record per line: each epoch's, and train.py's "final" one.
METRICS_FILE = "metrics.jsonl"
VOCABULARY_HASH_FILE = "tokenizer_vocabulary_sha256.txt"  # the tokenizer's identity


class RunFolderError(TrainingError):
  """A file of a ``train.py`` output folder is unreadable."""


def read_run_config(config_file: PathLike) -> dict:
  """A run folder's ``config.json`` as a dict; :class:`RunFolderError` naming the
  file if it is unreadable, empty, cut short or not a JSON object."""
  try:
    with open(config_file, encoding="utf-8") as f:
      stored = json.load(f)
  except (ValueError, OSError) as e:  # ValueError: not JSON, not UTF-8
    raise RunFolderError(f"{config_file} is unreadable ({describe_error(e)})") from e
  if not isinstance(stored, dict):
    raise RunFolderError(f"{config_file} holds a JSON {type(stored).__name__}, "
                         "not a configuration")
  return stored


def read_metrics(metrics_path: PathLike) -> List[dict]:
  """The records of a run's ``metrics.jsonl``, one dict per line.

  A line that is not a whole JSON object (the last one, cut by a kill during
  its append; or, from versions before the writer repaired such a line, a
  record glued onto it) is skipped with a warning naming the file and line.
  """
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
