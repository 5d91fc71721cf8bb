"""The checkpoint files of a run folder, as readers and the trainer both see them.

``<model_dir>/checkpoints`` holds ``ckpt-N.index`` and ``ckpt-N.data-*`` files
written by :class:`transformer.training.tf_checkpointing.Checkpoints` (a
``tf.train.CheckpointManager``). This module names them and tells intact ones
from the rest, so that evaluation, averaging and the scripts find checkpoints
without importing the training machinery: partial writes (``ckpt-N_temp``,
left by a kill or a full disk) are removed, and a newest checkpoint that
cannot be read in full is moved to ``checkpoints/unreadable/`` with the reason.
"""

from pathlib import Path
import os
import re
import shutil
from typing import List, Optional, Tuple

from absl import logging
import tensorflow as tf
# An internal function: tf.compat.v1.train.update_checkpoint_state wraps it
# with a deprecation warning on the console.
from tensorflow.python.checkpoint import checkpoint_management

from transformer.run.errors import CheckpointError, describe_error
from transformer.run.run_folder import UNREADABLE_SUBDIR
# TensorFlow writes ckpt-N into ckpt-N_temp/ and merges it into ckpt-N.* at the end.
PARTIAL_WRITE_SUFFIX = "_temp"


def checkpoint_name(path: str) -> str:
  """How a checkpoint is named to users and in records: ``ckpt-N`` for this
  module's prefixes, ``step-N`` for the JAX path's ``.../step-N/model.weights.h5``
  (:mod:`transformer.run.keras_checkpoints`)."""
  path = Path(path)
  return path.parent.name if path.suffix == ".h5" else path.name


def checkpoint_step(path: str) -> int:
  """The step N of a checkpoint (``.../ckpt-N`` or ``.../step-N/model.weights.h5``)."""
  return int(checkpoint_name(path).rsplit("-", 1)[1])


def written_checkpoints(directory: Path) -> List[str]:
  """Prefixes of the checkpoints with an index file in ``directory``, oldest
  first; also those a kill kept out of the ``checkpoint`` index file."""
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
  oldest first.

  Partial writes are removed first; newer checkpoints that do not read are set
  aside (:func:`set_aside`) with a warning naming them and why, so that the
  intact one before them is used. Raises :class:`CheckpointError` when
  checkpoints exist but none is intact.
  """
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
  """Makes the ``checkpoint`` index file of ``directory`` list ``prefixes``
  (oldest first; the last is the latest) with their files' times.

  ``tf.train.CheckpointManager`` deletes only the checkpoints listed with a
  time after the index's ``last_preserved_timestamp``; those listed without
  one it keeps for good. So every intact checkpoint is listed, timed, and the
  next save deletes all but the newest ``keep`` of them, however many earlier
  kills left behind.
  """
  times = [os.path.getmtime(f"{prefix}.index") for prefix in prefixes]
  checkpoint_management.update_checkpoint_state_internal(
      str(directory), prefixes[-1], all_model_checkpoint_paths=prefixes,
      save_relative_paths=True, all_model_checkpoint_timestamps=times,
      last_preserved_timestamp=min(times) - 1)
