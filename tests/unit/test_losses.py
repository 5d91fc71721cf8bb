"""Masked cross-entropy with label smoothing (§5.4) and masked accuracy."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer.model.losses import (masked_accuracy, masked_correct_sum,
                                masked_cross_entropy_sum, masked_loss)


def example(seed=0, vocab=11):
  rng = np.random.default_rng(seed)
  labels = rng.integers(1, vocab, (3, 5))
  labels[0, 3:] = 0
  labels[2, 1:] = 0
  logits = rng.normal(size=(3, 5, vocab)).astype(np.float32) * 3
  return labels, logits


def tutorial_masked_loss(labels, logits):
  """The tutorial's masked_loss, written out with Keras' own loss."""
  loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)(
      labels, logits)
  mask = tf.cast(labels != 0, loss.dtype)
  return tf.reduce_sum(loss * mask) / tf.reduce_sum(mask)


def test_no_smoothing_equals_the_tutorials_masked_loss():
  labels, logits = example()
  assert float(masked_loss(labels, logits)) == pytest.approx(
      float(tutorial_masked_loss(labels, logits)), rel=1e-6)


def test_label_smoothing_matches_keras_categorical_crossentropy():
  labels, logits = example(1)
  smoothed = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1,
                                                  reduction=None)(
      tf.one_hot(labels, 11), logits).numpy()
  mask = labels != 0
  expected = smoothed[mask].mean()
  assert float(masked_loss(labels, logits, label_smoothing=0.1)) == pytest.approx(
      expected, rel=1e-5)


def test_hand_computed_smoothed_loss():
  # Two classes, logits (0, ln 3): p = (1/4, 3/4). Label 1, eps 0.1:
  # target = (0.05, 0.95); loss = -(0.05 ln 1/4 + 0.95 ln 3/4).
  logits = np.array([[[0.0, math.log(3.0)]]], np.float32)
  labels = np.array([[1]])
  expected = -(0.05 * math.log(0.25) + 0.95 * math.log(0.75))
  assert float(masked_loss(labels, logits, label_smoothing=0.1, pad_id=-1)) == pytest.approx(
      expected, rel=1e-6)


def test_padding_contributes_nothing():
  labels, logits = example(2)
  loss_sum, count = masked_cross_entropy_sum(labels, logits)
  changed = logits.copy()
  changed[labels == 0] = 100.0
  assert float(masked_cross_entropy_sum(labels, changed)[0]) == pytest.approx(float(loss_sum))
  assert float(count) == (labels != 0).sum()


def test_masked_accuracy_counts_real_tokens_only():
  labels = np.array([[3, 1, 0], [2, 0, 0]])
  logits = np.zeros((2, 3, 4), np.float32)
  logits[0, 0, 3] = logits[0, 1, 2] = logits[1, 0, 2] = 1.0  # right, wrong, right
  logits[0, 2, 0] = logits[1, 1, 0] = logits[1, 2, 0] = 5.0  # padding "right"
  assert float(masked_accuracy(labels, logits)) == pytest.approx(2 / 3)
  correct, count = masked_correct_sum(labels, logits)
  assert (float(correct), float(count)) == (2.0, 3.0)


def test_a_tie_goes_to_the_first_largest_logit_as_argmax():
  # Two classes share the largest logit; the prediction is the first of them,
  # so a label on the second is wrong (an untrained model's equal logits too).
  logits = np.array([[[1.0, 3.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]]], np.float32)
  assert float(masked_correct_sum(np.array([[1, 1]]), logits)[0]) == 1.0
  assert float(masked_correct_sum(np.array([[2, 2]]), logits)[0]) == 0.0
