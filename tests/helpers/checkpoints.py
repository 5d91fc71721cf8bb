"""The Checkpoints of a small Dense model, for tests of checkpointing itself."""

import keras
import tensorflow as tf

from transformer.training import tf_checkpointing


def small_checkpoints(model_dir):
  """(Checkpoints of ``model_dir``, the Dense model, its Adam, the position
  variables [epoch, step_in_epoch, steps_per_epoch]), keeping 5."""
  model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
  optimizer = keras.optimizers.Adam()
  optimizer.build(model.trainable_variables)
  position = [tf.Variable(0, dtype=tf.int64) for _ in range(3)]
  checkpoints = tf_checkpointing.Checkpoints(
      model_dir, tf.distribute.get_strategy(), keep=5, model=model, optimizer=optimizer,
      epoch=position[0], step_in_epoch=position[1], steps_per_epoch=position[2])
  return checkpoints, model, optimizer, position
