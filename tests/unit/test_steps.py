"""Length-grouped training steps (transformer/training/tf_step.py): the same gradient on fewer
padded positions, whatever the number of groups."""

import numpy as np
import pytest
import tensorflow as tf

from transformer.training import tf_step
from transformer.config import ConfigError, validate_config

VOCAB = 50  # uneven_batch's ids are 1..49


@pytest.fixture(scope="module")
def model(make_model):
  # Only dropout may differ between groupings.
  return make_model(vocab_sizes=(VOCAB, VOCAB), dropout_rate=0.0)


def test_sub_batches_hold_every_real_token_once_and_less_padding(uneven_batch):
  source, target_input, labels = uneven_batch
  order = tf_step.length_order(source, labels)
  groups = [tf_step.sub_batch(source, target_input, labels, tf_step.group_rows(order, group, 3))
            for group in range(3)]
  rows = lambda ids: sorted(tuple(int(t) for t in row if t) for row in ids.numpy())
  for whole, part in zip(uneven_batch, zip(*groups)):
    assert rows(whole) == sorted(sum((rows(p) for p in part), []))
  padded = sum(int(tf.size(s)) + int(tf.size(t)) for s, t, _ in groups)
  assert padded < int(tf.size(source)) + int(tf.size(target_input))
  for s, t, l in groups:  # Each cut to its own longest sentence, no further.
    assert np.any(s.numpy()[:, -1]) and np.any(l.numpy()[:, -1] | t.numpy()[:, -1])


def test_trimmed_length_keeps_one_column_of_an_all_padding_batch():
  assert int(tf_step.trimmed_length(tf.zeros((0, 5), tf.int64))) == 1
  assert int(tf_step.trimmed_length(tf.constant([[4, 0, 0], [1, 2, 0]]))) == 2


def test_grouped_gradients_equal_the_whole_batch(model, uneven_batch):
  source, target_input, labels = uneven_batch
  count = tf.reduce_sum(tf.cast(labels != 0, tf.float32))

  def run(groups):  # Eagerly: the Trainer's graph path: tests/integration.
    return tf_step.gradients(model, (source, target_input), labels, count, label_smoothing=0.1,
                           groups=groups)

  whole_grads, whole_loss, whole_correct = run(1)
  grads, loss, correct = run(9)  # 9 groups > 7 rows: two are empty.
  assert float(loss) == pytest.approx(float(whole_loss), rel=1e-5)
  assert float(correct) == float(whole_correct)
  for variable, a, b in zip(model.trainable_variables, whole_grads, grads):
    np.testing.assert_allclose(tf.convert_to_tensor(b), tf.convert_to_tensor(a),
                               rtol=1e-4, atol=1e-6, err_msg=variable.path)


def test_length_groups_refuse_zero_and_jit_compile(tiny_config, make_trainer):
  config = tiny_config()
  config.training.length_groups = 0
  with pytest.raises(ConfigError, match=r"config\.training\.length_groups: must be > 0"):
    validate_config(config)
  config.training.length_groups = 2
  with pytest.raises(ValueError, match="jit_compile needs static shapes"):
    make_trainer(config, (VOCAB, VOCAB), jit_compile=True)
