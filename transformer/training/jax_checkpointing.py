"""The JAX trainer's checkpoints (:class:`transformer.training.jax_engine.JaxTrainer`),
as :mod:`transformer.training.tf_checkpointing` is the TensorFlow trainer's.

Each is a :mod:`transformer.run.keras_checkpoints` folder (the weights the
TensorFlow side loads, the optimizer's and the non-trainable variables' values,
written whole or not at all). Its ``state.json`` holds the training loop's
state: the position in the data, the current epoch's sums and the time
budget's plan.

The files are written on a thread of their own while training goes on (one
checkpoint at a time): the trainer hands over a copy of the values in host
memory, and the loop learns of the end, or of an error such as a full disk,
at its next stack (:meth:`Checkpoints.poll`) or when it waits for it
(:meth:`Checkpoints.wait`). A kill during the write leaves the checkpoint
before it as the newest (folders are renamed into place whole), and a
``metrics.jsonl`` record appended meanwhile is dropped on resume
(:mod:`transformer.training.loop`).
"""

from concurrent import futures
from pathlib import Path
from typing import Callable, Dict, Optional

from absl import logging

from transformer.run import keras_checkpoints
from transformer.run.errors import CheckpointError
from transformer.run import progress
from transformer.run import run_folder

class Checkpoints:
  """Saves and restores a JAX run under ``<model_dir>/checkpoints``.

  Args:
    model_dir: the run's folder.
    model: the Keras model (its weights are the checkpoint's ``model.weights.h5``).
    optimizer: its built optimizer.
    keep: how many checkpoints to keep.
  """

  def __init__(self, model_dir: Path, model, optimizer, keep: int):
    self.directory = run_folder.checkpoint_dir(model_dir)
    self._model, self._optimizer, self._keep = model, optimizer, keep
    self._writer = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
    self._writing = None  # the Future of the checkpoint being written

  def latest(self) -> Optional[Path]:
    """The newest checkpoint's folder, or None."""
    dirs = keras_checkpoints.checkpoint_dirs(self.directory)
    return dirs[-1] if dirs else None

  def save(self, step: int, write_model: Callable[[], None], optimizer_values,
           non_trainable_values, state: Dict) -> None:
    """Starts writing a checkpoint at ``step`` once the one before is written:
    ``write_model()`` (on the writing thread) puts the weights to save into
    the model's variables; the optimizer's and the non-trainable variables'
    values are host arrays; ``state`` is the loop's, written as ``state.json``."""
    self.wait()

    def write():
      write_model()
      return keras_checkpoints.save(self.directory, step, self._model, optimizer_values,
                                    non_trainable_values, state, keep=self._keep)
    self._writing = self._writer.submit(write)

  def poll(self) -> None:
    """Says that the checkpoint being written is done, if it is; raises its
    :class:`CheckpointError` if writing it failed."""
    if self._writing is not None and self._writing.done():
      self.wait()

  def wait(self) -> None:
    """Waits for the checkpoint being written, if any (see :meth:`poll`)."""
    if self._writing is None:
      return
    writing, self._writing = self._writing, None
    logging.info("saved checkpoint %s", writing.result())

  def restore(self) -> Optional[Dict]:
    """Loads the newest readable checkpoint into the model and the optimizer;
    returns its state (None: there is no checkpoint).

    Raises:
      CheckpointError: its variables do not fit this model and configuration.
    """
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
