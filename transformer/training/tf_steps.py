"""The TensorFlow trainer's steps: one training or evaluation step on every replica.

The loss is normalized by the number of real target tokens of the GLOBAL
batch: each replica computes ``(loss_sum, token_count)``
(:func:`transformer.model.losses.masked_cross_entropy_sum`), the token count is
all-reduced across replicas, and each replica divides its loss sum by the
global count before taking gradients. The optimizer sums the replicas'
gradients, so the update is the gradient of the global mean token loss: one
device and N replicas over the same global batch give the same loss and the
same gradients, even when the replicas' shares of the batch hold different
numbers of real tokens (per-replica averaging would not).

``jit_compile=True`` compiles each replica's forward and backward pass with XLA.
XLA compiles once per input shape, so it needs batches of few shapes:
``pipeline.batch_tokenized(static_shapes=True)``, which ``train.py`` uses with
``--jit_compile`` (batches padded to their length bucket's longest sentence),
and not ``config.training.length_groups`` (see :mod:`transformer.training.tf_step`),
whose sub-batch lengths vary.
"""

from typing import Callable, Dict, List, Optional, Tuple

import keras
import tensorflow as tf

from transformer.model import losses
from transformer.training import tf_distribute
from transformer.training import tf_step as step_lib


class DistributedSteps:
  """``tf.function`` s of ``batch -> (loss_sum, tokens, correct)``, summed over
  the replicas of ``strategy``; traced again only for a new element spec.

  Args:
    model, optimizer: built under ``strategy`` (:func:`transformer.training.tf_build.build`).
    label_smoothing: of the loss (paper §5.4).
    length_groups: sub-batches of similar length per step (:mod:`transformer.training.tf_step`).
    jit_compile: XLA-compile each replica's forward and backward pass.
  """

  def __init__(self, model, optimizer, strategy, *, label_smoothing: float,
               length_groups: int, jit_compile: bool):
    self.model, self.optimizer, self.strategy = model, optimizer, strategy
    self.label_smoothing = label_smoothing
    self.length_groups = length_groups
    self.jit_compile = jit_compile
    self._grad_fn = None  # the step's gradients, XLA-compiled under jit_compile
    self._train_fn = None
    self._train_spec = None
    self._eval_fn = None
    self._eval_spec = None

  def _compute_gradients(self, inputs, labels, global_count):
    scale_loss = (self.optimizer.scale_loss
                  if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer) else None)
    return step_lib.gradients(self.model, inputs, labels, global_count,
                              label_smoothing=self.label_smoothing, scale_loss=scale_loss,
                              groups=self.length_groups)

  def _replica_train_step(self, inputs, labels):
    count = tf.reduce_sum(tf.cast(tf.not_equal(labels, 0), tf.float32))
    global_count = tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, count)
    grads, loss_sum, correct = self._grad_fn(inputs, labels, global_count)
    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    return loss_sum, count, correct

  def _replica_eval_step(self, inputs, labels):
    logits = self.model(inputs, training=False)
    loss_sum, count = losses.masked_cross_entropy_sum(labels, logits, self.label_smoothing)
    correct, _ = losses.masked_correct_sum(labels, logits)
    return loss_sum, count, correct

  def _distributed_step(self, replica_step, element_spec) -> Callable[..., Tuple]:
    """A ``tf.function`` running ``replica_step(inputs, labels)`` on every
    replica and summing its outputs over them."""
    def step(batch):
      inputs, labels = batch
      per_replica = self.strategy.run(replica_step, args=(inputs, labels))
      return tuple(self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                   for v in per_replica)
    # The signature has the dataset's unknown (None) batch and length
    # dimensions, so varying batch shapes do not retrace the step.
    return tf.function(step, input_signature=[element_spec])

  def train_fn(self, element_spec):
    """The training step for distributed batches of ``element_spec``."""
    if self._train_fn is None or self._train_spec != element_spec:
      self._grad_fn = (tf.function(self._compute_gradients, jit_compile=True)
                       if self.jit_compile else self._compute_gradients)
      self._train_fn = self._distributed_step(self._replica_train_step, element_spec)
      self._train_spec = element_spec
    return self._train_fn

  def eval_fn(self, element_spec):
    """The evaluation step (no dropout) for distributed batches of ``element_spec``."""
    if self._eval_fn is None or self._eval_spec != element_spec:
      self._eval_fn = self._distributed_step(self._replica_eval_step, element_spec)
      self._eval_spec = element_spec
    return self._eval_fn

  def train_on_batches(self, dataset, max_steps: Optional[int] = None) -> List[Dict]:
    """Runs one optimizer step per batch of ``dataset`` (global batches).

    A low-level entry point (no checkpoints, signals or summaries); returns one
    ``{"loss", "tokens", "correct"}`` record per step, the loss being the mean
    over the global batch's real tokens.
    """
    dist = tf_distribute.distribute_dataset(self.strategy, dataset)
    fn = self.train_fn(dist.element_spec)
    records = []
    for batch in dist:
      if max_steps is not None and len(records) >= max_steps:
        break
      batch_metrics = losses.TokenMetrics().add(*fn(batch))
      records.append({"loss": batch_metrics.loss, "tokens": batch_metrics.tokens,
                      "correct": batch_metrics.correct})
    return records

  def evaluate(self, dataset) -> losses.TokenMetrics:
    """The sums over ``dataset`` (no dropout)."""
    dist = tf_distribute.distribute_dataset(self.strategy, dataset)
    fn = self.eval_fn(dist.element_spec)
    metrics = losses.TokenMetrics()
    for batch in dist:
      metrics.add(*fn(batch))
    return metrics
