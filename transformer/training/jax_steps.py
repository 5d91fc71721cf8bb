"""The JAX trainer's steps, and its seeding without TensorFlow.

One step is one ``jax.jit``-compiled function of the variables' values
(Keras' stateless API: ``model.stateless_call``, ``optimizer.stateless_apply``):
``(values, batch) -> (values, (loss_sum, tokens, correct))`` with ``values``
the ``(trainable, non_trainable, optimizer)`` lists of arrays, which live on
the devices between steps. The loss is the mean over the global batch's real
target tokens (:func:`transformer.model.losses.masked_cross_entropy_sum`); on several
devices the array program is the whole batch's, so its gradients are those of
the global batch, as under ``tf.distribute``. The trainer runs the step K
times per call (:func:`make_stack_step`, ``training.steps_per_dispatch``),
compiled once per batch shape, at its first use.
"""

import sys
import time

from absl import logging
import jax
import keras
import numpy as np

from transformer.model import losses


class _HiddenTensorFlow:
  """An import hook under which ``import tensorflow`` fails."""

  def find_spec(self, name, path=None, target=None):  # pylint: disable=unused-argument
    if name.split(".")[0] == "tensorflow":
      raise ImportError("hidden from keras.utils.set_random_seed")
    return None


def set_random_seed(seed: int) -> None:
  """``keras.utils.set_random_seed``, which also seeds ``tf.random`` and for
  that imports TensorFlow whenever it is installed (seconds, and what this
  trainer is without); TensorFlow is hidden from it, so it seeds Keras,
  Python and NumPy only."""
  hook = _HiddenTensorFlow()
  sys.meta_path.insert(0, hook)
  try:
    keras.utils.set_random_seed(seed)
  finally:
    sys.meta_path.remove(hook)


def step_functions(model, optimizer, smoothing: float):
  """``(train_step, eval_step)`` as plain functions of the values and a batch
  (what :func:`make_stack_step` and the evaluation compile)."""
  # Nothing here reads attention weights: fused attention (cuDNN's on a GPU) where
  # it applies. The TensorFlow trainer keeps the explicit path: TensorFlow has no
  # fused kernel, and keras' fallback is the same einsums.
  model.use_fused_attention()

  def sums(labels, logits, loss_sum, tokens):
    correct, _ = losses.masked_correct_sum(labels, logits)
    return loss_sum, tokens, correct

  def train_step(values, batch):
    trainable, non_trainable, optimizer_values = values
    (source, target_input), labels = batch

    def loss_fn(trainable):
      logits, new_non_trainable = model.stateless_call(
          trainable, non_trainable, (source, target_input), training=True)
      loss_sum, tokens = losses.masked_cross_entropy_sum(labels, logits, smoothing)
      # The mean over the global batch's real tokens: on several devices
      # this array program is the whole batch's.
      return loss_sum / jax.numpy.maximum(tokens, 1.0), (logits, loss_sum, tokens,
                                                          new_non_trainable)

    grads, (logits, loss_sum, tokens, non_trainable) = jax.grad(loss_fn, has_aux=True)(
        trainable)
    trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, grads,
                                                            trainable)
    return (trainable, non_trainable, optimizer_values), sums(labels, logits, loss_sum, tokens)

  def eval_step(values, batch):
    trainable, non_trainable, _ = values
    (source, target_input), labels = batch
    logits, _ = model.stateless_call(trainable, non_trainable, (source, target_input),
                                     training=False)
    return sums(labels, logits, *losses.masked_cross_entropy_sum(labels, logits, smoothing))

  return train_step, eval_step


def make_stack_step(train_step, schedule):
  """``train_step`` (one step, unjitted: :func:`step_functions`) run over a
  stack, ``jax.jit``-compiled with the values donated: ``(values, (batches,
  active), cooldown) -> (values, (loss_sum, tokens, correct), step_losses)``
  where every array of ``batches`` has a leading axis of K steps, ``active``
  is K booleans and ``cooldown`` the ``(2,)`` ``cooldown_steps`` and
  ``cooldown_end_step`` of ``schedule`` (a traced input: a time budget's plan
  compiles nothing again). An inactive step (padding of a stack that its
  shape's batches do not fill) leaves the values exactly as they are and adds
  nothing, so each shape compiles once, at K; the sums are of the stack's
  active steps, summed on the device, and ``step_losses`` the K loss sums (0
  where inactive), read only to name the step of a NaN."""

  def train_stack(values, stack, cooldown):
    batches, active = stack
    first = jax.tree_util.tree_map(lambda array: array[0], batches)
    on_host = schedule.cooldown_steps, schedule.cooldown_end_step
    schedule.cooldown_steps, schedule.cooldown_end_step = cooldown[0], cooldown[1]
    try:
      sums_shape = jax.eval_shape(train_step, values, first)[1]
      zeros = jax.tree_util.tree_map(lambda s: jax.numpy.zeros(s.shape, s.dtype), sums_shape)

      def skipped(values, batch):  # pylint: disable=unused-argument
        return values, zeros

      def one_step(carry, inputs):
        values, totals = carry
        batch, is_active = inputs
        values, sums = jax.lax.cond(is_active, train_step, skipped, values, batch)
        return (values, tuple(t + s for t, s in zip(totals, sums))), sums[0]

      (values, totals), step_losses = jax.lax.scan(one_step, (values, zeros), (batches, active))
    finally:  # the traced values only while tracing; the host's again for the console
      schedule.cooldown_steps, schedule.cooldown_end_step = on_host
    return values, totals, step_losses

  return jax.jit(train_stack, donate_argnums=0)


class DeviceSteps:
  """The model's and optimizer's values on the devices, and the steps over them.

  The values, ``(trainable, non_trainable, optimizer)`` lists of arrays, stay
  on the devices between steps; the Keras variables hold them only after
  :meth:`write_variables` (a checkpoint, the final weights). Training runs in
  stacks of ``steps_per_dispatch`` steps (:func:`make_stack_step`); each
  shape's step is compiled at its first use, and the console says how long
  that took, once per shape.

  Args:
    model: the built Keras model.
    optimizer: its built optimizer.
    schedule: its :class:`transformer.model.optimization.WarmupInverseSquareRoot`.
    devices: the JAX devices to run on.
    distribution: the ``keras.distribution.DataParallel`` over them, or None
      for one device.
    smoothing: label smoothing of the training loss.
    steps_per_dispatch: K, the steps of a stack.
  """

  def __init__(self, model, optimizer, schedule, devices, distribution, smoothing: float,
               steps_per_dispatch: int = 1):
    self._model, self._optimizer, self._smoothing = model, optimizer, smoothing
    self._schedule = schedule
    self._devices, self._distribution = devices, distribution
    self.steps_per_dispatch = steps_per_dispatch
    self._compiled = {}  # (kind, the batch's shapes) -> its compiled step
    self.values = None
    self.read_variables()
    self.set_cooldown(schedule.cooldown_steps, schedule.cooldown_end_step)

  def _variables(self):
    return (self._model.trainable_variables, self._model.non_trainable_variables,
            self._optimizer.variables)

  def read_variables(self) -> None:
    """Takes the values from the Keras variables, placed as the step's outputs
    will be, so that the step compiles once (after building and restoring)."""
    values = tuple([v.value for v in variables] for variables in self._variables())
    self.values = (values if self._distribution is not None
                   else jax.device_put(values, self._devices[0]))

  def write_variables(self, values=None) -> None:
    """Puts ``values`` (default: those trained on the devices; or their
    :meth:`host_values`) into the Keras variables."""
    for variables, group in zip(self._variables(), values or self.values):
      for variable, value in zip(variables, group):
        variable.assign(value)

  def host_values(self):
    """A copy of the values in host memory, taken once the dispatched steps
    have run: the next stack's step donates the device buffers."""
    return jax.device_get(self.values)

  def set_cooldown(self, steps: int, end_step: int) -> None:
    """The schedule's cooldown: on the host for the console, on the devices for the step."""
    self._schedule.cooldown_steps, self._schedule.cooldown_end_step = int(steps), int(end_step)
    self._cooldown = self.on_devices(np.array([steps, end_step], np.int32))

  def _step_for(self, kind: str, inputs):
    """The compiled ``kind`` step ("train": a stack, "validation": a batch) for
    the shapes of ``inputs``, compiled now if they are new."""
    key = _key(kind, inputs)
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
      logging.info("compiled the %s for %s in %.1f s", _step_name(kind, self.steps_per_dispatch),
                   " × ".join(map(str, labels.shape[-2:])), time.monotonic() - start)
    return self._compiled[key]

  def on_devices(self, batch, stacked: bool = False):
    """NumPy arrays (a batch, or a stack of batches and its active flags) as
    device arrays, each batch split on its rows over the devices."""
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
    """Trains on ``stack`` (device arrays: :meth:`on_devices` of a
    :func:`transformer.training.jax_stacks.stacked`); returns its summed
    ``(loss_sum, tokens, correct)`` and its steps' loss sums, device arrays,
    not waited for."""
    self.values, sums, step_losses = self._step_for("train", stack)(self.values, stack,
                                                                    self._cooldown)
    return sums, step_losses

  def compile_stack(self, stack) -> None:
    """Compiles the step for the shapes of ``stack`` (NumPy), if new."""
    if _key("train", stack) not in self._compiled:
      self._step_for("train", self.on_devices(stack, stacked=True))

  def evaluate(self, batches) -> losses.TokenMetrics:
    """The sums over ``batches`` without dropout."""
    metrics = losses.TokenMetrics()
    device_sums = []
    for batch in batches:
      batch = self.on_devices(batch)
      device_sums.append(self._step_for("validation", batch)(self.values, batch))
    for batch_sums in jax.device_get(device_sums):
      metrics.add(*batch_sums)
    return metrics


def _key(kind: str, inputs):
  """What a compiled step is kept by: its kind and its inputs' shapes."""
  return kind, tuple(array.shape for array in jax.tree_util.tree_leaves(inputs))


def _step_name(kind: str, steps_per_dispatch: int) -> str:
  if kind == "validation":
    return "validation step"
  if steps_per_dispatch == 1:
    return "training step"
  return f"training step ({steps_per_dispatch} a dispatch)"
