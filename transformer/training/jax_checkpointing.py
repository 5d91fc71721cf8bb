"""The JAX engine's checkpoints: :mod:`transformer.run.keras_checkpoints` folders, written
one at a time on a thread of their own from host copies while training goes on; a failed
write (a full disk) raises at the loop's next :meth:`Checkpoints.poll` or ``wait``."""

from concurrent import futures
from pathlib import Path
from typing import Callable, Dict, Optional

from absl import logging

from transformer.run import keras_checkpoints
from transformer.run.errors import CheckpointError
from transformer.run import progress
from transformer.run import run_folder


class Checkpoints:
  """Saves and restores a JAX run under ``<model_dir>/checkpoints``, keeping the last ``keep``."""

  def __init__(self, model_dir: Path, model, optimizer, keep: int):
    self.directory = run_folder.checkpoint_dir(model_dir)
    self._model, self._optimizer, self._keep = model, optimizer, keep
    self._writer = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
    self._writing = None  # the Future of the checkpoint being written

  def latest(self) -> Optional[Path]:
    dirs = keras_checkpoints.checkpoint_dirs(self.directory)
    return dirs[-1] if dirs else None

  def save(self, step: int, write_model: Callable[[], None], optimizer_values,
           non_trainable_values, state: Dict) -> None:
    """Starts writing a checkpoint once the one before is written: ``write_model()``
    puts the weights into the model (on the writing thread); the values are host
    arrays; ``state``, the loop's, goes to ``state.json``."""
    self.wait()

    def write():
      write_model()
      return keras_checkpoints.save(self.directory, step, self._model, optimizer_values,
                                    non_trainable_values, state, keep=self._keep)
    self._writing = self._writer.submit(write)

  def poll(self) -> None:
    """Logs a finished write, or raises its :class:`CheckpointError`."""
    if self._writing is not None and self._writing.done():
      self.wait()

  def wait(self) -> None:
    """Waits for the checkpoint being written, if any."""
    if self._writing is None:
      return
    writing, self._writing = self._writing, None
    logging.info("saved checkpoint %s", writing.result())

  def restore(self) -> Optional[Dict]:
    """Loads the newest readable checkpoint into the model and optimizer; returns
    its state, or None. Raises :class:`CheckpointError` where it does not fit."""
    restored = keras_checkpoints.restore(self.directory, self._model)
    if restored is None:
      return None
    path, optimizer_values, non_trainable_values, state = restored
    for variables, values, what in (
        (self._optimizer.variables, optimizer_values, "optimizer"),
        (self._model.non_trainable_variables, non_trainable_values, "non-trainable")):
      if [tuple(v.shape) for v in variables] != [tuple(a.shape) for a in values]:
        raise CheckpointError(
            f"cannot restore the checkpoint {path}: its {what} variables do not fit this "
            "model/configuration. Use a new --model_dir")
      for variable, value in zip(variables, values):
        variable.assign(value)
    logging.info("restored checkpoint %s at step %d (%s)", path,
                 int(self._optimizer.iterations.numpy()),
                 progress.position_text(state["epoch"], state["step_in_epoch"]))
    return state
