"""The arithmetic of one training step: its gradients (paper §5.3-5.4).

The gradient of the token cross-entropy summed over a batch and divided by the
real target tokens of the global batch (see :mod:`transformer.training.tf_engine`).

A batch of random sentences is padded to its longest sentence: with the
tutorial's ``padded_batch(64)`` most positions are padding, and every layer
computes on them. ``groups > 1`` sorts the batch's sentences by length, splits
them into that many sub-batches, cuts each sub-batch's trailing padding, and
sums the sub-batches' gradients. The loss is a sum over real tokens and padding
changes nothing at real positions (``tests/unit/test_masking.py``), so this is the
same gradient, computed on fewer positions; only dropout draws other random
numbers. The sub-batches are the iterations of one ``tf.while_loop``, run one
after the other: the step is traced once whatever the number of groups.

Shapes: ``source`` ``(batch, src_len)``, ``target_input`` and ``labels``
``(batch, tgt_len)``, int ids with 0 as padding at the end of each row.
"""

import tensorflow as tf

from transformer.model import losses


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
  """The ``rows`` of the batch, each side cut to the sub-batch's longest sentence:
  ``(len(rows), src_len')``, ``(len(rows), tgt_len')`` twice."""
  source = tf.gather(source, rows)
  target_input, labels = tf.gather(target_input, rows), tf.gather(labels, rows)
  target_length = tf.maximum(trimmed_length(target_input, pad_id),
                             trimmed_length(labels, pad_id))
  return (source[:, :trimmed_length(source, pad_id)], target_input[:, :target_length],
          labels[:, :target_length])


def group_rows(order, group, groups: int):
  """Row indices of sub-batch ``group`` when the rows in ``order`` are split into
  ``groups`` near-equal consecutive parts (empty when there are fewer rows)."""
  batch = tf.shape(order)[0]
  return order[(batch * group) // groups:(batch * (group + 1)) // groups]


def gradients(model, inputs, labels, global_count, *, label_smoothing: float = 0.0,
              scale_loss=None, groups: int = 1):
  """Gradients of ``loss_sum / global_count`` for ``model.trainable_variables``.

  Args:
    inputs: ``(source, target_input)``; labels: the shifted targets.
    global_count: real target tokens of the global batch (float32 scalar).
    scale_loss: applied to the loss before differentiating (a
      ``LossScaleOptimizer``'s ``scale_loss`` under float16), or None.
    groups: sub-batches of similar length to compute the batch in (see the
      module docstring); 1 computes the batch as it is.

  Returns ``(gradients, loss_sum, correct)``: ``loss_sum`` and ``correct`` (real
  tokens predicted right) are float32 sums over the whole batch.
  """
  variables = model.trainable_variables

  def one_pass(source, target_input, labels):
    with tf.GradientTape() as tape:
      logits = model((source, target_input), training=True)
      loss_sum, _ = losses.masked_cross_entropy_sum(labels, logits, label_smoothing)
      # This replica's share of the global mean: summed over replicas (the
      # optimizer all-reduces gradients with SUM) it is the global mean.
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

  # A loop, not one copy of the step per group: the step is traced once, and
  # with one iteration at a time only one sub-batch's activations are alive.
  _, total_grads, total_loss, total_correct = tf.while_loop(
      lambda group, *_: group < groups, add_group,
      (tf.constant(0), [tf.zeros(v.shape, v.dtype) for v in variables], tf.constant(0.0),
       tf.constant(0.0)),
      parallel_iterations=1)
  return total_grads, total_loss, total_correct
