"""The JAX trainer's steps, and its seeding without TensorFlow.

One step is one ``jax.jit``-compiled function of the variables' values
(Keras' stateless API: ``model.stateless_call``, ``optimizer.stateless_apply``):
``(values, batch) -> (values, (loss_sum, tokens, correct))`` with ``values``
the ``(trainable, non_trainable, optimizer)`` lists of arrays, which live on
the devices between steps. The loss is the mean over the global batch's real
target tokens (:func:`transformer.model.losses.masked_cross_entropy_sum`); on several
devices the array program is the whole batch's, so its gradients are those of
the global batch, as under ``tf.distribute``. XLA compiles a step once per
batch shape.
"""

import sys

import jax
import keras

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


def make_steps(model, optimizer, smoothing: float):
  """``(train_step, eval_step)``, ``jax.jit``-compiled: the training step
  donates the values it is given (their buffers become the new values'), the
  evaluation step (no dropout) returns the sums only."""
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

  return jax.jit(train_step, donate_argnums=0), jax.jit(eval_step)


class DeviceSteps:
  """The model's and optimizer's values on the devices, and the steps over them.

  The values, ``(trainable, non_trainable, optimizer)`` lists of arrays, stay
  on the devices between steps; the Keras variables hold them only after
  :meth:`write_variables` (a checkpoint, the final weights).

  Args:
    model: the built Keras model.
    optimizer: its built optimizer.
    devices: the JAX devices to run on.
    distribution: the ``keras.distribution.DataParallel`` over them, or None
      for one device.
    smoothing: label smoothing of the training loss.
  """

  def __init__(self, model, optimizer, devices, distribution, smoothing: float):
    self._model, self._optimizer, self._smoothing = model, optimizer, smoothing
    self._devices, self._distribution = devices, distribution
    self._train_step = self._eval_step = None
    self.values = None
    self.read_variables()

  def _variables(self):
    return (self._model.trainable_variables, self._model.non_trainable_variables,
            self._optimizer.variables)

  def read_variables(self) -> None:
    """Takes the values from the Keras variables, placed as the step's outputs
    will be, so that the step compiles once (after building and restoring)."""
    values = tuple([v.value for v in variables] for variables in self._variables())
    self.values = (values if self._distribution is not None
                   else jax.device_put(values, self._devices[0]))

  def write_variables(self) -> None:
    """Puts the values trained on the devices back into the Keras variables."""
    for variables, values in zip(self._variables(), self.values):
      for variable, value in zip(variables, values):
        variable.assign(value)

  def recompile(self) -> None:
    """Traces the steps again at their next call (the schedule has changed)."""
    self._train_step = self._eval_step = None

  def _compiled(self):
    if self._train_step is None:
      self._train_step, self._eval_step = make_steps(self._model, self._optimizer,
                                                     self._smoothing)
    return self._train_step, self._eval_step

  def on_devices(self, batch):
    """A NumPy batch as device arrays, split on its rows over the devices."""
    if self._distribution is None:
      return jax.device_put(batch, self._devices[0])
    return jax.tree_util.tree_map(
        lambda array: keras.distribution.distribute_tensor(
            array, self._distribution.get_data_layout(array.shape)), batch)

  def train(self, batch):
    """One training step on ``batch``; returns its ``(loss_sum, tokens,
    correct)`` as device arrays, not waited for."""
    train_step, _ = self._compiled()
    self.values, step_sums = train_step(self.values, self.on_devices(batch))
    return step_sums

  def evaluate(self, batches) -> losses.TokenMetrics:
    """The sums over ``batches`` without dropout."""
    _, eval_step = self._compiled()
    metrics = losses.TokenMetrics()
    device_sums = [eval_step(self.values, self.on_devices(batch)) for batch in batches]
    for batch_sums in jax.device_get(device_sums):
      metrics.add(*batch_sums)
    return metrics
