"""The TensorFlow engine's checkpoints, and resuming from them (paper §5).

``tf.train.CheckpointManager`` files under ``<model_dir>/checkpoints``, numbered by the
step (``optimizer.iterations``, which drives the learning-rate schedule too), with the
position in the data: a resumed run skips exactly the batches trained on (an epoch's data
is seeded by the epoch). A resume starts from the newest intact checkpoint
(:mod:`transformer.run.checkpoint_files`); none intact, one that does not fit this model,
or a failed save (a full disk) raise :class:`CheckpointError`, saying what to do.

Under a multi-worker strategy every worker saves; the non-chief ones into a
throw-away ``<model_dir>/.worker_<id>`` (the ``tf.distribute`` convention)."""

from pathlib import Path
import shutil
from typing import Dict, Optional

from absl import logging
import tensorflow as tf

from transformer.run import progress
from transformer.run.checkpoint_files import (
    drop_unreadable_newest, intact_checkpoints, remove_partial_writes, write_index,
    written_checkpoints)
from transformer.run.errors import CheckpointError, describe_error
from transformer.run.run_folder import CHECKPOINT_SUBDIR
from transformer.training import tf_distribute


class Checkpoints:
  """Saves and restores the model, the optimizer (its ``iterations`` is the step)
  and the position in the data, int64 variables (``steps_per_epoch``: 0 until one
  epoch has been seen); ``model_dir`` None keeps nothing (tests). ``added_state``:
  trackables that older checkpoints lack, restored when the checkpoint holds them
  (:attr:`restored_added_state`); ``run_state``: more variables (the time budget's)."""

  def __init__(self, model_dir: Optional[Path], strategy, *, keep: int, model, optimizer,
               epoch: tf.Variable, step_in_epoch: tf.Variable,
               steps_per_epoch: tf.Variable, added_state: Optional[Dict] = None,
               **run_state: tf.Variable):
    self._optimizer = optimizer
    self._epoch = epoch
    self._step_in_epoch = step_in_epoch
    core = dict(model=model, optimizer=optimizer, epoch=epoch, step_in_epoch=step_in_epoch,
                steps_per_epoch=steps_per_epoch, **run_state)
    self._added_names = sorted(added_state or {})
    self._checkpoint = tf.train.Checkpoint(**core, **(added_state or {}))
    # Restores checkpoints written before ``added_state`` existed.
    self._core_checkpoint = tf.train.Checkpoint(**core)
    self.restored_added_state = True  # False after restoring a checkpoint without it
    self._is_chief = tf_distribute.is_chief(strategy)
    self._keep = keep
    self._directory = self._write_dir = self._manager = self._worker_tmp = None
    if model_dir is not None:
      self._directory = model_dir / CHECKPOINT_SUBDIR
      self._write_dir = self._directory
      if not self._is_chief:
        self._worker_tmp = model_dir / f".worker_{strategy.cluster_resolver.task_id}"
        self._write_dir = self._worker_tmp / CHECKPOINT_SUBDIR
      self._manager = self._new_manager()

  def _new_manager(self) -> tf.train.CheckpointManager:
    # The manager reads the 'checkpoint' index file when it is made.
    return tf.train.CheckpointManager(self._checkpoint, directory=str(self._write_dir),
                                      max_to_keep=self._keep if self._is_chief else 1)

  def latest(self) -> Optional[str]:
    """The path of the chief's latest checkpoint, or None."""
    return None if self._directory is None else tf.train.latest_checkpoint(str(self._directory))

  def restore(self) -> int:
    """Restores the newest intact checkpoint, if any, and makes the
    ``checkpoint`` index list the intact ones; returns its step (0: none)."""
    if self._directory is None or not self._directory.is_dir():
      return 0
    # Only the chief repairs the folder; the other workers read it as it is.
    intact = (intact_checkpoints(self._directory) if self._is_chief
              else drop_unreadable_newest(written_checkpoints(self._directory))[0])
    if not intact:
      return 0
    path = intact[-1]
    if self._is_chief:  # the index may be lost, or name what was set aside
      write_index(self._directory, intact)
      self._manager = self._new_manager()
    self._restore_from(path)
    step = int(self._optimizer.iterations.numpy())
    logging.info("restored checkpoint %s at step %d (%s)", path, step,
                 progress.position_text(int(self._epoch.numpy()),
                                        int(self._step_in_epoch.numpy())))
    return step

  def _restore_from(self, path: str) -> None:
    """Restores ``path``, without the added state if it predates it."""
    names = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    self.restored_added_state = all(any(n.startswith(f"{added}/") for n in names)
                                    for added in self._added_names)
    if not self.restored_added_state:
      logging.warning("%s predates the checkpointing of %s: the resumed run goes on "
                      "from fresh values of these", path, ", ".join(self._added_names))
    checkpoint = self._checkpoint if self.restored_added_state else self._core_checkpoint
    try:
      status = checkpoint.restore(path)
      status.assert_existing_objects_matched()
    except Exception as e:  # pylint: disable=broad-except  (OpError, ValueError, IndexError...)
      raise CheckpointError(
          f"cannot restore the checkpoint {path}: it is corrupt or was written by a "
          f"different model/configuration (e.g. another d_model, vocabulary or "
          f"mixed-precision setting). Use a new --model_dir, or delete "
          f"{self._directory} to start over. Cause: {describe_error(e)}") from e

  def save(self) -> Optional[str]:
    """Writes a checkpoint numbered by the step (all workers must call it; the loop
    saves a position once); its path (None without ``model_dir``)."""
    if self._manager is None:
      return None
    step = int(self._optimizer.iterations.numpy())
    try:
      path = self._manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as e:  # a full disk, a folder gone read-only
      remove_partial_writes(self._write_dir)
      raise CheckpointError(
          f"cannot write the checkpoint {self._write_dir / f'ckpt-{step}'}: "
          f"{describe_error(e)}. The last good checkpoint is "
          f"{self._manager.latest_checkpoint or 'none (none was written yet)'}; free "
          "space and rerun the same command to resume from it") from e
    if self._is_chief:
      logging.info("saved checkpoint %s", path)
    return path

  def cleanup(self) -> None:
    """Removes a non-chief worker's throw-away folder (nothing on the chief)."""
    if self._worker_tmp is not None:
      shutil.rmtree(self._worker_tmp, ignore_errors=True)
