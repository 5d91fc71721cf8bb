"""The TensorFlow engine's steps on every replica (paper §5.3-5.4).

The loss sums the token cross-entropy over a replica's share of the batch and divides
by the real target tokens of the GLOBAL batch (all-reduced): one device and N replicas
take the same step, whatever real tokens each share holds.

``groups > 1`` (``config.training.length_groups``) sorts a batch by length, splits it
into that many sub-batches, cuts each one's trailing padding and sums their gradients,
one ``tf.while_loop`` iteration a sub-batch: the same gradient on fewer padded positions
(``tests/unit/test_masking.py``), in shapes that ``jit_compile`` cannot take.

Shapes: ``source`` ``(batch, src_len)``, ``target_input`` and ``labels``
``(batch, tgt_len)``, int ids with 0 as padding at the end of each row."""

from typing import Callable, Tuple

import keras
import tensorflow as tf

from transformer.model import losses
from transformer.training import tf_distribute


def trimmed_length(ids, pad_id: int = 0):
  """Columns left once trailing padding is cut: an int32 scalar, at least 1 (so that
  an empty sub-batch keeps a valid shape)."""
  positions = tf.range(1, tf.shape(ids)[1] + 1)
  last_real = tf.where(tf.not_equal(ids, pad_id), positions[tf.newaxis, :], 0)
  return tf.maximum(tf.reduce_max(last_real), 1)


def length_order(source, labels, pad_id: int = 0):
  """Row indices ``(batch,)`` sorted by real source + target tokens, shortest first."""
  lengths = (tf.reduce_sum(tf.cast(tf.not_equal(source, pad_id), tf.int32), axis=1)
             + tf.reduce_sum(tf.cast(tf.not_equal(labels, pad_id), tf.int32), axis=1))
  return tf.argsort(lengths, stable=True)


def sub_batch(source, target_input, labels, rows, pad_id: int = 0):
  """The ``rows`` of the batch, each side cut to the sub-batch's longest sentence."""
  source = tf.gather(source, rows)
  target_input, labels = tf.gather(target_input, rows), tf.gather(labels, rows)
  target_length = tf.maximum(trimmed_length(target_input, pad_id),
                             trimmed_length(labels, pad_id))
  return (source[:, :trimmed_length(source, pad_id)], target_input[:, :target_length],
          labels[:, :target_length])


def group_rows(order, group, groups: int):
  """Row indices of sub-batch ``group`` of ``groups`` near-equal consecutive
  parts of ``order`` (empty when there are fewer rows)."""
  batch = tf.shape(order)[0]
  return order[(batch * group) // groups:(batch * (group + 1)) // groups]


def gradients(model, inputs, labels, global_count, *, label_smoothing: float = 0.0,
              scale_loss=None, groups: int = 1):
  """``(gradients, loss_sum, correct)`` of ``loss_sum / global_count`` for
  ``model.trainable_variables``; ``loss_sum`` and ``correct`` are float32 sums
  over the whole batch. ``scale_loss``: a ``LossScaleOptimizer``'s, or None."""
  variables = model.trainable_variables

  def one_pass(source, target_input, labels):
    with tf.GradientTape() as tape:
      logits = model((source, target_input), training=True)
      loss_sum, _ = losses.masked_cross_entropy_sum(labels, logits, label_smoothing)
      # This replica's share of the global mean: the optimizer sums the replicas' gradients.
      loss = loss_sum / tf.maximum(global_count, 1.0)
      if scale_loss is not None:
        loss = scale_loss(loss)
    correct, _ = losses.masked_correct_sum(labels, logits)
    return tape.gradient(loss, variables), loss_sum, correct

  source, target_input = inputs
  if groups == 1:
    return one_pass(source, target_input, labels)

  order = length_order(source, labels)

  def add_group(group, total_grads, total_loss, total_correct):
    grads, loss_sum, correct = one_pass(
        *sub_batch(source, target_input, labels, group_rows(order, group, groups)))
    # Dense sums: an embedding's gradient is IndexedSlices, one per sub-batch.
    return (group + 1, [total + tf.convert_to_tensor(g) for total, g in zip(total_grads, grads)],
            total_loss + loss_sum, total_correct + correct)

  # A loop, not a copy of the step per group: traced once, one sub-batch's activations alive.
  _, total_grads, total_loss, total_correct = tf.while_loop(
      lambda group, *_: group < groups, add_group,
      (tf.constant(0), [tf.zeros(v.shape, v.dtype) for v in variables], tf.constant(0.0),
       tf.constant(0.0)),
      parallel_iterations=1)
  return total_grads, total_loss, total_correct


class DistributedSteps:
  """``tf.function`` s of a distributed ``batch -> (loss_sum, tokens, correct)``,
  summed over the replicas of ``strategy``; traced again only for a new element spec;
  ``length_groups`` and ``jit_compile``: see the module's doc."""

  def __init__(self, model, optimizer, strategy, *, label_smoothing: float,
               length_groups: int, jit_compile: bool):
    self.model, self.optimizer, self.strategy = model, optimizer, strategy
    self.label_smoothing, self.length_groups = label_smoothing, length_groups
    self.jit_compile = jit_compile
    self._traced = {}  # kind -> (element spec, its step)

  def _compute_gradients(self, inputs, labels, global_count):
    scale_loss = (self.optimizer.scale_loss
                  if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer) else None)
    return gradients(self.model, inputs, labels, global_count,
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

  def step(self, kind: str, element_spec) -> Callable[..., Tuple]:
    """The ``kind`` step ("train" or "eval") for batches of ``element_spec``."""
    traced = self._traced.get(kind)
    if traced is not None and traced[0] == element_spec:
      return traced[1]
    if kind == "train":
      self._grad_fn = (tf.function(self._compute_gradients, jit_compile=True)
                       if self.jit_compile else self._compute_gradients)
    replica_step = self._replica_train_step if kind == "train" else self._replica_eval_step

    def step(batch):
      inputs, labels = batch
      per_replica = self.strategy.run(replica_step, args=(inputs, labels))
      return tuple(self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                   for v in per_replica)
    # The dataset's unknown (None) batch and length dimensions: no retrace per shape.
    self._traced[kind] = (element_spec, tf.function(step, input_signature=[element_spec]))
    return self._traced[kind][1]

  def evaluate(self, dataset) -> losses.TokenMetrics:
    """The sums over ``dataset`` (no dropout)."""
    dist = tf_distribute.distribute_dataset(self.strategy, dataset)
    fn = self.step("eval", dist.element_spec)
    metrics = losses.TokenMetrics()
    for batch in dist:
      metrics.add(*fn(batch))
    return metrics
