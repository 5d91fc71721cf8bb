"""Measurements of the JAX trainer (transformer/training/jax_steps.py, jax_engine.py,
jax_checkpointing.py), run as ``KERAS_BACKEND=jax python jax_trainer_checks.py
<prepared folder> <work folder> [measurement,...]`` by
tests/backends/test_jax_trainer_state.py, which asserts on them. Prints one JSON
object (the named measurements, or all); measures, judges nothing.

* ``step_on``: one SGD step (rate 1, dropout off) on a batch, on that batch
  twice over, and on it with rows of padding added: the weights' change of
  each, which a loss that is the mean over the batch's real tokens keeps equal.
* ``dropout``: the losses of two steps on one batch at a learning rate of 0
  with dropout on, each step given the values (dropout random state
  included) the one before it returned.
* ``epoch``: the steps of an epoch of :data:`PARTIAL_PAIRS` pairs, which do
  not fill its last batch.
* ``resume``: a run of 4 steps straight, and one stopped after 2 and resumed
  to 4 in a new trainer: the largest difference of their weights, optimizer
  and non-trainable variables, and their step counts.
* ``stacks``: on the third argument's pairs (lengths that make batches of 3
  shapes with bucketing), an epoch at 1 step a dispatch, at 8, and at 8
  stopped after 5 steps and resumed: the differences of the last two from the
  first, and the lines that said what was compiled.
"""

import json
import logging
from pathlib import Path
import sys

import jax
import keras
import numpy as np

from configs import tiny
from transformer.data import shards
from transformer.model import Transformer
from transformer.training import jax_stacks
from transformer.training import jax_steps
from transformer.training import jax_engine

VOCAB = 300  # helpers.prepared.random_prepared_folder's
PARTIAL_PAIRS = 61  # batches of 16: 3 full and one of 13 pairs


def config(dropout_rate=0.0, train_steps=0, steps_per_dispatch=1, bucketing=False):
  result = tiny.get_config()
  result.model.dropout_rate = dropout_rate
  result.training.train_steps = train_steps
  result.training.steps_per_dispatch = steps_per_dispatch
  result.data.bucketing = bucketing  # batches of several shapes: stacks their runs do not fill
  result.training.checkpoint_every_steps = 1000
  return result


def values_of(model, optimizer):
  """The step's ``(trainable, non_trainable, optimizer)`` values, as copies."""
  return tuple([jax.numpy.array(v.value) for v in variables] for variables in (
      model.trainable_variables, model.non_trainable_variables, optimizer.variables))


def sgd_steps(dropout_rate, learning_rate):
  """A seeded tiny model, an SGD optimizer and their compiled training step."""
  jax_steps.set_random_seed(0)
  model = Transformer.from_model_config(config(dropout_rate).model, VOCAB, VOCAB)
  model.build(((None, None), (None, None)))
  optimizer = keras.optimizers.SGD(learning_rate)
  optimizer.build(model.trainable_variables)
  train_step, _ = jax_steps.step_functions(model, optimizer, smoothing=0.1)
  return model, optimizer, jax.jit(train_step, donate_argnums=0)


def update(train_step, values, batch):
  """The change of the trainable weights in one step (the step donates ``values``)."""
  before = [np.asarray(value) for value in values[0]]
  new_values, _ = train_step(values, batch)
  return [np.asarray(new) - old for new, old in zip(new_values[0], before)]


def step_on(batch):
  model, optimizer, train_step = sgd_steps(0.0, 1.0)
  (source, target_input), labels = batch
  def stacked(*arrays):
    return np.concatenate(arrays)
  padding = np.zeros((3, source.shape[1]), source.dtype)
  changes = {
      "once": update(train_step, values_of(model, optimizer), batch),
      "twice": update(train_step, values_of(model, optimizer), (
          (stacked(source, source), stacked(target_input, target_input)),
          stacked(labels, labels))),
      "padded": update(train_step, values_of(model, optimizer), (
          (stacked(source, padding), stacked(target_input, padding)),
          stacked(labels, padding))),
  }
  once = changes["once"]
  return {"largest_change": max(float(np.abs(c).max()) for c in once),
          **{f"{name}_differs_by": max(float(np.abs(a - b).max()) for a, b in zip(once, other))
             for name, other in changes.items() if name != "once"}}


def dropout(batch):
  model, optimizer, train_step = sgd_steps(0.5, 0.0)
  values = values_of(model, optimizer)
  losses = []
  for _ in range(2):
    values, (loss_sum, tokens, _) = train_step(values, batch)
    losses.append(float(loss_sum) / float(tokens))
  return {"losses": losses}


def trained(prepared, model_dir, train_steps, pairs=0, **settings):
  """A Trainer of ``config`` (with ``settings``) in ``model_dir``, restored,
  fitted to ``train_steps`` (0: one epoch) on the first ``pairs`` training
  pairs (0: all); and what its ``fit`` returned."""
  run_config = config(dropout_rate=0.3, train_steps=train_steps, **settings)
  trainer = jax_engine.JaxTrainer(run_config, input_vocab_size=VOCAB, target_vocab_size=VOCAB,
                               model_dir=model_dir, progress=False)
  trainer.restore()
  split = shards.load_split(prepared, "train").take(pairs).trimmed(run_config.data.max_tokens)
  return trainer, trainer.fit(split)


def epoch(prepared, work):
  _, result = trained(prepared, work / "epoch", 0, pairs=PARTIAL_PAIRS)
  (record,) = result.history
  return {"pairs": PARTIAL_PAIRS, "batch_size": config().data.batch_size,
          "steps": record["steps_in_epoch"], "complete": record["complete"]}


def state_of(trainer):
  return {"weights": trainer.model.trainable_variables,
          "optimizer": trainer.engine.optimizer.variables,
          "non_trainable": trainer.model.non_trainable_variables}


def differences(trainer, other):
  """The largest difference of each kind of variable of two trainers."""
  return {name: max(float(np.abs(np.asarray(a.value) - np.asarray(b.value)).max())
                    for a, b in zip(ours, theirs))
          for (name, ours), theirs in zip(state_of(trainer).items(), state_of(other).values())}


def resume(prepared, work):
  straight, _ = trained(prepared, work / "straight", 4)
  trained(prepared, work / "resumed", 2)
  resumed, _ = trained(prepared, work / "resumed", 4)
  return {"differences": differences(straight, resumed), "steps": [straight.step, resumed.step]}


def stacks(prepared, work):
  """An epoch of batches of 3 shapes at 1 step a dispatch, at 8, and at 8
  stopped after 5 steps (mid-stack) and resumed: their differences from the
  first, their steps, the epoch's batch shapes and the compile lines."""
  compiled = []
  handler = logging.Handler()
  handler.emit = lambda record: compiled.append(record.getMessage())
  logging.getLogger("absl").addHandler(handler)
  logging.getLogger("absl").setLevel(logging.INFO)  # train.py's console shows INFO lines
  one, _ = trained(prepared, work / "one", 0, bucketing=True)
  eight, result = trained(prepared, work / "eight", 0, bucketing=True, steps_per_dispatch=8)
  trained(prepared, work / "stopped", 5, bucketing=True, steps_per_dispatch=8)
  resumed, _ = trained(prepared, work / "stopped", 0, bucketing=True, steps_per_dispatch=8)
  logging.getLogger("absl").removeHandler(handler)
  split = shards.load_split(prepared, "train").trimmed(config().data.max_tokens)
  batches = shards.epoch_batches(split, config(bucketing=True).data, seed=0)
  return {"eight": differences(one, eight), "resumed": differences(one, resumed),
          "steps": [one.step, eight.step, resumed.step], "record": result.history[-1],
          "shapes": sorted({shards_shape(batch) for batch in batches}),
          "batches": [shards_shape(batch) for batch in jax_stacks.grouped_by_shape(batches)],
          "compiled": [line for line in compiled if line.startswith("compiled")]}


def shards_shape(batch):
  """A batch's ``rows × length``, as the compile lines say it."""
  return " × ".join(map(str, batch[1].shape))


MEASUREMENTS = ("step_on", "dropout", "epoch", "resume", "stacks")


def main(prepared, work, varied, names=MEASUREMENTS):
  split = shards.load_split(prepared, "train").trimmed(config().data.max_tokens)
  batch = shards.epoch_batches(split, config().data, seed=0)[0]
  measure = {"step_on": lambda: step_on(batch), "dropout": lambda: dropout(batch),
             "epoch": lambda: epoch(prepared, work), "resume": lambda: resume(prepared, work),
             "stacks": lambda: stacks(varied, work)}
  print(json.dumps({name: measure[name]() for name in names}))


if __name__ == "__main__":
  main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]),
       *([sys.argv[4].split(",")] if len(sys.argv) > 4 else []))
