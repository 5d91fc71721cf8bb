"""The JAX trainer's checkpoints (:class:`transformer.training.jax_trainer.JaxTrainer`),
as :mod:`transformer.training.checkpointing` is the TensorFlow trainer's.

Each is a :mod:`transformer.run.keras_checkpoints` folder (the weights the
TensorFlow side loads, the optimizer's and the non-trainable variables' values,
written whole or not at all). Its ``state.json`` holds the trainer's position
in the data and the current epoch's sums, the time budget's state and, in the
checkpoint that closes an epoch, that epoch's metrics record, which a resumed
run appends to ``metrics.jsonl`` if a kill came between the two.

The files are written on a thread of their own while training goes on (one
checkpoint at a time): the trainer hands over a copy of the values in host
memory, and the loop learns of the end, or of an error such as a full disk,
at its next stack (:meth:`Checkpoints.poll`) or when it waits for it
(:meth:`Checkpoints.wait`). A kill during the write leaves the checkpoint
before it as the newest (folders are renamed into place whole), and a
``metrics.jsonl`` record appended meanwhile is dropped on resume, as after any
fallback.
"""

from concurrent import futures
from pathlib import Path
from typing import Callable, Dict, Optional

from absl import logging

from transformer.run import keras_checkpoints
from transformer.run.errors import CheckpointError
from transformer.run import progress
from transformer.run import run_folder

# The time budget's state, by its attributes' names (transformer.training.budget.TimeBudget).
BUDGET_STATE = ("used_seconds", "planned", "cooldown_steps", "cooldown_end_step")


class Checkpoints:
  """Saves and restores a JAX run under ``<model_dir>/checkpoints``.

  Args:
    model_dir: the run's folder.
    model: the Keras model (its weights are the checkpoint's ``model.weights.h5``).
    optimizer: its built optimizer.
    budget: the run's :class:`~transformer.training.budget.TimeBudget`, or None.
    keep: how many checkpoints to keep.
  """

  def __init__(self, model_dir: Path, model, optimizer, budget, keep: int):
    self.directory = run_folder.checkpoint_dir(model_dir)
    self._model, self._optimizer, self._budget, self._keep = model, optimizer, budget, keep
    self._last_step = 0  # the step last saved or restored
    self._writer = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
    self._writing = None  # the Future of the checkpoint being written

  def latest(self) -> Optional[Path]:
    """The newest checkpoint's folder, or None."""
    dirs = keras_checkpoints.checkpoint_dirs(self.directory)
    return dirs[-1] if dirs else None

  def due(self, step: int, interval: int) -> bool:
    """Whether ``interval`` steps have passed since the last save or restore."""
    return step - self._last_step >= interval

  def save(self, step: int, write_model: Callable[[], None], optimizer_values,
           non_trainable_values, state: Dict) -> None:
    """Starts writing a checkpoint at ``step`` once the one before is written:
    ``write_model()`` (on the writing thread) puts the weights to save into
    the model's variables; the optimizer's and the non-trainable variables'
    values are host arrays; ``state`` goes with the budget's as it is now."""
    self.wait()
    budget = ({name: getattr(self._budget, name).numpy() for name in BUDGET_STATE}
              if self._budget is not None else {})
    state = dict(state, step=step, budget=budget)

    def write():
      write_model()
      return keras_checkpoints.save(self.directory, step, self._model, optimizer_values,
                                    non_trainable_values, state, keep=self._keep)
    self._last_step = step
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
    """Loads the newest readable checkpoint into the model, the optimizer and
    the budget; returns its state (None: there is no checkpoint).

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
    if self._budget is not None:
      for name, value in state["budget"].items():
        getattr(self._budget, name).assign(value)
    self._last_step = int(self._optimizer.iterations.numpy())
    logging.info("restored checkpoint %s at step %d (%s)", path, self._last_step,
                 progress.position_text(state["epoch"], state["step_in_epoch"]))
    return state
