"""A ``train.py`` output folder read back: its configuration and its trained model."""

import json
import os
from pathlib import Path
from typing import List, Union

from absl import logging
import ml_collections

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


def restore_model_dir(model_dir: PathLike, average_last: int = 0):
  """The trained model of a ``train.py`` output folder.

  Reads ``config.json`` and ``tokenizer_path.txt``, builds the model and loads
  the latest checkpoint (``average_last`` 0), or the mean of the last
  ``average_last`` ones: TensorFlow checkpoints, or the ``model.weights.h5``
  of a run trained on Keras and JAX
  (:mod:`transformer.run.keras_checkpoints`). The checkpoints are listed
  before anything is built, so that a missing one fails at once.

  Returns:
    ``(config, tokenizers, model, checkpoint paths used)``.
  """
  # Imported here: train.py reads config.json with this module before TensorFlow loads.
  from transformer.inference import averaging  # pylint: disable=g-import-not-at-top
  from transformer.data import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top
  from transformer.model import Transformer  # pylint: disable=g-import-not-at-top
  from transformer.run import keras_checkpoints  # pylint: disable=g-import-not-at-top
  from transformer.run.checkpoint_files import CHECKPOINT_SUBDIR  # pylint: disable=g-import-not-at-top
  model_dir = Path(model_dir)
  for name in (CONFIG_FILE, TOKENIZER_PATH_FILE):
    if not (model_dir / name).is_file():
      raise FileNotFoundError(f"{model_dir / name} is missing: is {model_dir} a train.py "
                              "output folder?")
  # Trained by the Keras-on-JAX trainer: its checkpoints' model.weights.h5.
  from_weights = keras_checkpoints.exist(model_dir / CHECKPOINT_SUBDIR)
  paths = (keras_checkpoints.last_weights(model_dir / CHECKPOINT_SUBDIR, max(average_last, 1))
           if from_weights else
           averaging.last_checkpoints(model_dir / CHECKPOINT_SUBDIR, max(average_last, 1)))
  config = ml_collections.ConfigDict(read_run_config(model_dir / CONFIG_FILE))
  tokenizers = tokenizers_lib.load_tokenizers(
      (model_dir / TOKENIZER_PATH_FILE).read_text().strip())
  mismatch = tokenizers_lib.vocabulary_mismatch(model_dir, tokenizers)
  if mismatch:
    raise tokenizers_lib.TokenizerError(f"{model_dir / TOKENIZER_PATH_FILE}: {mismatch}")
  model = Transformer.from_model_config(config.model, *tokenizers_lib.vocab_sizes(tokenizers))
  model.build(((None, None), (None, None)))
  if from_weights:
    keras_checkpoints.load_weights(model, paths)
    paths = [str(path) for path in paths]
  elif average_last:
    averaging.average_checkpoints(model, paths)
  else:
    averaging.restore_model(model, paths[0])
  return config, tokenizers, model, paths
