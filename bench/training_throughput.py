"""Training throughput: random batches (the tutorial) against bucketed batches (§5.1).

  PYTHONPATH=. python bench/training_throughput.py --steps 20

Trains the ``tutorial`` configuration's model with the tutorial's tokenizer on
the real training split, first on random batches of 64 sentences, then on
length-bucketed batches of 64, for ``--steps`` optimizer steps each. Each
scheme's batches are run once untimed first, so that tracing for each new batch
shape is not timed, then timed. Prints real (non-padding) target tokens per
second and the ratio to random batches measured in the same run.
"""

from pathlib import Path
import time

from absl import app
from absl import flags

from configs import tutorial
from transformer import data
from transformer import pipeline
from transformer.tokenizers import load_tokenizers, vocab_sizes
from transformer.training import Trainer

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

_STEPS = flags.DEFINE_integer("steps", 20, "Timed optimizer steps per batching scheme.")
_DATA_DIR = flags.DEFINE_string("data_dir", str(SHARED_DATA / "ted_hrlr_pt_to_en"),
                                "Folder with pt.train en.train ...")
_TOKENIZER = flags.DEFINE_string("tokenizer", str(SHARED_DATA / "tutorial_tokenizer"),
                                 "Tokenizer SavedModel.")


def throughput(trainer, batches):
  """Real target tokens per second over the batches (each shape traced before timing)."""
  batches = batches.cache()
  trainer.train_steps(batches)  # fills the cache and traces every shape; not timed
  start = time.perf_counter()
  records = trainer.train_steps(batches)
  seconds = time.perf_counter() - start
  return sum(r["tokens"] for r in records) / seconds, seconds / len(records)


def main(argv):
  del argv
  config = tutorial.get_config()
  tokenizers = load_tokenizers(_TOKENIZER.value)
  pairs = data.local_split_pairs(_DATA_DIR.value, "train")[:20000]
  tokenized = pipeline.tokenize_pairs(data.pairs_to_dataset(pairs), tokenizers,
                                      config.data.max_tokens).cache()
  input_vocab_size, target_vocab_size = vocab_sizes(tokenizers)
  trainer = Trainer(config, input_vocab_size=input_vocab_size,
                    target_vocab_size=target_vocab_size, progress=False)
  # Both schemes train the same model in turn; its weights do not change the speed.
  results = {}
  for name, bucketing in (("random batches of 64", False), ("bucketed batches of 64", True)):
    batches = pipeline.batch_tokenized(tokenized, max_tokens=config.data.max_tokens,
                                       batch_size=64, bucketing=bucketing, seed=0)
    results[name] = throughput(trainer, batches.take(_STEPS.value))
  baseline = results["random batches of 64"][0]
  print(f"{'scheme':<26}{'tokens/s':>10}{'s/step':>9}{'vs random':>11}")
  for name, (tokens_per_second, seconds_per_step) in results.items():
    print(f"{name:<26}{tokens_per_second:>10.0f}{seconds_per_step:>9.2f}"
          f"{tokens_per_second / baseline:>10.2f}x")


if __name__ == "__main__":
  app.run(main)
