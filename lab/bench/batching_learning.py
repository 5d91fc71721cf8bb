"""Validation loss against real target tokens seen: today's batches against length buckets.

Trains the same model (the tutorial's, sized down) under JAX with the JAX
trainer's steps, once on ``configs/tutorial.py``'s batches (random batches of
64 sentences) and once on ``configs/tutorial.py:gpu``'s (explicit length buckets
with a token budget), for the same epochs, so for the same real target tokens,
one arm after the other. The validation loss is measured every
``--evaluations_per_epoch``-th of an epoch's real target tokens; both arms
start from the same weights and see every pair once an epoch.

  KERAS_BACKEND=jax taskset -c 1 python lab/bench/batching_learning.py \\
      --data=<prepared folder> --output=<folder>

writes ``results.json`` (the curves, each arm's steps, shapes and real-token
fraction, seconds of CPU) and ``curve.csv`` in ``--output``. ``--small`` checks
the command in seconds on a few pairs with a one-layer model.
"""

import csv
import json
import os
from pathlib import Path
import platform
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

from absl import app  # pylint: disable=g-import-not-at-top,wrong-import-position
from absl import flags  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from configs import tutorial  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.data import shards  # pylint: disable=g-import-not-at-top,wrong-import-position

DATA = flags.DEFINE_string("data", None, "a folder written by prepare.py")
OUTPUT = flags.DEFINE_string("output", None, "where results.json and curve.csv go")
EPOCHS = flags.DEFINE_integer("epochs", 2, "epochs of each arm")
PAIRS = flags.DEFINE_integer("pairs", 12000, "training pairs used (0: all)")
EVALUATIONS = flags.DEFINE_integer("evaluations_per_epoch", 8,
                                   "validations an epoch, evenly in real target tokens")
# Sized to run both arms in about half an hour of one shared core: a step of
# today's batches of the tutorial's 4 layers of width 128 takes seconds there.
NUM_LAYERS = flags.DEFINE_integer("num_layers", 1, "encoder and decoder layers (tutorial: 4)")
D_MODEL = flags.DEFINE_integer("d_model", 32, "model width (tutorial: 128)")
NUM_HEADS = flags.DEFINE_integer("num_heads", 2, "attention heads (tutorial: 8)")
DFF = flags.DEFINE_integer("dff", 128, "feed-forward width (tutorial: 512)")
WARMUP = flags.DEFINE_integer("warmup_steps", 150,
                              "the schedule's warm-up (tutorial: 4000, past a short run's end)")
RATE_SCALE = flags.DEFINE_float(
    "learning_rate_scale", 0.097,
    "multiplies the schedule; 0.097 at d_model 32 and 150 warm-up steps peaks at the "
    "tutorial's 1.4e-3")
ARMS_RUN = flags.DEFINE_list("arms", ["today", "buckets"], "the arms to train, in order")
STOP_AFTER = flags.DEFINE_integer(
    "stop_after_evaluations", 0,
    "stop an arm after this many validations past the first (0: train --epochs)")
SMALL = flags.DEFINE_bool("small", False,
                          "a check in a minute or two: 128 pairs, one small layer, one epoch")
flags.mark_flags_as_required(["data", "output"])


def arm_config(arm: str):
  """The tutorial's configuration of ``arm`` (today: ``configs/tutorial.py``,
  buckets: ``configs/tutorial.py:gpu``), sized down alike."""
  config = tutorial.get_config("gpu" if arm == "buckets" else "cpu")
  config.model.update(num_layers=NUM_LAYERS.value, d_model=D_MODEL.value,
                      num_heads=NUM_HEADS.value, dff=DFF.value)
  # One step a call: the arms differ in their batches, not in how steps are dispatched.
  config.training.update(warmup_steps=WARMUP.value, learning_rate_scale=RATE_SCALE.value,
                         steps_per_dispatch=1)
  if SMALL.value:
    config.model.update(num_layers=1, d_model=32, dff=64, num_heads=2)
  return config


def batch_statistics(batches) -> dict:
  """Steps, shapes and real-token fractions of an epoch's batches."""
  real = sum(int(np.count_nonzero(labels)) for _, labels in batches)
  positions = sum(labels.size for _, labels in batches)
  return {"steps": len(batches), "shapes": len({labels.shape for _, labels in batches}),
          "real_target_tokens": real, "real_target_fraction": round(real / positions, 4)}


def run_arm(arm: str, train: shards.Split, validation: shards.Split, manifest: dict,
            output: Path) -> dict:
  """Trains ``arm`` for --epochs (or --stop_after_evaluations); returns its
  first epoch's batch statistics and its validation curve."""
  # Deferred: after KERAS_BACKEND is set.
  from transformer.training import jax_stacks  # pylint: disable=g-import-not-at-top
  from transformer.training.jax_engine import JaxTrainer  # pylint: disable=g-import-not-at-top
  config = arm_config(arm)
  trainer = JaxTrainer(config, input_vocab_size=manifest["vocab_sizes"]["pt"],
                       target_vocab_size=manifest["vocab_sizes"]["en"],
                       model_dir=output / arm, progress=False)
  epochs = 1 if SMALL.value else EPOCHS.value
  epoch_tokens = sum(len(en) - 1 for en in train.en)
  interval = epoch_tokens / (2 if SMALL.value else EVALUATIONS.value)
  curve, seen, steps, next_evaluation = [], 0, 0, interval
  cpu_start, wall_start = time.process_time(), time.time()

  def evaluate():
    metrics = trainer.evaluate(validation)
    curve.append({"arm": arm, "real_target_tokens": seen, "steps": steps,
                  "val_loss": round(metrics["loss"], 5),
                  "val_accuracy": round(metrics["accuracy"], 5),
                  "cpu_seconds": round(time.process_time() - cpu_start, 1),
                  "wall_seconds": round(time.time() - wall_start, 1)})
    print(json.dumps(curve[-1]), flush=True)

  evaluate()
  epoch_lists = [shards.epoch_batches(train, config.data,
                                      seed=shards.epoch_seed(int(config.training.seed), epoch))
                 for epoch in range(epochs)]
  last_batch = epoch_lists[-1][-1]
  for batch in (batch for batches in epoch_lists for batch in batches):
    trainer.engine.train((1, jax_stacks.stacked([batch], 1)))
    steps += 1
    seen += int(np.count_nonzero(batch[1]))
    if seen >= next_evaluation - 0.5 or batch is last_batch:
      evaluate()
      next_evaluation += interval
      if len(curve) - 1 == STOP_AFTER.value:
        break
  return {"arm": arm, "bucket_lengths": list(config.data.bucket_lengths),
          "tokens_per_batch": config.data.tokens_per_batch,
          "batch_size": config.data.batch_size, **batch_statistics(epoch_lists[0]),
          "curve": curve}


def machine() -> str:
  try:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def main(argv):
  del argv
  output = Path(OUTPUT.value)
  output.mkdir(parents=True, exist_ok=True)
  manifest = shards.read_manifest(DATA.value)
  max_tokens = tutorial.get_config().data.max_tokens
  train = shards.load_split(DATA.value, "train").trimmed(max_tokens)
  validation = shards.load_split(DATA.value, "validation").trimmed(max_tokens)
  pairs = 128 if SMALL.value else PAIRS.value
  train, validation = train.take(pairs), validation.take(64 if SMALL.value else 0)
  arms = [run_arm(arm, train, validation, manifest, output) for arm in ARMS_RUN.value]
  results = {
      "command": " ".join(sys.argv), "machine": machine(),
      "cores_allowed": sorted(os.sched_getaffinity(0)),
      "epochs": 1 if SMALL.value else EPOCHS.value,
      "training_pairs": len(train), "validation_pairs": len(validation),
      "model": arm_config("today").model.to_dict(),
      "training": arm_config("today").training.to_dict(), "arms": arms}
  (output / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
  with open(output / "curve.csv", "w", newline="", encoding="utf-8") as f:
    writer = csv.DictWriter(f, fieldnames=list(arms[0]["curve"][0]))
    writer.writeheader()
    for arm in arms:
      writer.writerows(arm["curve"])
  for arm in arms:
    last = arm["curve"][-1]
    print(f"{arm['arm']:8s} {arm['steps']:5d} steps an epoch, {arm['shapes']} shapes, "
          f"{arm['real_target_fraction']:.1%} real target tokens; after "
          f"{last['real_target_tokens']:,} real target tokens: validation loss "
          f"{last['val_loss']:.3f}, {last['cpu_seconds']:,.0f} s of CPU")


if __name__ == "__main__":
  app.run(main)
