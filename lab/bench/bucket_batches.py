"""Real tokens and shapes of the JAX trainer's batches: today's against explicit length buckets.

Batches a prepared folder's training and validation splits as the JAX trainer
does (``transformer.data.shards.epoch_batches``) under each configuration's
``data`` fields, and reports for each: the steps of an epoch, the batch shapes
(what XLA compiles a step for) of training, validation and both, the fraction
of real (non-pad) target and source positions, and the real target tokens a
step. Candidate bucket sets at the tutorial's budget show the choice behind
``configs/tutorial.py:gpu``.

  python lab/bench/bucket_batches.py --data=<prepared folder> [--output=results.json]
"""

import json
from pathlib import Path
import sys

from absl import app
from absl import flags
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from configs import base  # pylint: disable=g-import-not-at-top,wrong-import-position
from configs import tutorial  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.data import shards  # pylint: disable=g-import-not-at-top,wrong-import-position

DATA = flags.DEFINE_string("data", None, "a folder written by prepare.py")
OUTPUT = flags.DEFINE_string("output", None, "a JSON file for the results (optional)")
flags.mark_flag_as_required("data")

CANDIDATE_BUCKETS = [(32, 64, 128), (24, 48, 80, 128), (16, 32, 48, 64, 128),
                     (20, 32, 48, 72, 128), (16, 24, 32, 48, 64, 128)]
CANDIDATE_BUDGETS = (2048, 2304)


def schemes():
  """``(name, config.data)`` of today's configurations, the GPU ones and the candidates."""
  named = [("tutorial (random batches of 64)", tutorial.get_config().data),
           ("tutorial, bucketing=True", tutorial.get_config().data),
           ("tutorial:gpu", tutorial.get_config("gpu").data),
           ("base (budget 25000, 16-token buckets)", base.get_config().data),
           ("base:gpu", base.get_config("gpu").data)]
  named[1][1].bucketing = True
  for buckets in CANDIDATE_BUCKETS:
    for budget in CANDIDATE_BUDGETS:
      data = tutorial.get_config().data
      data.update(bucket_lengths=buckets, tokens_per_batch=budget)
      named.append((f"candidate {buckets} budget {budget}", data))
  return named


def measure(train: shards.Split, validation: shards.Split, data_config) -> dict:
  training = shards.epoch_batches(train, data_config, seed=shards.epoch_seed(0, 0))
  checking = shards.epoch_batches(validation, data_config, shuffle=False)

  def real(batches, side):
    return sum(int(np.count_nonzero(batch[0][0] if side == "source" else batch[1]))
               for batch in batches)

  positions = sum(labels.size for _, labels in training)
  train_shapes = {labels.shape for _, labels in training}
  validation_shapes = {labels.shape for _, labels in checking}
  return {"bucket_lengths": list(data_config.bucket_lengths),
          "tokens_per_batch": data_config.tokens_per_batch,
          "batch_size": data_config.batch_size, "bucketing": data_config.bucketing,
          "steps": len(training), "training_shapes": len(train_shapes),
          "validation_shapes": len(validation_shapes),
          "shapes": len(train_shapes | validation_shapes),
          "real_target_fraction": round(real(training, "target") / positions, 4),
          "real_source_fraction": round(real(training, "source") / positions, 4),
          "real_target_tokens_per_step": round(real(training, "target") / len(training), 1)}


def main(argv):
  del argv
  max_tokens = tutorial.get_config().data.max_tokens
  train = shards.load_split(DATA.value, "train").trimmed(max_tokens)
  validation = shards.load_split(DATA.value, "validation").trimmed(max_tokens)
  results = []
  print(f"{'batches':58s} {'steps':>6s} {'shapes':>6s} {'real tgt':>8s} {'real src':>8s} "
        f"{'tgt/step':>8s}")
  for name, data_config in schemes():
    results.append({"batches": name, **measure(train, validation, data_config)})
    r = results[-1]
    print(f"{name:58s} {r['steps']:6d} {r['shapes']:6d} {r['real_target_fraction']:8.1%} "
          f"{r['real_source_fraction']:8.1%} {r['real_target_tokens_per_step']:8,.0f}")
  if OUTPUT.value:
    manifest = shards.read_manifest(DATA.value)
    Path(OUTPUT.value).write_text(json.dumps({
        "command": " ".join(sys.argv), "data": manifest["data"],
        "tokenizer": manifest["tokenizer"], "training_pairs": len(train),
        "validation_pairs": len(validation), "epoch_seed": shards.epoch_seed(0, 0),
        "results": results}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
  app.run(main)
