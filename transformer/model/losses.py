"""The loss and the metrics (tutorial: "Set up the loss and metrics"; paper §5.4).

Both ignore padding (label 0) and come as (sum, count) pairs, so that a distributed step
divides by the real tokens of the global batch; :class:`TokenMetrics` sums them over batches.
"""

import dataclasses

import keras
from keras import ops


def masked_cross_entropy_sum(labels, logits, label_smoothing: float = 0.0, pad_id: int = 0):
  """Summed token cross-entropy over real tokens, and how many there are.

  ``label_smoothing`` ε_ls puts 1 - ε_ls on the label and spreads ε_ls uniformly over all
  ``vocab`` classes (§5.4), as ``keras.losses.CategoricalCrossentropy`` does.

  Shapes: labels ``(batch, length)`` int, logits ``(batch, length, vocab)``.
  Returns two float32 scalars: ``(loss_sum, token_count)``.
  """
  logits = ops.cast(logits, "float32")
  labels = ops.cast(labels, "int32")
  log_probs = ops.log_softmax(logits, axis=-1)
  # From the flattened log softmax: ops.take_along_axis copies the whole tensor under
  # TensorFlow, 4% of a training step (lab/bench/README.md, "The model in keras.ops").
  flat_labels = ops.reshape(labels, (-1,))
  rows = ops.arange(ops.shape(flat_labels)[0], dtype="int32") * ops.shape(logits)[-1]
  nll = -ops.reshape(ops.take(ops.reshape(log_probs, (-1,)), rows + flat_labels),
                     ops.shape(labels))
  if label_smoothing:
    uniform = -ops.mean(log_probs, axis=-1)
    nll = (1.0 - label_smoothing) * nll + label_smoothing * uniform
  mask = ops.cast(ops.not_equal(labels, pad_id), "float32")
  return ops.sum(nll * mask), ops.sum(mask)


# Registered, so that a model compiled with them, as the tutorial compiles its
# model, loads again from a .keras file.
@keras.saving.register_keras_serializable(package="transformer")
def masked_loss(labels, logits, label_smoothing: float = 0.0, pad_id: int = 0):
  """Mean token cross-entropy over real tokens (the tutorial's ``masked_loss``)."""
  loss_sum, count = masked_cross_entropy_sum(labels, logits, label_smoothing, pad_id)
  return ops.divide_no_nan(loss_sum, count)


def masked_correct_sum(labels, logits, pad_id: int = 0):
  """Number of real tokens whose argmax prediction is right, and how many there are."""
  labels = ops.cast(labels, "int32")
  # The first of the largest logits, as argmax gives it; Keras' argmax is ~4x slower on TF.
  predictions = ops.top_k(logits, 1)[1][..., 0]
  mask = ops.not_equal(labels, pad_id)
  correct = ops.logical_and(mask, ops.equal(predictions, labels))
  return ops.sum(ops.cast(correct, "float32")), ops.sum(ops.cast(mask, "float32"))


@keras.saving.register_keras_serializable(package="transformer")
def masked_accuracy(labels, logits, pad_id: int = 0):
  """Token accuracy over real tokens (the tutorial's ``masked_accuracy``)."""
  correct, count = masked_correct_sum(labels, logits, pad_id)
  return ops.divide_no_nan(correct, count)


@dataclasses.dataclass
class TokenMetrics:
  """Running sums over real target tokens, and the mean loss and accuracy they give.

  One per thing counted (an epoch, a logging interval): :meth:`add` takes a batch's sums as
  :func:`masked_cross_entropy_sum` and :func:`masked_correct_sum` give them; ``+=`` merges.
  """
  loss_sum: float = 0.0  # summed token losses
  tokens: float = 0.0    # real target tokens
  correct: float = 0.0   # tokens whose argmax prediction is the label

  def add(self, loss_sum, tokens, correct) -> "TokenMetrics":
    self.loss_sum += float(loss_sum)
    self.tokens += float(tokens)
    self.correct += float(correct)
    return self

  def __iadd__(self, other: "TokenMetrics") -> "TokenMetrics":
    return self.add(other.loss_sum, other.tokens, other.correct)

  @property
  def loss(self) -> float:
    """Mean token loss (0 before any token)."""
    return self.loss_sum / max(self.tokens, 1.0)

  @property
  def accuracy(self) -> float:
    """Share of tokens predicted right (0 before any token)."""
    return self.correct / max(self.tokens, 1.0)
