"""A trained model restored from a ``train.py`` output folder (its configuration,
tokenizers and latest or averaged checkpoints)."""

from pathlib import Path
from typing import List

import ml_collections
import tensorflow as tf

from transformer.data import tokenizers as tokenizers_lib
from transformer.inference import averaging
from transformer.model import Transformer
from transformer.run import keras_checkpoints
from transformer.run import run_folder
from transformer.run.checkpoint_files import checkpoint_step
from transformer.run.run_folder import PathLike


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
  model_dir = Path(model_dir)
  for name in (run_folder.CONFIG_FILE, run_folder.TOKENIZER_PATH_FILE):
    if not (model_dir / name).is_file():
      raise FileNotFoundError(f"{model_dir / name} is missing: is {model_dir} a train.py "
                              "output folder?")
  # Trained by the Keras-on-JAX trainer: its checkpoints' model.weights.h5.
  checkpoint_dir = run_folder.checkpoint_dir(model_dir)
  from_weights = keras_checkpoints.exist(checkpoint_dir)
  paths = (keras_checkpoints.last_weights(checkpoint_dir, max(average_last, 1))
           if from_weights else
           averaging.last_checkpoints(checkpoint_dir, max(average_last, 1)))
  config = ml_collections.ConfigDict(
      run_folder.read_run_config(model_dir / run_folder.CONFIG_FILE))
  tokenizers = tokenizers_lib.load_tokenizers(
      (model_dir / run_folder.TOKENIZER_PATH_FILE).read_text().strip())
  mismatch = run_folder.vocabulary_mismatch(model_dir, tokenizers_lib.vocabulary_hash(tokenizers))
  if mismatch:
    raise tokenizers_lib.TokenizerError(
        f"{model_dir / run_folder.TOKENIZER_PATH_FILE}: {mismatch}")
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


def newer_checkpoints(model_dir: PathLike, used: str) -> List[str]:
  """The names of ``model_dir``'s checkpoints newer than ``used`` (either
  trainer's): those a restore skipped because they cannot be read in full."""
  directory = run_folder.checkpoint_dir(model_dir)
  if keras_checkpoints.exist(directory):
    names = [path.name for path in keras_checkpoints.checkpoint_dirs(directory)]
  else:
    state = tf.train.get_checkpoint_state(str(directory))
    names = [Path(path).name for path in (state.all_model_checkpoint_paths if state else [])]
  return [name for name in names if checkpoint_step(name) > checkpoint_step(used)]
