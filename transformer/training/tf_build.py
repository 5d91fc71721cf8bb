"""What the TensorFlow trainer trains, built apart from its steps and its loop.

:func:`build` makes the model and the optimizer under a ``tf.distribute``
strategy, with Keras' dtype policy and random seed set first, and the
schedule's cooldown as variables (a time budget sets them while training);
the rest is the state checkpointed beside them: dropout's random state (:func:`dropout_random_state`) and the
current epoch's running sums (:class:`EpochSums`).

Mixed precision: ``"mixed_float16"`` wraps the optimizer in
:class:`AllReplicaLossScaleOptimizer` (dynamic loss scaling);
``"mixed_bfloat16"`` needs no loss scaling.
"""

from typing import Tuple

import keras
import tensorflow as tf

from transformer.model import losses
from transformer.model import optimization
from transformer.model import Transformer


def build(config, strategy, mixed_precision: str, input_vocab_size: int,
          target_vocab_size: int) -> Tuple[keras.Model, keras.optimizers.Optimizer,
                                           Tuple[tf.Variable, tf.Variable]]:
  """``(model, optimizer, cooldown)`` built under ``strategy``: the model from
  ``config.model``, the optimizer's slots created (so that a checkpoint
  restores into them at once, and a mismatch shows at restore), and the
  schedule's ``(cooldown_steps, cooldown_end_step)``, int64 variables that
  start at the config's values and change without a new trace."""
  keras.mixed_precision.set_global_policy(
      "float32" if mixed_precision == "none" else mixed_precision)
  keras.utils.set_random_seed(int(config.training.seed))
  with strategy.scope():
    model = Transformer.from_model_config(config.model, input_vocab_size, target_vocab_size)
    model.build(((None, None), (None, None)))
    cooldown = tuple(tf.Variable(int(value), dtype=tf.int64, trainable=False, name=name)
                     for name, value in (
                         ("budget_cooldown_steps", config.training.cooldown_steps),
                         ("budget_cooldown_end_step", config.training.cooldown_end_step)))
    optimizer = optimization.make_optimizer(config, cooldown)
    if mixed_precision == "mixed_float16":
      optimizer = AllReplicaLossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)
  return model, optimizer, cooldown


class AllReplicaLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
  """``keras.optimizers.LossScaleOptimizer`` that skips on the all-reduced gradients.

  The loss-scale optimizer skips a step and halves the loss scale when the
  gradients are not finite. Under a ``tf.distribute`` strategy, Keras 3
  (``LossScaleOptimizer._tf_apply``, added by keras-team/keras#18691, unchanged
  up to Keras 3.15; no upstream issue filed yet) calls :meth:`check_finite` on
  every replica's OWN gradients and keeps the first replica's answer, assuming
  the gradients were all-reduced already; the wrapped optimizer sums them only
  later. So when only another replica overflowed, the step was applied and
  the summed inf reached the weights of every replica (issue #14). This
  upstream-bug workaround all-reduces the finiteness instead: one non-finite
  gradient on any replica makes the sum non-finite, so every replica (and
  worker) now skips exactly when the summed gradients are not finite. It
  costs one scalar all-reduce per step and keeps the checkpointed variables
  of the class it extends.
  """

  def check_finite(self, grads):
    finite = super().check_finite(grads)
    context = tf.distribute.get_replica_context()
    if context is None:  # cross-replica context: nothing to agree on
      return finite
    overflowed = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                    tf.cast(tf.logical_not(finite), tf.float32))
    return tf.equal(overflowed, 0.0)


def dropout_random_state(model) -> tf.Module:
  """A trackable holding the state of every ``keras.random.SeedGenerator`` of
  ``model``: each dropout layer draws its masks from one, advancing its
  ``(2,)`` int64 state per call, so a resume restores them to repeat the
  uninterrupted run's masks. ``model.variables`` is ``model.weights`` plus them."""
  weights = {id(weight) for weight in model.weights}
  state = tf.Module()
  state.seed_states = [v for v in model.variables if id(v) not in weights]
  return state


class EpochSums(tf.Module):
  """The current epoch's :class:`transformer.model.losses.TokenMetrics` and the
  ``seconds`` spent on its steps, as float64 scalars, checkpointed so that the
  record of an epoch interrupted and resumed covers all of its batches. The
  variables keep the names ``loss``, ``tokens``, ``correct`` and ``seconds``
  that checkpoints hold."""

  def __init__(self):
    super().__init__(name="epoch_sums")
    for name in ("loss", "tokens", "correct", "seconds"):
      setattr(self, name, tf.Variable(0.0, dtype=tf.float64, trainable=False, name=name))

  def read(self) -> Tuple[losses.TokenMetrics, float]:
    """``(metrics, seconds)`` as checkpointed."""
    metrics = losses.TokenMetrics(float(self.loss.numpy()), float(self.tokens.numpy()),
                                  float(self.correct.numpy()))
    return metrics, float(self.seconds.numpy())

  def assign(self, metrics: losses.TokenMetrics, seconds: float) -> None:
    self.loss.assign(metrics.loss_sum)
    self.tokens.assign(metrics.tokens)
    self.correct.assign(metrics.correct)
    self.seconds.assign(seconds)
