"""A training-time budget: as many whole epochs as fit, the last ones cooling down.

Not in the paper, whose runs have a step count and whose §5.3 schedule has no
end. A run given ``training.time_budget_minutes`` trains whole epochs while
they fit in the budget, and its learning rate falls linearly to zero over the
last ``training.cooldown_fraction`` of them (the cooldown of
:class:`transformer.model.optimization.WarmupInverseSquareRoot`). The same
configuration then gets more epochs on a faster machine and fewer on a slower
one, instead of a fixed count that overruns the budget on a slow day.

How many epochs fit is known only from the machine's speed, so after each
epoch the run's length is estimated again from the last epoch's training
seconds, until the cooldown has to begin; from then on the plan is fixed.
The seconds used, the plan and the cooldown's steps are checkpointed with the
run, so a resumed run keeps its plan and the seconds already spent. Training
seconds count the training steps only, not validation (the ``seconds`` of
``metrics.jsonl``).

Under several workers each measures its own seconds; they agree on the mean
(:func:`transformer.training.tf_distribute.mean_over_replicas`), so every worker makes the
same plan.

The plan's state is four numbers (:meth:`TimeBudget.state`), which the
training loop hands to its engine's checkpoint and back."""

import math

from absl import logging

from transformer.run.progress import plural


def planned_epochs(budget_seconds: float, used_seconds: float, epochs_done: int,
                   seconds_per_epoch: float, max_epochs: int) -> int:
  """The run's length in epochs: those done plus the whole epochs still fitting, at most max_epochs."""
  left = max(0.0, budget_seconds - used_seconds)
  return min(max_epochs, epochs_done + int(left // max(seconds_per_epoch, 1e-9)))


def cooldown_epochs(total_epochs: int, fraction: float) -> int:
  """The last epochs of a run of ``total_epochs`` that cool down: ``fraction`` of them, rounded up."""
  if fraction <= 0 or total_epochs <= 0:
    return 0
  return min(total_epochs, math.ceil(fraction * total_epochs - 1e-9))


# The plan's state, in the order checkpoints hold it.
STATE = ("used_seconds", "planned", "cooldown_steps", "cooldown_end_step")


class TimeBudget:
  """Plans a run of whole epochs that fits ``minutes`` of training.

  Args:
    minutes: the training time the run may use.
    cooldown_fraction: the share of the planned epochs over which the rate
      falls to zero.
    max_epochs: the run never plans more epochs than this.

  ``cooldown_steps`` and ``cooldown_end_step`` (0 until the plan is fixed)
  are for the optimizer's ``WarmupInverseSquareRoot``.
  """

  def __init__(self, minutes: float, cooldown_fraction: float, max_epochs: int):
    self.budget_seconds = 60.0 * float(minutes)
    self.cooldown_fraction = float(cooldown_fraction)
    self.max_epochs = int(max_epochs)
    self.used_seconds = 0.0
    # 0 until the cooldown begins; then the run's length in epochs.
    self.planned = 0
    self.cooldown_steps = self.cooldown_end_step = 0
    # The run's length as this run last estimated it (None: not yet); not checkpointed.
    self.estimate = None

  def state(self) -> dict:
    """What a checkpoint must hold to resume the plan, by name (:data:`STATE`)."""
    return {name: getattr(self, name) for name in STATE}

  def load(self, state: dict) -> None:
    """Takes back a checkpoint's :meth:`state`."""
    self.used_seconds = float(state["used_seconds"])
    for name in STATE[1:]:
      setattr(self, name, int(state[name]))

  def add_seconds(self, seconds: float) -> None:
    self.used_seconds += float(seconds)

  def finished(self, epochs_done: int) -> bool:
    """Whether the planned epochs are done (False while the plan is open)."""
    planned = self.planned
    return 0 < planned <= epochs_done

  def epoch_end(self, *, epochs_done: int, epoch_seconds: float, steps_per_epoch: int,
                step: int) -> int:
    """After a complete epoch: estimates the run's length and, once its
    cooldown has to begin, fixes the plan and starts the cooldown. Returns the
    run's length in epochs as now planned."""
    if self.planned:
      return self.planned
    total = planned_epochs(self.budget_seconds, self.used_seconds, epochs_done,
                           epoch_seconds, self.max_epochs)
    cooling = cooldown_epochs(total, self.cooldown_fraction)
    if epochs_done < total - cooling:
      logging.info("time budget: about %s fit (%.1f of %.1f minutes used, %.1f per "
                   "epoch)", plural(total, "epoch"), self.used_seconds / 60,
                   self.budget_seconds / 60, epoch_seconds / 60)
      self.estimate = total
      return total
    total = max(total, epochs_done)
    steps = (total - epochs_done) * int(steps_per_epoch)
    self.planned, self.cooldown_steps, self.cooldown_end_step = total, steps, step + steps
    if steps:
      logging.info("time budget: %s in all; the learning rate falls to zero over the "
                   "last %d (steps %d to %d)", plural(total, "epoch"), total - epochs_done, step,
                   step + steps)
    elif self.cooldown_fraction > 0:
      logging.warning("time budget: used up after %s, before a cooldown could begin",
                      plural(total, "epoch"))
    return total

  def epochs(self, epochs_done: int, current_epoch_seconds: float = 0.0):
    """``(epochs, estimated)``: the run's length as known now. The plan once
    fixed; else the latest estimate: that of the last epoch ended in this run,
    or, right after a resume, from the whole epochs' mean seconds
    (``used_seconds`` less ``current_epoch_seconds``, the part of the current
    epoch already trained); ``(None, False)`` before the first epoch's end."""
    fixed = self.planned
    if fixed:
      return fixed, False
    if self.estimate is None and epochs_done:
      used = self.used_seconds
      self.estimate = planned_epochs(self.budget_seconds, used, epochs_done,
                                     (used - current_epoch_seconds) / epochs_done, self.max_epochs)
    return self.estimate, self.estimate is not None
