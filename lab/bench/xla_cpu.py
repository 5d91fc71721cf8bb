r"""XLA on the CPU: ``train.py --jit_compile`` against TensorFlow's graph executor.

  PYTHONPATH=. python lab/bench/xla_cpu.py --output=lab/bench/results/xla_cpu.json
  # about 10 minutes on a free 2-core CPU

Two questions decide whether XLA pays for ``configs/cpu_2h.py`` on a CPU:

1. **How many shapes does it compile?** XLA compiles the step once per batch
   shape. The token-budget pipeline (``transformer.data.pipeline.batch_tokenized``)
   groups sentences by length and pads each batch to its own longest sentence,
   or, with ``static_shapes=True`` (what ``train.py --jit_compile`` uses), to
   its bucket's longest. For both, the shapes of two epochs are counted:
   distinct ``(source, target)`` shapes in the first epoch, and those of the
   second that the first did not have (each a compilation in a long run).
2. **Is a compiled step faster?** The ``--batches`` most frequent shapes of the
   first epoch with ``static_shapes=True``, one real batch each, are trained by
   two ``TensorFlowTrainer``\ s built alike, one with ``jit_compile=True``. Each runs every batch twice untimed
   (the compilation is timed and recorded), then the two alternate, A/B/A/B,
   ``--steps`` steps per batch and round; each figure is the fastest round.

The JSON holds the machine, what else was running at the start and the end,
the shape counts, compilation seconds and, per batch, seconds per step of both
arms and the graph's time over XLA's (above 1: XLA is faster).
"""

import json
from pathlib import Path
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lab.bench import machine  # pylint: disable=g-import-not-at-top,wrong-import-position

_DATA_DIR, _TOKENIZER, _THREADS = machine.define_input_flags()
_BATCHES = flags.DEFINE_integer("batches", 3, "Most frequent batch shapes timed.")
_STEPS = flags.DEFINE_integer("steps", 8, "Timed steps per batch, arm and round.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "A/B rounds.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON output file.")


def shape_counts(first_epoch, second_epoch):
  """What XLA would compile: distinct shapes of the first epoch, new ones in the second."""
  return {"batches_first_epoch": sum(first_epoch.values()),
          "distinct_shapes_first_epoch": len(first_epoch),
          "new_shapes_second_epoch": len(set(second_epoch) - set(first_epoch))}


def seconds_per_step(trainer, batch, steps):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # Unknown batch and length dimensions, as train.py's datasets have: one
  # traced step for every shape, XLA compiling (and caching) per shape inside.
  spec = tf.TensorSpec([None, None], tf.int64)
  dataset = tf.data.Dataset.from_generator(lambda: (batch for _ in range(steps)),
                                           output_signature=((spec, spec), spec))
  start = time.perf_counter()
  trainer.engine.train_on_batches(dataset)
  return (time.perf_counter() - start) / steps


def main(argv):
  del argv
  if not _OUTPUT.value:
    sys.exit("--output is required")
  from transformer.run import runtime  # pylint: disable=g-import-not-at-top
  tf = runtime.import_tensorflow(verbose=False)
  machine.set_threads(_THREADS.value)
  from configs import cpu_2h  # pylint: disable=g-import-not-at-top
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  from transformer.data.tokenizers import load_tokenizers, vocab_sizes  # pylint: disable=g-import-not-at-top
  from transformer.training.tf_engine import TensorFlowTrainer  # pylint: disable=g-import-not-at-top

  started = machine.other_activity()
  print(machine.summary_line(started), flush=True)
  config = cpu_2h.get_config()
  tokenizers = load_tokenizers(_TOKENIZER.value)
  tokenized = pipeline.tokenize_pairs(
      ted.pairs_to_dataset(ted.local_split_pairs(_DATA_DIR.value, "train")), tokenizers,
      config.data.max_tokens).cache()

  def epoch(seed, static_shapes):
    return list(pipeline.batch_tokenized(
        tokenized, max_tokens=config.data.max_tokens,
        tokens_per_batch=config.data.tokens_per_batch, seed=seed,
        static_shapes=static_shapes).as_numpy_iterator())

  counts = {}
  for static_shapes in (False, True):  # the last, train.py's, gives the batches timed
    first = epoch(0, static_shapes)
    first_shapes = pipeline.batch_shapes(first)
    counts[f"static_shapes={static_shapes}"] = shape_counts(
        first_shapes, pipeline.batch_shapes(epoch(1, static_shapes)))
  print(json.dumps(counts), flush=True)

  chosen = [shape for shape, _ in first_shapes.most_common(_BATCHES.value)]
  batches = {}  # one real batch of each chosen shape
  for batch in first:
    shape, = pipeline.batch_shapes([batch])
    if shape in chosen:
      batches.setdefault(shape, batch)
  vocab = vocab_sizes(tokenizers)
  trainers = {jit: TensorFlowTrainer(config, input_vocab_size=vocab[0], target_vocab_size=vocab[1],
                           jit_compile=jit, progress=False)
              for jit in (False, True)}
  first_call_seconds = {str(jit): {str(shape): seconds_per_step(trainer, batch, 2) * 2
                                   for shape, batch in batches.items()}
                        for jit, trainer in trainers.items()}
  timings = {(jit, shape): [] for jit in trainers for shape in chosen}
  for _ in range(_ROUNDS.value):
    for jit, trainer in trainers.items():
      for shape, batch in batches.items():
        timings[(jit, shape)].append(seconds_per_step(trainer, batch, _STEPS.value))

  per_batch = []
  for shape, batch in batches.items():
    graph, xla = min(timings[(False, shape)]), min(timings[(True, shape)])
    real_tokens = int((batch[1] != 0).sum())
    per_batch.append({
        "source_shape": shape[0], "target_shape": shape[1],
        "batches_of_this_shape_first_epoch": first_shapes[shape],
        "real_target_tokens": real_tokens,
        "graph_seconds_per_step": graph, "xla_seconds_per_step": xla,
        "graph_rounds": timings[(False, shape)], "xla_rounds": timings[(True, shape)],
        "graph_over_xla_time": graph / xla})
    print(f"{shape}: graph {graph:.3f} s/step, XLA {xla:.3f} s/step, "
          f"graph/XLA {graph / xla:.2f}", flush=True)
  result = {"machine": machine.description(), "started": started,
            "ended": machine.other_activity(), "config": "configs/cpu_2h.py",
            "shapes": counts, "first_two_calls_seconds": first_call_seconds,
            "steps": _STEPS.value, "rounds": _ROUNDS.value, "batches": per_batch}
  print(machine.summary_line(result["ended"]), flush=True)
  Path(_OUTPUT.value).parent.mkdir(parents=True, exist_ok=True)
  Path(_OUTPUT.value).write_text(json.dumps(result, indent=1, default=list) + "\n",
                                 encoding="utf-8")


if __name__ == "__main__":
  app.run(main)
