"""The TensorFlow checkpoint files of a run folder, as readers and the trainer see them.

``<model_dir>/checkpoints`` holds the ``ckpt-N.*`` files of a
``tf.train.CheckpointManager`` (:mod:`transformer.training.tf_checkpointing`).
Partial writes (``ckpt-N_temp``) are removed, and a newest checkpoint that
cannot be read in full is moved to ``checkpoints/unreadable/``.
"""

from pathlib import Path
import os
import re
import shutil
from typing import List, Optional, Tuple

from absl import logging
import tensorflow as tf
# Internal: tf.compat.v1.train.update_checkpoint_state prints a deprecation warning.
from tensorflow.python.checkpoint import checkpoint_management

from transformer.run.errors import CheckpointError, describe_error
from transformer.run.run_folder import UNREADABLE_SUBDIR

# TensorFlow writes ckpt-N into ckpt-N_temp/ and merges it into ckpt-N.* at the end.
PARTIAL_WRITE_SUFFIX = "_temp"


def checkpoint_name(path: str) -> str:
  """A checkpoint's name for users and records: ``ckpt-N``, or ``step-N`` for
  the JAX path's ``.../step-N/model.weights.h5``."""
  path = Path(path)
  return path.parent.name if path.suffix == ".h5" else path.name


def checkpoint_step(path: str) -> int:
  """The step N of a checkpoint (``.../ckpt-N`` or ``.../step-N/model.weights.h5``)."""
  return int(checkpoint_name(path).rsplit("-", 1)[1])


def written_checkpoints(directory: Path) -> List[str]:
  """Prefixes of the checkpoints with an index file in ``directory``, oldest
  first, those a kill kept out of the ``checkpoint`` file too."""
  prefixes = [str(index)[:-len(".index")] for index in Path(directory).glob("ckpt-*.index")]
  return sorted((p for p in prefixes if re.fullmatch(r"ckpt-\d+", Path(p).name)),
                key=checkpoint_step)


def unreadable_reason(prefix: str) -> Optional[str]:
  """Why the checkpoint ``prefix`` cannot be read in full, or None if every
  tensor reads (a truncated data file fails only when its tensors are read)."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except Exception as e:  # pylint: disable=broad-except  (OpError, IndexError, DataLossError...)
    return describe_error(e)
  return None


def remove_partial_writes(directory: Path) -> List[Path]:
  """Removes the ``ckpt-N_temp`` folders of interrupted saves; returns them."""
  partial = sorted(Path(directory).glob(f"ckpt-*{PARTIAL_WRITE_SUFFIX}"))
  for path in partial:
    logging.warning("removing %s, a checkpoint write that did not finish", path)
    shutil.rmtree(path, ignore_errors=True)
  return partial


def set_aside(prefix: str) -> Path:
  """Moves the files of checkpoint ``prefix`` to ``unreadable/`` beside it."""
  prefix = Path(prefix)
  unreadable = prefix.parent / UNREADABLE_SUBDIR
  unreadable.mkdir(exist_ok=True)
  for path in prefix.parent.glob(prefix.name + ".*"):
    path.rename(unreadable / path.name)
  return unreadable


def drop_unreadable_newest(prefixes: List[str]) -> Tuple[List[str], List[Tuple[str, str]]]:
  """Splits checkpoint ``prefixes`` (oldest first) into those up to the newest
  that reads in full, and the newer ones that do not as ``(prefix, why)``,
  newest first."""
  prefixes, unreadable = list(prefixes), []
  while prefixes:
    reason = unreadable_reason(prefixes[-1])
    if reason is None:
      break
    unreadable.append((prefixes.pop(), reason))
  return prefixes, unreadable


def intact_checkpoints(directory: Path) -> List[str]:
  """The checkpoints of ``directory`` up to the newest that reads in full,
  oldest first, after removing partial writes and setting newer ones aside
  with a warning; :class:`CheckpointError` when none is intact."""
  directory = Path(directory)
  remove_partial_writes(directory)
  intact, unreadable = drop_unreadable_newest(written_checkpoints(directory))
  for prefix, reason in unreadable:
    logging.warning("skipping the checkpoint %s: it cannot be read (%s); moved to %s",
                    prefix, reason, set_aside(prefix))
  if unreadable and not intact:
    listed = "; ".join(f"{Path(prefix).name} ({reason})" for prefix, reason in unreadable)
    raise CheckpointError(
        f"no intact checkpoint left in {directory}: {listed} (moved to "
        f"{directory / UNREADABLE_SUBDIR}). Use a new --model_dir or delete {directory} "
        "to start over")
  return intact


def write_index(directory: Path, prefixes: List[str]) -> None:
  """Makes ``directory``'s ``checkpoint`` file list ``prefixes`` (oldest first)
  with their files' times: ``tf.train.CheckpointManager`` deletes only those
  listed with a time, so the next save keeps the newest ``keep`` of them all."""
  times = [os.path.getmtime(f"{prefix}.index") for prefix in prefixes]
  checkpoint_management.update_checkpoint_state_internal(
      str(directory), prefixes[-1], all_model_checkpoint_paths=prefixes,
      save_relative_paths=True, all_model_checkpoint_timestamps=times,
      last_preserved_timestamp=min(times) - 1)
