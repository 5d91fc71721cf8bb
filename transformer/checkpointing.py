"""Checkpoints of a training run, and resuming from them (tutorial: "Train the
model" → the checkpoint manager; paper §5).

``tf.train.Checkpoint(model, optimizer, position)`` with a
``tf.train.CheckpointManager`` under ``<model_dir>/checkpoints``; the loop in
:mod:`transformer.training` saves at the end of each epoch and whenever
``config.training.checkpoint_every_steps`` steps have passed since the last
save, so that the checkpoints averaged for evaluation (§6.1) are evenly spaced
and no two are a few steps apart. The step counter is ``optimizer.iterations``
(which also drives the learning-rate schedule); the epoch and the number of
batches already consumed in it are checkpointed too, and the epoch's batches
come from a dataset seeded by the epoch, so a resumed run skips exactly the
batches already trained on.

Corrupt or mismatched checkpoints are refused with :class:`CheckpointError`
instead of silently starting over.

Under a multi-worker strategy every worker must take part in saving; only the
chief writes to ``<model_dir>/checkpoints``, the others to a throw-away folder
``<model_dir>/.worker_<id>`` that :meth:`Checkpoints.cleanup` removes (the
``tf.distribute`` multi-worker convention).
"""

from pathlib import Path
import shutil
from typing import Optional

from absl import logging
import tensorflow as tf

from transformer import distribute
from transformer.errors import TrainingError

CHECKPOINT_SUBDIR = "checkpoints"


class CheckpointError(TrainingError):
  """A checkpoint is missing, corrupt, or does not fit this model."""


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
    **run_state: more variables to save and restore by name (a time budget's
      plan, :class:`transformer.budget.TimeBudget`).
  """

  def __init__(self, model_dir: Optional[Path], strategy, *, keep: int, model, optimizer,
               epoch: tf.Variable, step_in_epoch: tf.Variable,
               steps_per_epoch: tf.Variable, **run_state: tf.Variable):
    self._optimizer = optimizer
    self._epoch = epoch
    self._step_in_epoch = step_in_epoch
    self._checkpoint = tf.train.Checkpoint(
        model=model, optimizer=optimizer, epoch=epoch, step_in_epoch=step_in_epoch,
        steps_per_epoch=steps_per_epoch, **run_state)
    self._is_chief = distribute.is_chief(strategy)
    self._directory = None
    self._manager = None
    self._worker_tmp = None
    self._last_saved = None  # (step, epoch, step_in_epoch) last saved or restored
    if model_dir is not None:
      self._directory = model_dir / CHECKPOINT_SUBDIR
      write_dir = self._directory
      if not self._is_chief:
        self._worker_tmp = model_dir / f".worker_{distribute.worker_id(strategy)}"
        write_dir = self._worker_tmp / CHECKPOINT_SUBDIR
      self._manager = tf.train.CheckpointManager(
          self._checkpoint, directory=str(write_dir),
          max_to_keep=keep if self._is_chief else 1)

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
    """Restores the latest checkpoint if there is one.

    Returns the restored step (0 when starting fresh). Raises
    :class:`CheckpointError` naming the checkpoint when it is corrupt or was
    written by a different model (e.g. another d_model).
    """
    path = self.latest()
    if path is None:
      if self._directory is not None and self._directory.is_dir() and any(
          self._directory.glob("ckpt-*")):
        raise CheckpointError(
            f"{self._directory} holds checkpoint files but no readable "
            "'checkpoint' index file; it is corrupt. Use a new --model_dir or "
            "delete the folder to start over")
      return 0
    try:
      status = self._checkpoint.restore(path)
      status.assert_existing_objects_matched()
    except Exception as e:  # pylint: disable=broad-except  (OpError, ValueError, IndexError...)
      raise CheckpointError(
          f"cannot restore the checkpoint {path}: it is corrupt or was written by a "
          f"different model/configuration (e.g. another d_model, vocabulary or "
          f"mixed-precision setting). Use a new --model_dir, or delete "
          f"{self._directory} to start over. Cause: {type(e).__name__}: "
          f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
    self._last_saved = self._position()
    step, epoch, step_in_epoch = self._last_saved
    logging.info("restored checkpoint %s at step %d (epoch %d, batch %d of the epoch)",
                 path, step, epoch, step_in_epoch)
    return step

  def due(self, step: int, interval: int) -> bool:
    """Whether ``step`` is ``interval`` steps or more past the last save (or restore)."""
    return step - (self._last_saved[0] if self._last_saved else 0) >= interval

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
    path = self._manager.save(checkpoint_number=position[0])
    self._last_saved = position
    if self._is_chief:
      logging.info("saved checkpoint %s", path)
    return path

  def cleanup(self) -> None:
    """Removes a non-chief worker's throw-away folder (nothing on the chief)."""
    if self._worker_tmp is not None:
      shutil.rmtree(self._worker_tmp, ignore_errors=True)
