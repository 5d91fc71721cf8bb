r"""One TensorFlow training step of ``configs/cpu_2h.py``'s model, timed: the
checkout in the current folder, so that two checkouts compare side by side.

  (cd "$OLD" && taskset -c 0 python "$NEW/bench/step_time.py" 30) &
  (cd "$NEW" && taskset -c 1 python lab/bench/step_time.py 30) & wait

Fixed random batches of 64 × 32 tokens (a quarter of each row's end padded
at most), vocabulary 8,000, one thread; forward, loss with label smoothing,
the accuracy metric, backward and Adam, under ``tf.function``. Two warm-up
steps, then the given number of timed steps; prints a JSON line with the
median and fastest step in seconds. Swap the cores between rounds: the two
cores of a machine need not be equally fast.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["TF_NUM_INTRAOP_THREADS"] = "1"
os.environ["TF_NUM_INTEROP_THREADS"] = "1"
sys.path.insert(0, os.getcwd())  # the checkout being timed, not this file's

import keras  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from configs import cpu_2h  # pylint: disable=g-import-not-at-top,wrong-import-position
try:  # the package's layout since the move into folders
  from transformer.model import losses  # pylint: disable=g-import-not-at-top,wrong-import-position
except ImportError:  # a checkout from before it, timed side by side
  from transformer import losses  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.model import Transformer  # pylint: disable=g-import-not-at-top,wrong-import-position

VOCAB, BATCH, LENGTH = 8000, 64, 32


def batches():
  rng = np.random.default_rng(0)
  source = rng.integers(3, VOCAB, (BATCH, LENGTH))
  target = rng.integers(3, VOCAB, (BATCH, LENGTH + 1))
  for row in range(BATCH):
    cut = LENGTH - rng.integers(0, LENGTH // 4)
    source[row, cut:] = 0
    target[row, cut + 1:] = 0
  return tf.constant(source, tf.int32), tf.constant(target, tf.int32)


def main(steps: int):
  config = cpu_2h.get_config()
  model = Transformer.from_model_config(config.model, VOCAB, VOCAB)
  optimizer = keras.optimizers.Adam(1e-4)
  source, target = batches()
  model((source, target[:, :-1]))
  optimizer.build(model.trainable_variables)

  @tf.function
  def step(source, target):
    with tf.GradientTape() as tape:
      logits = model((source, target[:, :-1]), training=True)
      loss_sum, count = losses.masked_cross_entropy_sum(target[:, 1:], logits, 0.1)
      correct, _ = losses.masked_correct_sum(target[:, 1:], logits)
      loss = loss_sum / count
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss, correct

  for _ in range(2):
    step(source, target)
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    float(step(source, target)[0])
    times.append(time.perf_counter() - start)
  print(json.dumps({"checkout": os.getcwd(), "median": float(np.median(times)),
                    "fastest": min(times), "steps": steps}))


if __name__ == "__main__":
  main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
