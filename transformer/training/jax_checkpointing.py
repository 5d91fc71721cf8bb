"""The JAX trainer's checkpoints (:class:`transformer.training.jax_trainer.JaxTrainer`),
as :mod:`transformer.training.checkpointing` is the TensorFlow trainer's.

Each is a :mod:`transformer.run.keras_checkpoints` folder (the weights the
TensorFlow side loads, the optimizer's and the non-trainable variables' values,
written whole or not at all). Its ``state.json`` holds the trainer's position
in the data and the current epoch's sums, the time budget's state and, in the
checkpoint that closes an epoch, that epoch's metrics record, which a resumed
run appends to ``metrics.jsonl`` if a kill came between the two.
"""

from pathlib import Path
from typing import Dict, Optional

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

  def latest(self) -> Optional[Path]:
    """The newest checkpoint's folder, or None."""
    dirs = keras_checkpoints.checkpoint_dirs(self.directory)
    return dirs[-1] if dirs else None

  def due(self, step: int, interval: int) -> bool:
    """Whether ``interval`` steps have passed since the last save or restore."""
    return step - self._last_step >= interval

  def save(self, step: int, optimizer_values, non_trainable_values, state: Dict) -> Path:
    """Writes a checkpoint at ``step``: the model's weights as they are (the
    trainer has put its values into them), the optimizer's and the
    non-trainable variables' values, and ``state`` with the budget's."""
    budget = ({name: getattr(self._budget, name).numpy() for name in BUDGET_STATE}
              if self._budget is not None else {})
    path = keras_checkpoints.save(self.directory, step, self._model, optimizer_values,
                                  non_trainable_values, dict(state, step=step, budget=budget),
                                  keep=self._keep)
    self._last_step = step
    logging.info("saved checkpoint %s", path)
    return path

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
