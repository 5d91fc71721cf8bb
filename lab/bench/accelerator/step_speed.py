r"""Target tokens/s of the JAX training step on fixed random batches: issue 47's speed targets.

  python lab/bench/accelerator/step_speed.py --output=step_speed.json

Times :mod:`transformer.training.jax_engine`'s compiled step (the one
``train.py`` runs under ``KERAS_BACKEND=jax``) on batches of random ids with
no padding, the shapes issue 47 measured with a plain ``keras.ops``
Transformer and ``fit`` on an H200:

=================  ===================================  =====================
arm                configuration and batch              issue 47's rate
=================  ===================================  =====================
``tutorial_2021``  ``configs/tutorial_2021.py``,         404,000 tokens/s
                   64 × 40 tokens, float32
``base_bf16``      ``configs/base.py`` with a 8,192      747,000 tokens/s
                   joint vocabulary, 512 × 48 tokens
                   (24.6k), ``mixed_bfloat16``
=================  ===================================  =====================

Each arm compiles the step, runs ``--warmup`` steps, then times ``--steps``
steps (waiting for the last); it prints and writes one JSON record per arm
with the device, the rate and its ratio to the issue's. ``--small`` shrinks
the models and batches for a CPU check of the script.
"""

import argparse
import json
import os
from pathlib import Path
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
REPO_DIR = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO_DIR))

# pylint: disable=g-import-not-at-top,wrong-import-position
import jax
import numpy as np

from configs import base
from configs import tutorial_2021
from transformer.training import jax_stacks
from transformer.training import jax_engine

# name: (config, vocabulary sizes, batch rows, length, mixed precision, issue 47's tokens/s)
ARMS = {
    "tutorial_2021": (tutorial_2021.get_config, (7765, 7010), 64, 40, "none", 404_000),
    "base_bf16": (base.get_config, (8192, 8192), 512, 48, "mixed_bfloat16", 747_000),
}


def random_batch(rows: int, length: int, vocab_sizes, seed: int = 0):
  rng = np.random.default_rng(seed)
  source = rng.integers(4, vocab_sizes[0], (rows, length)).astype(np.int32)
  target = rng.integers(4, vocab_sizes[1], (rows, length + 1)).astype(np.int32)
  return (source, target[:, :-1]), target[:, 1:]


def measure(name: str, small: bool, warmup: int, steps: int) -> dict:
  get_config, vocab_sizes, rows, length, precision, reference = ARMS[name]
  config = get_config()
  if small:
    config.model.update(num_layers=1, d_model=32, dff=64, num_heads=4)
    rows, length = 8, 16
  with tempfile.TemporaryDirectory() as model_dir:
    trainer = jax_engine.JaxTrainer(config, input_vocab_size=vocab_sizes[0],
                                 target_vocab_size=vocab_sizes[1], model_dir=Path(model_dir),
                                 mixed_precision=precision, progress=False)
    # A stack of one batch, put on the device once, outside the timing.
    stack = jax.device_put(jax_stacks.stacked([random_batch(rows, length, vocab_sizes)], 1))
    start = time.monotonic()
    for _ in range(warmup):
      sums = trainer.engine.train((1, stack))[1]
    jax.block_until_ready(sums)
    compiled = time.monotonic() - start
    start = time.monotonic()
    for _ in range(steps):
      sums = trainer.engine.train((1, stack))[1]
    jax.block_until_ready(sums)
    seconds = time.monotonic() - start
  if not np.isfinite(float(sums[0])):
    raise SystemExit(f"step_speed.py: error: {name}: the loss is not finite")
  rate = steps * rows * length / seconds
  return {"arm": name, "device": f"{len(jax.devices())} x {jax.devices()[0].device_kind}",
          "batch": [rows, length], "mixed_precision": precision, "small": small,
          "warmup_seconds": compiled, "steps": steps, "seconds": seconds,
          "target_tokens_per_second": rate, "issue_47_tokens_per_second": reference,
          "ratio_to_issue_47": rate / reference}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--output", help="a JSON file for the records")
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--small", action="store_true", help="tiny models and batches (a CPU)")
  args = parser.parse_args()
  records = []
  for name in ARMS:
    records.append(measure(name, args.small, args.warmup, args.steps))
    print(json.dumps(records[-1]), flush=True)
  if args.output:
    Path(args.output).write_text(json.dumps(records, indent=2) + "\n")


if __name__ == "__main__":
  main()
