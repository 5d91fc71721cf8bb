"""Length-grouped training steps (transformer/training/step.py): the same gradient on fewer
padded positions, whatever the number of groups."""

import numpy as np
import pytest
import tensorflow as tf

from transformer.training import step
from transformer.config import ConfigError, validate_config

VOCAB = 50
sub_batch = step.sub_batch


def ragged_batch(lengths, vocab=VOCAB, seed=0):
  """Rows of ids 1..vocab-1 of the given lengths, zero-padded to the longest."""
  rng = np.random.default_rng(seed)
  width = max(lengths)
  ids = np.zeros((len(lengths), width), np.int64)
  for row, length in enumerate(lengths):
    ids[row, :length] = rng.integers(1, vocab, length)
  return ids


@pytest.fixture(scope="module")
def batch():
  source = ragged_batch([3, 17, 5, 9, 1, 12, 4], seed=1)
  target = ragged_batch([6, 2, 14, 8, 3, 11, 5], seed=2)
  # Decoder input and labels as the pipeline makes them: one token apart.
  return tf.constant(source), tf.constant(target[:, :-1]), tf.constant(target[:, 1:])


@pytest.fixture(scope="module")
def model(make_model):
  # Only dropout may differ between groupings.
  return make_model(vocab_sizes=(VOCAB, VOCAB), dropout_rate=0.0)


def test_sub_batches_hold_every_real_token_once_and_less_padding(batch):
  source, target_input, labels = batch
  order = step.length_order(source, labels)
  groups = [step.sub_batch(source, target_input, labels, step.group_rows(order, group, 3))
            for group in range(3)]
  rows = lambda ids: sorted(tuple(int(t) for t in row if t) for row in ids.numpy())
  for whole, part in zip(batch, zip(*groups)):
    assert rows(whole) == sorted(sum((rows(p) for p in part), []))
  padded = sum(int(tf.size(s)) + int(tf.size(t)) for s, t, _ in groups)
  assert padded < int(tf.size(source)) + int(tf.size(target_input))
  for s, t, l in groups:  # Each cut to its own longest sentence, no further.
    assert np.any(s.numpy()[:, -1]) and np.any(l.numpy()[:, -1] | t.numpy()[:, -1])


def test_trimmed_length_keeps_one_column_of_an_all_padding_batch():
  assert int(step.trimmed_length(tf.zeros((0, 5), tf.int64))) == 1
  assert int(step.trimmed_length(tf.constant([[4, 0, 0], [1, 2, 0]]))) == 2


def test_grouped_gradients_equal_the_whole_batch(model, batch):
  source, target_input, labels = batch
  count = tf.reduce_sum(tf.cast(labels != 0, tf.float32))

  def run(groups):  # Eagerly: the Trainer's graph path is the next test's.
    return step.gradients(model, (source, target_input), labels, count, label_smoothing=0.1,
                           groups=groups)

  whole_grads, whole_loss, whole_correct = run(1)
  grads, loss, correct = run(9)  # 9 groups > 7 rows: two are empty.
  assert float(loss) == pytest.approx(float(whole_loss), rel=1e-5)
  assert float(correct) == float(whole_correct)
  for variable, a, b in zip(model.trainable_variables, whole_grads, grads):
    np.testing.assert_allclose(tf.convert_to_tensor(b), tf.convert_to_tensor(a),
                               rtol=1e-4, atol=1e-6, err_msg=variable.path)


@pytest.mark.slow
def test_trainer_steps_with_groups_match_whole_batches(tiny_config, make_trainer, batch,
                                                      monkeypatch):
  config = tiny_config(dropout_rate=0.0)
  dataset = tf.data.Dataset.from_tensors(((batch[0], batch[1]), batch[2])).repeat(3)
  traced_sub_batches = []
  monkeypatch.setattr(step, "sub_batch", lambda *args: traced_sub_batches.append(args[-1])
                      or sub_batch(*args))
  losses = {}
  for groups in (1, 2):
    config.training.length_groups = groups
    trainer = make_trainer(config, (VOCAB, VOCAB))
    losses[groups] = [r["loss"] for r in trainer.train_on_batches(dataset)]
  # The grouped Trainer did split its batches, in a loop traced once.
  assert len(traced_sub_batches) == 1
  np.testing.assert_allclose(losses[2], losses[1], rtol=1e-4)
  assert losses[1][2] < losses[1][0]  # Three real updates, not the same step thrice.


@pytest.mark.slow
def test_xla_compiled_steps_match_plain_steps(tiny_config, make_trainer, batch):
  # train.py --jit_compile, the other speed switch: the same losses and weights.
  config = tiny_config(dropout_rate=0.0)
  config.training.length_groups = 1
  dataset = tf.data.Dataset.from_tensors(((batch[0], batch[1]), batch[2])).repeat(3)
  losses, logits = {}, {}
  for jit_compile in (False, True):
    trainer = make_trainer(config, (VOCAB, VOCAB), jit_compile=jit_compile)
    losses[jit_compile] = [r["loss"] for r in trainer.train_on_batches(dataset)]
    logits[jit_compile] = trainer.model((batch[0], batch[1]), training=False).numpy()
  np.testing.assert_allclose(losses[True], losses[False], rtol=1e-4)
  assert losses[False][2] < losses[False][0]
  # Compared through the trained model's logits, not weight by weight: Adam
  # moves a weight whose gradient is ~0 by about the learning rate either way.
  np.testing.assert_allclose(logits[True], logits[False], rtol=1e-3, atol=1e-3)


def test_length_groups_refuse_zero_and_jit_compile(tiny_config, make_trainer):
  config = tiny_config()
  config.training.length_groups = 0
  with pytest.raises(ConfigError, match=r"config\.training\.length_groups: must be > 0"):
    validate_config(config)
  config.training.length_groups = 2
  with pytest.raises(ValueError, match="jit_compile needs static shapes"):
    make_trainer(config, (VOCAB, VOCAB), jit_compile=True)
