"""Learning-rate schedule and optimizer (tutorial: "Set up the optimizer"; paper §5.3)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="transformer")
class WarmupInverseSquareRoot(keras.optimizers.schedules.LearningRateSchedule):
  """lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)  (§5.3).

  Rises linearly for ``warmup_steps`` steps, then decays as step^-0.5. ``step`` is the
  optimizer's iteration counter plus one, so the first update's rate is not zero.
  ``scale`` (1 in the paper, tensor2tensor's ``learning_rate``) moves the whole curve.

  Not in the paper: ``cooldown_steps > 0`` multiplies the rate by
  ``(cooldown_end_step - iteration) / cooldown_steps`` clipped to [0, 1], a linear fall to
  zero, so that a run with a fixed budget does not end on a rate far from zero. Both may be
  int64 variables, set during the run by :class:`transformer.training.budget.TimeBudget`.
  """

  def __init__(self, d_model: int, warmup_steps: int = 4000, scale: float = 1.0,
               cooldown_steps: int = 0, cooldown_end_step: int = 0):
    self.d_model = d_model
    self.warmup_steps = warmup_steps
    self.scale = scale
    self.cooldown_steps = cooldown_steps
    self.cooldown_end_step = cooldown_end_step

  def __call__(self, iteration):
    iteration = ops.cast(iteration, "float32")
    step = iteration + 1.0
    rate = (float(self.scale) * ops.rsqrt(float(self.d_model)) * ops.minimum(
        ops.rsqrt(step), step * float(self.warmup_steps) ** -1.5))
    # Numbers or variables alike; without a cooldown the factor is exactly 1.
    steps = ops.cast(self.cooldown_steps, "float32")
    remaining = (ops.cast(self.cooldown_end_step, "float32") - iteration) / ops.maximum(steps, 1.0)
    return rate * ops.where(steps > 0.0, ops.clip(remaining, 0.0, 1.0), 1.0)

  def rate_on_host(self, iteration: int) -> float:
    """``self(iteration)`` in plain Python, for the console and TensorBoard: no device call."""
    step = iteration + 1.0
    rate = self.scale * self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup_steps ** -1.5)
    steps = float(self.cooldown_steps)
    if steps <= 0:
      return rate
    return rate * min(max((float(self.cooldown_end_step) - iteration) / steps, 0.0), 1.0)

  def get_config(self):
    # Variables (a time budget's cooldown) are saved as the values they hold now.
    return {"d_model": self.d_model, "warmup_steps": self.warmup_steps,
            "scale": self.scale, "cooldown_steps": _as_int(self.cooldown_steps),
            "cooldown_end_step": _as_int(self.cooldown_end_step)}


# The tutorial's name. Its schedule counts steps from 0, so that its first
# update has a rate of 0; this one counts from 1 (see above).
CustomSchedule = WarmupInverseSquareRoot


def _as_int(value) -> int:
  """A number, or the value a variable holds now."""
  return int(ops.convert_to_numpy(value))


def make_optimizer(config, cooldown=None) -> keras.optimizers.Adam:
  """Adam(β1=0.9, β2=0.98, ε=1e-9) with the warm-up schedule, from a full config.

  ``cooldown``: ``(cooldown_steps, cooldown_end_step)`` instead of the
  config's, e.g. a time budget's variables (:class:`transformer.training.budget.TimeBudget`).
  """
  cooldown_steps, cooldown_end_step = cooldown or (config.training.cooldown_steps,
                                                   config.training.cooldown_end_step)
  return keras.optimizers.Adam(
      WarmupInverseSquareRoot(config.model.d_model, config.training.warmup_steps,
                              config.training.learning_rate_scale,
                              cooldown_steps, cooldown_end_step),
      beta_1=config.training.adam_beta_1, beta_2=config.training.adam_beta_2,
      epsilon=config.training.adam_epsilon)


def cooldown_mismatch(training_config, steps_per_epoch: int):
  """Why a cooldown does not end where the run does, or None when it does.

  A run of ``epochs`` epochs ends at a step known only once an epoch has been counted.
  """
  if not training_config.cooldown_steps:
    return None
  last_step = int(training_config.train_steps) or int(training_config.epochs) * steps_per_epoch
  if last_step == int(training_config.cooldown_end_step):
    return None
  return (f"training.cooldown_end_step is {training_config.cooldown_end_step} but this run "
          f"ends at step {last_step} ({steps_per_epoch} steps per epoch): "
          + ("the steps after the cooldown train at a learning rate of 0"
             if last_step > training_config.cooldown_end_step
             else "the run stops before the rate reaches 0")
          + "; set the cooldown with the run's length")
