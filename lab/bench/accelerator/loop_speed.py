r"""The JAX trainer's whole loop against its compiled step alone, on the same batches.

  python lab/bench/accelerator/loop_speed.py --output=loop_speed.json          # a GPU
  python lab/bench/accelerator/loop_speed.py --small --output=loop_speed.json  # a CPU check

One epoch of batches (``transformer.data.shards.epoch_batches`` of random
pairs, or of ``--data``'s training pairs, in the trainer's order:
``jax_stacks.grouped_by_shape``) is trained three ways, in alternating rounds in one
process so that what else runs on the machine weighs on each alike:

``step_1``      the compiled step alone, one batch a call (stacks of 1 put on
                the devices before the clock starts);
``step_K``      the compiled step alone, ``--stack`` batches a call;
``loop_K``      the training loop's epoch at ``training.steps_per_dispatch =
                --stack``: the whole loop (stacking, transfers, reading the
                sums, the progress line's and TensorBoard's bookkeeping).

Then, ``--rounds`` times, a checkpoint of the loop's trainer: the seconds
the loop waits for it (``save_checkpoint``: the values copied to the host,
the write handed to its thread) and the seconds until its files are written.

Each arm reports the medians over ``--rounds`` rounds of real (non-padding)
target tokens/s, wall seconds per step and process CPU seconds per step, and
the ratios ``loop_K ÷ step_1`` and ``loop_K ÷ step_K`` of both; one JSON
object on stdout and in ``--output``. On a CPU, where the step's arithmetic
runs in this process, CPU seconds are the fair measure; on a GPU, wall
seconds and tokens/s are.
"""

import argparse
import json
import os
from pathlib import Path
import statistics
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
REPO_DIR = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO_DIR))

# pylint: disable=g-import-not-at-top,wrong-import-position
import jax
import numpy as np

from configs import tutorial
from transformer.data import shards
from transformer.run import stop_signals
from transformer.training import jax_stacks
from transformer.training import jax_engine

VOCAB = 7000


def random_split(pairs: int, max_tokens: int, seed: int = 0) -> shards.Split:
  """Pairs of random ids, lengths uniform in [3, max_tokens]."""
  rng = np.random.default_rng(seed)

  def sentences():
    return [rng.integers(4, VOCAB, rng.integers(3, max_tokens + 1)).astype(np.int32)
            for _ in range(pairs)]
  return shards.Split(sentences(), sentences())


def make_config(small: bool, stack: int):
  config = tutorial.get_config()
  config.data.bucketing = True  # few shapes, mostly real tokens
  config.training.steps_per_dispatch = stack
  config.training.checkpoint_every_steps = 10 ** 9  # checkpoints are timed apart
  if small:
    config.model.update(num_layers=1, d_model=32, dff=64, num_heads=4)
    config.data.update(batch_size=16, max_tokens=32)
  return config


def make_trainer(config, model_dir: Path, sizes=(VOCAB, VOCAB)):
  return jax_engine.JaxTrainer(config, input_vocab_size=sizes[0], target_vocab_size=sizes[1],
                                model_dir=model_dir, progress=False, log_every_steps=100)


def step_arm(trainer, device_stacks):
  """Trains on stacks already on the devices; waits for the last one."""
  def run():
    for steps, stack in device_stacks:
      sums = trainer.engine.train((steps, stack))[1]
    jax.block_until_ready(sums)
  return run


def loop_arm(trainer, split, stop):
  def run():
    trainer.step_in_epoch = 0  # the same epoch's batches again
    trainer.train_epoch(split, stop)
  return run


def timed(run):
  wall, cpu = time.monotonic(), time.process_time()
  run()
  return time.monotonic() - wall, time.process_time() - cpu


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output", help="a JSON file for the result")
  parser.add_argument("--data", help="a prepared folder: its training pairs, not random ones")
  parser.add_argument("--pairs", type=int, default=8192, help="pairs in the epoch")
  parser.add_argument("--stack", type=int, default=8, help="K, the steps a dispatch")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--small", action="store_true", help="a one-layer model, short batches")
  args = parser.parse_args()
  config = make_config(args.small, args.stack)
  sizes = (VOCAB, VOCAB)
  if args.data:
    split = shards.load_split(args.data, "train").take(args.pairs)
    # The folder's own vocabularies: its ids run past VOCAB (7,765 pt ids for the tutorial's).
    sizes = tuple(shards.read_manifest(args.data)["vocab_sizes"][side] for side in ("pt", "en"))
  else:
    split = random_split(args.pairs, config.data.max_tokens)
  split = split.trimmed(config.data.max_tokens)
  batches = jax_stacks.grouped_by_shape(shards.epoch_batches(
      split, config.data, seed=shards.epoch_seed(int(config.training.seed), 0)))
  steps = len(batches)
  real_tokens = sum(int(np.count_nonzero(labels)) for _, labels in batches)
  with tempfile.TemporaryDirectory() as folder, stop_signals.StopSignals() as stop:
    one = make_trainer(make_config(args.small, 1), Path(folder) / "one", sizes)
    stacked = make_trainer(config, Path(folder) / "stacked", sizes)

    def on_devices(trainer, size):
      return [(stop_at - first, jax.device_put(jax_stacks.stacked(batches[first:stop_at], size)))
              for first, stop_at in jax_stacks.stack_ranges(batches, 0, steps, size)]
    arms = {"step_1": step_arm(one, on_devices(one, 1)),
            f"step_{args.stack}": step_arm(stacked, on_devices(stacked, args.stack)),
            f"loop_{args.stack}": loop_arm(stacked, split, stop)}
    for run in arms.values():  # compiles every shape, outside the rounds
      run()
    times = {name: [] for name in arms}
    for _ in range(args.rounds):
      for name, run in arms.items():
        times[name].append(timed(run))
    checkpoints = []
    for _ in range(args.rounds):
      start = time.monotonic()
      stacked.engine.save(stacked.state())
      handed_over = time.monotonic()
      stacked.engine.finish()
      checkpoints.append((handed_over - start, time.monotonic() - start))
  result = {"device": f"{len(jax.devices())} x {jax.devices()[0].device_kind}",
            "small": args.small, "data": args.data or "random", "steps": steps,
            "real_target_tokens": real_tokens, "stack": args.stack, "rounds": args.rounds,
            "shapes": len({jax_stacks.shape_of(batch) for batch in batches})}
  for name, rounds in times.items():
    wall = statistics.median(seconds for seconds, _ in rounds)
    cpu = statistics.median(seconds for _, seconds in rounds)
    result[name] = {"target_tokens_per_second": real_tokens / wall,
                    "seconds_per_step": wall / steps, "cpu_seconds_per_step": cpu / steps,
                    "rounds": [[round(w, 4), round(c, 4)] for w, c in rounds]}
  result["checkpoint"] = {
      "loop_waits_seconds": statistics.median(waits for waits, _ in checkpoints),
      "written_after_seconds": statistics.median(written for _, written in checkpoints),
      "rounds": [[round(w, 4), round(t, 4)] for w, t in checkpoints]}
  loop = result[f"loop_{args.stack}"]
  for reference in ("step_1", f"step_{args.stack}"):
    result[f"loop_over_{reference}"] = {
        "seconds": loop["seconds_per_step"] / result[reference]["seconds_per_step"],
        "cpu_seconds": loop["cpu_seconds_per_step"] / result[reference]["cpu_seconds_per_step"]}
  print(json.dumps(result), flush=True)
  if args.output:
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
  main()
