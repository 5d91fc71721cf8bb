"""Padding of random vs bucketed vs token-budget batches (tutorial: "Set up a data pipeline").

Runs `transformer.data.pipeline.make_batches` over the real training split with the
tutorial's tokenizer and prints, for each batching scheme, the number of
batches, the fraction of padded positions (source + decoder input) and its
ratio to random batches measured in the same run.

  python lab/bench/pipeline_padding.py [--data_dir=...] [--tokenizer=...]
"""

import os
from pathlib import Path
import platform
import sys
import time

from absl import app
from absl import flags
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from transformer.data import ted  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.config import SHARED_DATA_DIR  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.data import pipeline  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top,wrong-import-position

DATA_DIR = flags.DEFINE_string("data_dir", str(SHARED_DATA_DIR / "ted_hrlr_pt_to_en"),
                               "folder with pt.train en.train ...")
TOKENIZER = flags.DEFINE_string("tokenizer", str(SHARED_DATA_DIR / "tutorial_tokenizer"),
                                "tokenizer SavedModel (the tutorial's converter or ours)")
MAX_TOKENS = flags.DEFINE_integer("max_tokens", 128, "longest sequence kept")
BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "sentences per batch")
TOKENS_PER_BATCH = flags.DEFINE_integer("tokens_per_batch", 25000,
                                        "token budget per side (paper §5.1)")


def measure(batches):
  """(batches, padding fraction, mean non-pad tokens per batch and side).

  Counts like `pipeline.padding_fraction`, plus the batch count and sizes.
  """
  padding = total = 0
  num_batches = 0
  for (source, target_input), _ in batches:
    num_batches += 1
    for ids in (source.numpy(), target_input.numpy()):
      padding += int(np.count_nonzero(ids == 0))
      total += ids.size
  return num_batches, padding / total, (total - padding) / (2 * num_batches)


def main(argv):
  del argv
  print(f"machine: {platform.machine()} {platform.processor() or ''} "
        f"{os.cpu_count()} CPUs, python {platform.python_version()}")
  train = ted.load_split(DATA_DIR.value, "train")
  tokenizer_pair = tokenizers.load_tokenizers(TOKENIZER.value)
  common = dict(max_tokens=MAX_TOKENS.value, seed=0)
  schemes = [
      (f"random, {BATCH_SIZE.value} sentences",
       dict(batch_size=BATCH_SIZE.value)),
      (f"bucketed, {BATCH_SIZE.value} sentences",
       dict(batch_size=BATCH_SIZE.value, bucketing=True)),
      (f"token budget {TOKENS_PER_BATCH.value}/side",
       dict(tokens_per_batch=TOKENS_PER_BATCH.value)),
  ]
  print(f"training split: {DATA_DIR.value}, tokenizer: {TOKENIZER.value}, "
        f"max_tokens={MAX_TOKENS.value}")
  print(f"{'scheme':32s} {'batches':>8s} {'padding':>8s} {'vs random':>9s} "
        f"{'tokens/batch/side':>17s} {'seconds':>8s}")
  baseline = None
  for name, settings in schemes:
    start = time.time()
    num_batches, fraction, tokens = measure(
        pipeline.make_batches(train, tokenizer_pair, **common, **settings))
    baseline = baseline or fraction
    print(f"{name:32s} {num_batches:8d} {fraction:8.1%} {fraction / baseline:9.2f} "
          f"{tokens:17.0f} {time.time() - start:8.1f}")


if __name__ == "__main__":
  app.run(main)
