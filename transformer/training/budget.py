"""A training-time budget: as many whole epochs as fit, the last ones cooling down.

Not in the paper (its runs count steps; its §5.3 schedule has no end): a faster
machine gets more epochs, a slower one fewer, instead of overrunning. The rate falls
linearly to zero over the last ``training.cooldown_fraction`` of the epochs. The run's
length is estimated again after each epoch from its training seconds (not validation)
until the cooldown must begin; then the plan is fixed, and checkpointed with the seconds
used (:meth:`TimeBudget.state`). Several workers plan on their mean seconds."""

import math

from absl import logging

from transformer.run.progress import plural


def planned_epochs(budget_seconds: float, used_seconds: float, epochs_done: int,
                   seconds_per_epoch: float, max_epochs: int) -> int:
  """Epochs done plus the whole epochs still fitting, at most ``max_epochs``."""
  left = max(0.0, budget_seconds - used_seconds)
  return min(max_epochs, epochs_done + int(left // max(seconds_per_epoch, 1e-9)))


def cooldown_epochs(total_epochs: int, fraction: float) -> int:
  """How many of ``total_epochs`` cool down: ``fraction`` of them, rounded up."""
  if fraction <= 0 or total_epochs <= 0:
    return 0
  return min(total_epochs, math.ceil(fraction * total_epochs - 1e-9))


# The plan's state, in the order checkpoints hold it.
STATE = ("used_seconds", "planned", "cooldown_steps", "cooldown_end_step")


class TimeBudget:
  """Plans a run of at most ``max_epochs`` whole epochs that fits ``minutes`` of
  training; ``cooldown_steps`` and ``cooldown_end_step`` (0 until the plan is
  fixed) are the optimizer's ``WarmupInverseSquareRoot``'s."""

  def __init__(self, minutes: float, cooldown_fraction: float, max_epochs: int):
    self.budget_seconds = 60.0 * float(minutes)
    self.cooldown_fraction = float(cooldown_fraction)
    self.max_epochs = int(max_epochs)
    self.used_seconds = 0.0
    self.planned = 0  # the run's length in epochs once fixed
    self.cooldown_steps = self.cooldown_end_step = 0
    self.estimate = None  # the length this process last estimated; not checkpointed

  def state(self) -> dict:
    """What a checkpoint holds of the plan (:data:`STATE`)."""
    return {name: getattr(self, name) for name in STATE}

  def load(self, state: dict) -> None:
    self.used_seconds = float(state["used_seconds"])
    for name in STATE[1:]:
      setattr(self, name, int(state[name]))

  def add_seconds(self, seconds: float) -> None:
    self.used_seconds += float(seconds)

  def finished(self, epochs_done: int) -> bool:
    """Whether the fixed plan's epochs are done."""
    return 0 < self.planned <= epochs_done

  def epoch_end(self, *, epochs_done: int, epoch_seconds: float, steps_per_epoch: int,
                step: int) -> int:
    """After a complete epoch: the run's length in epochs, estimated again or,
    once the cooldown must begin, fixed with the cooldown."""
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
    """``(epochs, estimated)``: the fixed plan, or the latest estimate (right
    after a resume: from the whole epochs' mean seconds, ``current_epoch_seconds``
    being the current epoch's part); ``(None, False)`` before any epoch's end."""
    if self.planned:
      return self.planned, False
    if self.estimate is None and epochs_done:
      whole_epochs_seconds = self.used_seconds - current_epoch_seconds
      self.estimate = planned_epochs(self.budget_seconds, self.used_seconds, epochs_done,
                                     whole_epochs_seconds / epochs_done, self.max_epochs)
    return self.estimate, self.estimate is not None
