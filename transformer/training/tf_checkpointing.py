"""Checkpoints of a training run, and resuming from them (paper §5).

``tf.train.Checkpoint(model, optimizer, position)`` with a
``tf.train.CheckpointManager`` under ``<model_dir>/checkpoints``; the loop in
:mod:`transformer.training.tf_engine` saves at the end of each epoch and whenever
``config.training.checkpoint_every_steps`` steps have passed since the last
save, so that the checkpoints averaged for evaluation (§6.1) are evenly spaced
and no two are a few steps apart. The step counter is ``optimizer.iterations``
(which also drives the learning-rate schedule); the epoch and the number of
batches already consumed in it are checkpointed too, and the epoch's batches
come from a dataset seeded by the epoch, so a resumed run skips exactly the
batches already trained on.

Faults lose nothing (issue #32). A resume starts from the newest INTACT
checkpoint: partial writes (``ckpt-N_temp``, left by a kill or a full disk
during a save) are removed, and a newest checkpoint that cannot be read in full
(truncated, unreadable) is moved to ``checkpoints/unreadable/`` with a warning
saying why, and the one before it is used. Only when checkpoint files exist
but none is intact, or an intact one does not fit this model (another
d_model...), is the run refused with :class:`CheckpointError`; it never starts
over silently. A save that fails (a full disk) raises :class:`CheckpointError`
naming the path and the last good checkpoint.

The names of the checkpoint files and which of them are intact are
:mod:`transformer.run.checkpoint_files`' (evaluation reads them too).

Under a multi-worker strategy every worker must take part in saving; only the
chief writes to ``<model_dir>/checkpoints``, the others to a throw-away folder
``<model_dir>/.worker_<id>`` that :meth:`Checkpoints.cleanup` removes (the
``tf.distribute`` multi-worker convention).
"""

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
  """Saves and restores the model, the optimizer and the position in the data.

  Args:
    model_dir: the run's folder (a ``Path``); None keeps nothing (tests).
    strategy: the ``tf.distribute.Strategy`` the variables were built under.
    keep: how many checkpoints the chief keeps (a non-chief keeps 1).
    model, optimizer: the Keras model and optimizer; ``optimizer.iterations``
      is the step.
    epoch, step_in_epoch, steps_per_epoch: the position in the data, int64
      scalar ``tf.Variable`` s: completed epochs, batches done in the current
      epoch, and batches per epoch (0 until one epoch has been seen).
    added_state: trackables by name that checkpoints written before them lack
      (dropout's random state, the epoch's running sums): saved always,
      restored when the checkpoint holds them (see :attr:`restored_added_state`).
    **run_state: more variables to save and restore by name (a time budget's
      plan, :class:`transformer.training.budget.TimeBudget`).
  """

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
    self._directory = None
    self._write_dir = None
    self._manager = None
    self._worker_tmp = None
    self._last_saved = None  # (step, epoch, step_in_epoch) last saved or restored
    if model_dir is not None:
      self._directory = model_dir / CHECKPOINT_SUBDIR
      self._write_dir = self._directory
      if not self._is_chief:
        self._worker_tmp = model_dir / f".worker_{tf_distribute.worker_id(strategy)}"
        self._write_dir = self._worker_tmp / CHECKPOINT_SUBDIR
      self._manager = self._new_manager()

  def _new_manager(self) -> tf.train.CheckpointManager:
    # The manager reads the 'checkpoint' index file when it is made.
    return tf.train.CheckpointManager(self._checkpoint, directory=str(self._write_dir),
                                      max_to_keep=self._keep if self._is_chief else 1)

  def _position(self):
    """``(step, epoch, step_in_epoch)`` as ints."""
    return (int(self._optimizer.iterations.numpy()), int(self._epoch.numpy()),
            int(self._step_in_epoch.numpy()))

  def latest(self) -> Optional[str]:
    """The path of the chief's latest checkpoint, or None."""
    if self._directory is None:
      return None
    return tf.train.latest_checkpoint(str(self._directory))

  def restore(self) -> int:
    """Restores the newest intact checkpoint if there is one (see
    :func:`intact_checkpoints`), and makes the ``checkpoint`` index file list
    the intact ones.

    Returns the restored step (0 when starting fresh). Raises
    :class:`CheckpointError` naming the checkpoint when none is intact or it
    was written by a different model (e.g. another d_model).
    """
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
    self._last_saved = self._position()
    step, epoch, step_in_epoch = self._last_saved
    logging.info("restored checkpoint %s at step %d (%s)", path, step,
                 progress.position_text(epoch, step_in_epoch))
    return step

  def _holds_added_state(self, path: str) -> bool:
    names = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    return all(any(n.startswith(f"{added}/") for n in names) for added in self._added_names)

  def _restore_from(self, path: str) -> None:
    """Restores ``path``, without the added state if it predates it."""
    self.restored_added_state = self._holds_added_state(path)
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
    """Writes a checkpoint numbered by the step; all workers must call it.

    A position (step, epoch, batch of the epoch) already saved last is not
    written twice: its path is returned. None without ``model_dir``.
    """
    if self._manager is None:
      return None
    position = self._position()
    if self._last_saved == position and self._manager.latest_checkpoint:
      return self._manager.latest_checkpoint
    try:
      path = self._manager.save(checkpoint_number=position[0])
    except (tf.errors.OpError, OSError) as e:  # a full disk, a folder gone read-only
      remove_partial_writes(self._write_dir)
      raise CheckpointError(
          f"cannot write the checkpoint {self._write_dir / f'ckpt-{position[0]}'}: "
          f"{describe_error(e)}. The last good checkpoint is "
          f"{self._manager.latest_checkpoint or 'none (none was written yet)'}; free "
          "space and rerun the same command to resume from it") from e
    self._last_saved = position
    if self._is_chief:
      logging.info("saved checkpoint %s", path)
    return path

  def cleanup(self) -> None:
    """Removes a non-chief worker's throw-away folder (nothing on the chief)."""
    if self._worker_tmp is not None:
      shutil.rmtree(self._worker_tmp, ignore_errors=True)
