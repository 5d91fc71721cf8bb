"""The JAX trainer's compiled steps (Keras' stateless API), and seeding without TensorFlow.

A step maps ``(values, batch) -> (values, (loss_sum, tokens, correct))``; ``values``, the
``(trainable, non_trainable, optimizer)`` lists of arrays, stay on the devices between
steps and go into the Keras variables only for a checkpoint."""

import sys
import time

from absl import logging
import jax
import keras
import numpy as np

from transformer.model import losses
from transformer.training import jax_stacks


class _HiddenTensorFlow:
  """An import hook under which ``import tensorflow`` fails."""

  def find_spec(self, name, path=None, target=None):  # pylint: disable=unused-argument
    if name.split(".")[0] == "tensorflow":
      raise ImportError("hidden from keras.utils.set_random_seed")
    return None


def set_random_seed(seed: int) -> None:
  """``keras.utils.set_random_seed`` with TensorFlow hidden (it would import it
  to seed ``tf.random``): seeds Keras, Python and NumPy."""
  hook = _HiddenTensorFlow()
  sys.meta_path.insert(0, hook)
  try:
    keras.utils.set_random_seed(seed)
  finally:
    sys.meta_path.remove(hook)


def step_functions(model, optimizer, smoothing: float):
  """``(train_step, eval_step)``, unjitted functions of the values and a batch."""
  # Nothing reads attention weights here: fused attention (cuDNN's on a GPU); TensorFlow has none.
  model.use_fused_attention()

  def sums(labels, logits, loss_sum, tokens):
    correct, _ = losses.masked_correct_sum(labels, logits)
    return loss_sum, tokens, correct

  def train_step(values, batch):
    trainable, non_trainable, optimizer_values = values
    (source, target_input), labels = batch

    def loss_fn(trainable):
      logits, new_non_trainable = model.stateless_call(trainable, non_trainable,
                                                       (source, target_input), training=True)
      loss_sum, tokens = losses.masked_cross_entropy_sum(labels, logits, smoothing)
      # The mean over the global batch's real tokens: on several devices the
      # program is the whole batch's, so the gradients are, as under tf.distribute.
      return loss_sum / jax.numpy.maximum(tokens, 1.0), (logits, loss_sum, tokens,
                                                          new_non_trainable)

    grads, (logits, loss_sum, tokens, non_trainable) = jax.grad(loss_fn, has_aux=True)(trainable)
    trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, grads, trainable)
    return (trainable, non_trainable, optimizer_values), sums(labels, logits, loss_sum, tokens)

  def eval_step(values, batch):
    trainable, non_trainable, _ = values
    (source, target_input), labels = batch
    logits, _ = model.stateless_call(trainable, non_trainable, (source, target_input),
                                     training=False)
    return sums(labels, logits, *losses.masked_cross_entropy_sum(labels, logits, smoothing))

  return train_step, eval_step


def make_stack_step(train_step, schedule):
  """``train_step`` scanned over a stack, jitted, values donated: ``(values, (batches,
  active), cooldown) -> (values, sums, step_losses)``. ``batches`` lead with K steps;
  ``active`` (K,): an inactive step (a short stack's padding) changes nothing, so each
  shape compiles once; ``cooldown`` (2,), ``schedule``'s, traced: a time budget's plan
  compiles nothing again; ``sums`` the active steps'; ``step_losses`` (K,) for NaNs."""

  def train_stack(values, stack, cooldown):
    batches, active = stack
    first = jax.tree_util.tree_map(lambda array: array[0], batches)
    on_host = schedule.cooldown_steps, schedule.cooldown_end_step
    schedule.cooldown_steps, schedule.cooldown_end_step = cooldown[0], cooldown[1]
    try:
      sums_shape = jax.eval_shape(train_step, values, first)[1]
      zeros = jax.tree_util.tree_map(lambda s: jax.numpy.zeros(s.shape, s.dtype), sums_shape)

      skipped = lambda values, batch: (values, zeros)

      def one_step(carry, inputs):
        values, totals = carry
        batch, is_active = inputs
        values, sums = jax.lax.cond(is_active, train_step, skipped, values, batch)
        return (values, tuple(t + s for t, s in zip(totals, sums))), sums[0]

      (values, totals), step_losses = jax.lax.scan(one_step, (values, zeros), (batches, active))
    finally:  # the host's values again, for the console
      schedule.cooldown_steps, schedule.cooldown_end_step = on_host
    return values, totals, step_losses

  return jax.jit(train_stack, donate_argnums=0)


class DeviceSteps:
  """The values on the devices, and the steps over them, each compiled once per
  shape; ``schedule`` is the optimizer's ``WarmupInverseSquareRoot``,
  ``distribution`` the ``keras.distribution.DataParallel`` over ``devices`` or None."""

  def __init__(self, model, optimizer, schedule, devices, distribution, smoothing: float,
               steps_per_dispatch: int = 1):
    self._model, self._optimizer, self._schedule = model, optimizer, schedule
    self._devices, self._distribution, self._smoothing = devices, distribution, smoothing
    self.steps_per_dispatch = steps_per_dispatch
    dispatch = f" ({steps_per_dispatch} a dispatch)" if steps_per_dispatch > 1 else ""
    self._step_names = {"train": "training step" + dispatch, "validation": "validation step"}
    self._compiled = {}  # (kind, the batch's shapes) -> its compiled step
    self.read_variables()  # self.values
    self.set_cooldown(schedule.cooldown_steps, schedule.cooldown_end_step)

  def _variables(self):
    return (self._model.trainable_variables, self._model.non_trainable_variables,
            self._optimizer.variables)

  def read_variables(self) -> None:
    """Takes the Keras variables' values, placed as the step's outputs are (one compile)."""
    values = tuple([v.value for v in variables] for variables in self._variables())
    self.values = (values if self._distribution is not None
                   else jax.device_put(values, self._devices[0]))

  def write_variables(self, values=None) -> None:
    """Puts ``values`` (default: the devices') into the Keras variables."""
    for variables, group in zip(self._variables(), values or self.values):
      for variable, value in zip(variables, group):
        variable.assign(value)

  def set_cooldown(self, steps: int, end_step: int) -> None:
    """The schedule's cooldown: on the host for the console, on the devices for the step."""
    self._schedule.cooldown_steps, self._schedule.cooldown_end_step = int(steps), int(end_step)
    self._cooldown = self.on_devices(np.array([steps, end_step], np.int32))

  def _step_for(self, kind: str, inputs):
    """The compiled "train" (a stack) or "validation" (a batch) step for ``inputs``' shapes."""
    key = kind, jax_stacks.shape_of(inputs)
    if key not in self._compiled:
      train_step, eval_step = step_functions(self._model, self._optimizer, self._smoothing)
      start = time.monotonic()
      if kind == "train":
        lowered = make_stack_step(train_step, self._schedule).lower(self.values, inputs,
                                                                     self._cooldown)
      else:
        lowered = jax.jit(eval_step).lower(self.values, inputs)
      self._compiled[key] = lowered.compile()
      labels = inputs[0][1] if kind == "train" else inputs[1]
      logging.info("compiled the %s for %s in %.1f s", self._step_names[kind],
                   " × ".join(map(str, labels.shape[-2:])), time.monotonic() - start)
    return self._compiled[key]

  def on_devices(self, batch, stacked: bool = False):
    """A batch, or a stack and its flags, on the devices, split on its rows."""
    if self._distribution is None:
      return jax.device_put(batch, self._devices[0])
    mesh, rows = self._distribution.device_mesh, self._distribution.batch_dim_name

    def layout(array):  # a stack's rows are its arrays' second axis; its flags are whole
      axes = [None] * array.ndim
      if array.ndim > 1:
        axes[1 if stacked else 0] = rows
      return keras.distribution.TensorLayout(axes, mesh)
    return jax.tree_util.tree_map(
        lambda array: keras.distribution.distribute_tensor(array, layout(array)), batch)

  def train_stack(self, stack):
    """Trains on ``stack`` (on the devices); returns its ``(loss_sum, tokens,
    correct)`` and its steps' loss sums, device arrays not waited for."""
    self.values, sums, step_losses = self._step_for("train", stack)(self.values, stack,
                                                                    self._cooldown)
    return sums, step_losses

  def compile_stack(self, stack) -> None:
    """Compiles the step for the shapes of ``stack`` (NumPy), if new."""
    if ("train", jax_stacks.shape_of(stack)) not in self._compiled:
      self._step_for("train", self.on_devices(stack, stacked=True))

  def evaluate(self, batches) -> losses.TokenMetrics:
    metrics = losses.TokenMetrics()
    device_sums = []
    for batch in batches:
      batch = self.on_devices(batch)
      device_sums.append(self._step_for("validation", batch)(self.values, batch))
    for batch_sums in jax.device_get(device_sums):
      metrics.add(*batch_sums)
    return metrics

