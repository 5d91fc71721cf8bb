"""Learning parity: the tutorial's model and ``fit`` step against ``TensorFlowTrainer`` (issue #8).

  python lab/bench/learning_parity.py --steps=600 --eval_steps=200,400,600 --threads=1
  python lab/bench/learning_parity.py --steps=4 --eval_steps=2,4 --log_every=2 \\
      --val_pairs=64 --arms=tutorial_random,ours_random   # a smoke run

Arms are independent (same weights, same batches), so they may run as separate
processes, one per core, each with ``--append`` to the same ``--output``.

Four arms, each from the same initial weights (ours, seeded by the
configuration, copied into the tutorial's model) and each on batches drawn once
from the real training split with the tutorial's tokenizer:

* ``tutorial_random``: the tutorial's model and ``fit`` step
  (``tests/helpers/tutorial_baseline.py``, ``train_on_batch``: the step ``fit`` runs) on
  random batches of 64 sentences (the tutorial's ``padded_batch(64)``);
* ``ours_random``: ``TensorFlowTrainer`` with ``configs/tutorial.py`` on the same batches;
* ``ours_bucketed``: ``TensorFlowTrainer`` on length-bucketed batches of 64 (§5.1); a
  bucket's last batch can hold a single sentence, so a step consumes fewer
  tokens on average;
* ``ours_token_budget``: ``TensorFlowTrainer`` on token-budget batches whose budget is
  set so that they hold about as many real tokens as the random batches.

Every ``--log_every`` steps each arm records its mean training loss over those
steps; at each of ``--eval_steps`` its validation loss and accuracy over the same
validation batches (one function for every arm: mean over real tokens, no
dropout). Each record carries the real target tokens the arm has consumed so far.
Writes JSON lines (a header with the machine and what else was running, one
line per record, a footer) to ``--output`` and a plot to ``--plot``.
"""

import json
from pathlib import Path
import sys
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lab.bench import machine  # pylint: disable=g-import-not-at-top,wrong-import-position
from tests.helpers import tutorial_baseline  # pylint: disable=g-import-not-at-top,wrong-import-position

ARMS = ("tutorial_random", "ours_random", "ours_bucketed", "ours_token_budget")
RESULTS = machine.REPO_ROOT / "lab" / "bench" / "results"

_DATA_DIR = flags.DEFINE_string("data_dir", str(machine.SHARED_DATA / "ted_hrlr_pt_to_en"),
                                "Folder with pt.train en.train pt.dev ...")
_TOKENIZER = flags.DEFINE_string("tokenizer", str(machine.SHARED_DATA / "tutorial_tokenizer"),
                                 "Tokenizer SavedModel (the tutorial's converter).")
_STEPS = flags.DEFINE_integer("steps", 600, "Training steps per arm.")
_EVAL_STEPS = flags.DEFINE_list("eval_steps", ["200", "400", "600"],
                                "Steps after which every arm is validated.")
_LOG_EVERY = flags.DEFINE_integer("log_every", 50, "Steps per training-loss record.")
_THREADS = flags.DEFINE_integer("threads", 1, "TensorFlow threads per arm (0: one per core).")
_VAL_PAIRS = flags.DEFINE_integer("val_pairs", 0, "Validation pairs used (0: all 1,193).")
_ARMS = flags.DEFINE_list("arms", list(ARMS), f"Arms to run, of {', '.join(ARMS)}.")
_OUTPUT = flags.DEFINE_string("output", str(RESULTS / "learning_parity.json"),
                              "JSON lines output.")
_PLOT = flags.DEFINE_string("plot", str(RESULTS / "learning_parity.png"), "Plot output.")
_APPEND = flags.DEFINE_boolean(
    "append", False, "Add this run's lines to --output (which may hold other arms, from other "
    "runs) instead of replacing it; the plot shows every arm the file holds.")


def materialize(dataset, steps):
  """The first ``steps`` batches as a list of numpy triples ``(source, target_in, labels)``,
  repeating the dataset (a new shuffle each pass) if one pass is shorter."""
  batches = []
  while len(batches) < steps:
    before = len(batches)
    for (source, target_input), labels in dataset.take(steps - len(batches)):
      batches.append((source.numpy(), target_input.numpy(), labels.numpy()))
    if len(batches) == before:
      raise ValueError("the training batches are empty")
  return batches


def real_tokens_per_side(batches):
  """Mean real tokens per batch, source and target averaged."""
  return float(np.mean([((s != 0).sum() + (t != 0).sum()) / 2 for s, t, _ in batches]))


def build_batches(config, tokenizers, steps):
  """{arm: list of batches}; the random arms share one list."""
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  pairs = ted.local_split_pairs(_DATA_DIR.value, "train")
  tokenized = pipeline.tokenize_pairs(ted.pairs_to_dataset(pairs), tokenizers,
                                      config.data.max_tokens).cache()

  def batches(**batching):
    return materialize(pipeline.batch_tokenized(tokenized, max_tokens=config.data.max_tokens,
                                                seed=0, **batching), steps)

  random = batches(batch_size=64)
  # Budget = padded positions per side; scale a first guess by the real tokens it gave.
  target = real_tokens_per_side(random)
  budget = max(config.data.max_tokens, round(target))
  probe = materialize(pipeline.batch_tokenized(tokenized, max_tokens=config.data.max_tokens,
                                               seed=1, tokens_per_batch=budget), 100)
  budget = max(config.data.max_tokens, round(budget * target / real_tokens_per_side(probe)))
  return {"tutorial_random": random, "ours_random": random,
          "ours_bucketed": batches(batch_size=64, bucketing=True),
          "ours_token_budget": batches(tokens_per_batch=budget)}, budget


def validation_batches(config, tokenizers):
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  pairs = ted.local_split_pairs(_DATA_DIR.value, "validation")
  if _VAL_PAIRS.value:
    pairs = pairs[:_VAL_PAIRS.value]
  return list(pipeline.make_batches(ted.pairs_to_dataset(pairs), tokenizers,
                                    max_tokens=config.data.max_tokens, batch_size=64,
                                    shuffle=False))


def evaluator(model):
  """``batches -> (loss, accuracy)`` per real token, without dropout, for any model."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer.model import losses  # pylint: disable=g-import-not-at-top

  @tf.function(reduce_retracing=True)
  def sums(source, target_input, labels):
    logits = model((source, target_input), training=False)
    loss_sum, count = losses.masked_cross_entropy_sum(labels, logits)
    correct, _ = losses.masked_correct_sum(labels, logits)
    return loss_sum, count, correct

  def evaluate(batches):
    totals = np.zeros(3)
    for (source, target_input), labels in batches:
      totals += [float(v) for v in sums(source, target_input, labels)]
    return totals[0] / totals[1], totals[2] / totals[1]
  return evaluate


def make_arm(name, config, vocabularies):
  """(model, ``train(batches) -> [loss of each step]``) for one arm."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer.training.tf_engine import TensorFlowTrainer  # pylint: disable=g-import-not-at-top
  trainer = TensorFlowTrainer(config, input_vocab_size=vocabularies[0],
                    target_vocab_size=vocabularies[1], progress=False)
  if name != "tutorial_random":
    spec = tf.TensorSpec([None, None], tf.int64)

    def train(batches):
      # Unknown batch and length dimensions: one traced step for every shape.
      dataset = tf.data.Dataset.from_generator(
          lambda: (((s, t), l) for s, t, l in batches), output_signature=((spec, spec), spec))
      return [record["loss"] for record in trainer.engine.train_on_batches(dataset)]
    return trainer.model, train
  model = tutorial_baseline.build(tutorial_baseline.TutorialTransformer.from_model_config(
      config.model, *vocabularies))
  tutorial_baseline.copy_weights(trainer.model, model)
  tutorial_baseline.compile_as_tutorial(model, config.model.d_model,
                                        config.training.warmup_steps)
  keras.utils.set_random_seed(int(config.training.seed))

  def train_tutorial(batches):
    return [float(model.train_on_batch((s, t), l, return_dict=True)["loss"])
            for s, t, l in batches]
  return model, train_tutorial


def run_arm(name, batches, config, vocabularies, validation, eval_steps, write):
  """Trains one arm on ``batches``, writing a record at every log and eval step."""
  model, train = make_arm(name, config, vocabularies)
  evaluate = evaluator(model)
  stops = sorted({*range(_LOG_EVERY.value, len(batches) + 1, _LOG_EVERY.value),
                  *(step for step in eval_steps if step <= len(batches))})
  tokens, done, window = 0, 0, []
  start = time.perf_counter()
  for stop in stops:
    part = batches[done:stop]
    window += train(part)
    tokens += sum(int((labels != 0).sum()) for _, _, labels in part)
    done = stop
    if stop % _LOG_EVERY.value == 0:
      write({"arm": name, "step": stop, "train_loss": float(np.mean(window)),
             "target_tokens": tokens, "seconds": time.perf_counter() - start})
      window = []
    if stop in eval_steps:
      loss, accuracy = evaluate(validation)
      write({"arm": name, "step": stop, "val_loss": loss, "val_accuracy": accuracy,
             "target_tokens": tokens, "seconds": time.perf_counter() - start})


def plot(records, path):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
  for arm in ARMS:
    train = [r for r in records if r.get("arm") == arm and "train_loss" in r]
    val = [r for r in records if r.get("arm") == arm and "val_loss" in r]
    if not train and not val:
      continue
    axes[0].plot([r["step"] for r in train], [r["train_loss"] for r in train], label=arm)
    axes[1].plot([r["step"] for r in val], [r["val_loss"] for r in val], "o-", label=arm)
    axes[2].plot([r["target_tokens"] / 1e6 for r in val], [r["val_loss"] for r in val], "o-",
                 label=arm)
  for axis, (x, y) in zip(axes, [("step", f"training loss (mean of {_LOG_EVERY.value} steps)"),
                                 ("step", "validation loss"),
                                 ("real target tokens consumed (millions)",
                                  "validation loss")]):
    axis.set_xlabel(x)
    axis.set_ylabel(y)
    axis.grid(alpha=0.3)
  axes[0].legend()
  figure.suptitle("tutorial model + fit vs TensorFlowTrainer (configs/tutorial.py), same initial weights")
  figure.tight_layout()
  figure.savefig(path, dpi=100)


def main(argv):
  del argv
  unknown = sorted(set(_ARMS.value) - set(ARMS))
  if unknown:
    sys.exit(f"--arms: unknown {', '.join(unknown)}; choose from {', '.join(ARMS)}")
  try:
    eval_steps = sorted({int(step) for step in _EVAL_STEPS.value})
  except ValueError:
    sys.exit(f"--eval_steps: not a list of integers: {','.join(_EVAL_STEPS.value)}")
  machine.set_threads(_THREADS.value)
  from configs import tutorial  # pylint: disable=g-import-not-at-top
  from transformer.data.tokenizers import load_tokenizers, vocab_sizes  # pylint: disable=g-import-not-at-top
  started = time.time()
  activity_start = machine.other_activity()
  print(machine.summary_line(activity_start), flush=True)
  config = tutorial.get_config()
  tokenizers = load_tokenizers(_TOKENIZER.value)
  batches, budget = build_batches(config, tokenizers, _STEPS.value)
  validation = validation_batches(config, tokenizers)

  output = Path(_OUTPUT.value)
  output.parent.mkdir(parents=True, exist_ok=True)
  # One line per write() call: processes appending at once interleave whole lines.
  with output.open("a" if _APPEND.value else "w", encoding="utf-8") as out:
    def write(record):
      out.write(json.dumps(record) + "\n")
      out.flush()
      print(json.dumps(record), flush=True)

    write({"benchmark": "lab/bench/learning_parity.py", "command": " ".join(sys.argv),
           "machine": machine.description(), "activity_start": activity_start,
           "steps": _STEPS.value, "eval_steps": eval_steps, "log_every": _LOG_EVERY.value,
           "threads": _THREADS.value, "tokens_per_batch": budget,
           "validation_target_tokens": int(sum((l.numpy() != 0).sum() for _, l in validation)),
           "mean_target_tokens_per_step": {
               arm: float(np.mean([(l != 0).sum() for _, _, l in batches[arm]]))
               for arm in _ARMS.value}})
    for arm in _ARMS.value:
      run_arm(arm, batches[arm], config, vocab_sizes(tokenizers), validation, eval_steps,
              write)
    write({"activity_end": machine.other_activity(), "wall_seconds": time.time() - started})
  from transformer.inference import plotting  # pylint: disable=g-import-not-at-top
  plot(plotting.read_metrics(output), _PLOT.value)  # every arm in the file, --append's too
  print(f"wrote {output} and {_PLOT.value}")


if __name__ == "__main__":
  app.run(main)
