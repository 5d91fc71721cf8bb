r"""Short training sweeps at equal wall-clock time (choosing ``configs/cpu_2h.py``).

  PYTHONPATH=. taskset -c 1 python lab/bench/sweep.py --seconds=300 \
      --arm='d256_L3:model.d_model=256,model.num_layers=3' \
      --arm='d384_L3:model.d_model=384,model.dff=1536,model.num_heads=6' \
      --out=lab/results/cpu_2h/sweeps/size.jsonl

Each arm is ``configs/cpu_2h.py`` plus the arm's overrides. Every arm trains a
fresh model on the real training split (tutorial tokenizer) for ``--seconds``
of training time, with the validation loss and accuracy on the whole
validation split measured every ``--eval_every`` seconds of training time
(evaluation time is not counted). Arms with the same batch settings see the
same batches in the same order. The quantity compared is what a time-limited
run cares about: validation quality after the same number of seconds.

One JSON line per evaluation point: arm, overrides, step, training seconds,
real target tokens seen, validation loss/accuracy, and the machine load.
An arm already complete in ``--out`` is skipped, so a sweep resumes.
"""

import ast
import json
import os
from pathlib import Path
import time

from absl import app
from absl import flags

from lab.bench import machine
from configs import cpu_2h
from transformer import config as config_lib
from transformer.data import ted
from transformer.data import pipeline
from transformer.data.tokenizers import load_tokenizers, vocab_sizes
from transformer.training.tf_engine import TensorFlowTrainer

SHARED_DATA = machine.SHARED_DATA

_ARMS = flags.DEFINE_multi_string(
    "arm", None, "name:field=value,field=value (config overrides on configs/cpu_2h.py).")
_SECONDS = flags.DEFINE_float("seconds", 300, "Training seconds per arm.")
_EVAL_EVERY = flags.DEFINE_float("eval_every", 60, "Validate every N training seconds.")
_OUT = flags.DEFINE_string("out", None, "JSON lines output file.")
_DATA_DIR = flags.DEFINE_string("data_dir", str(SHARED_DATA / "ted_hrlr_pt_to_en"),
                                "Folder with the TED HRLR files.")
_TOKENIZER = flags.DEFINE_string("tokenizer", str(SHARED_DATA / "tutorial_tokenizer"),
                                 "Tokenizer SavedModel.")
# Steps between clock checks: few enough host round trips to not cost time.
_CHUNK = 10


def parse_arm(text):
  """'name:a.b=1,c.d=x' -> (name, {'a.b': 1, 'c.d': 'x'})."""
  name, _, body = text.partition(":")
  overrides = {}
  for item in filter(None, body.split(",")):
    field, _, value = item.partition("=")
    try:
      overrides[field.strip()] = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
      overrides[field.strip()] = value.strip()
  return name.strip(), overrides


def arm_config(overrides):
  config = cpu_2h.get_config()
  for field, value in overrides.items():
    section, name = field.split(".")
    config[section][name] = value
  return config_lib.validate_config(config)


def machine_load():
  return {"loadavg_1min": os.getloadavg()[0], "cpus_allowed": len(os.sched_getaffinity(0))}


def run_arm(name, overrides, tokenizers, tokenized_train, validation_pairs, write):
  config = arm_config(overrides)
  trainer = TensorFlowTrainer(config, input_vocab_size=vocab_sizes(tokenizers)[0],
                    target_vocab_size=vocab_sizes(tokenizers)[1], progress=False)
  validation = pipeline.evaluation_batches(validation_pairs, tokenizers, config.data)

  def epoch_batches(epoch):
    # train.py's batches: the same batches in the same order as a real run.
    return pipeline.training_batches(tokenized_train, config, epoch)

  def batches():
    epoch = 0
    while True:
      # Materialized before training on them: no input pipeline runs in the
      # background of the timed steps.
      yield from list(epoch_batches(epoch))
      epoch += 1

  stream = batches()
  element_spec = epoch_batches(0).element_spec
  train_seconds = tokens = 0.0
  next_eval = _EVAL_EVERY.value
  parameters = sum(int(v.shape.num_elements()) for v in trainer.model.trainable_variables)
  while True:
    chunk = [next(stream) for _ in range(_CHUNK)]
    start = time.perf_counter()
    records = trainer.engine.train_on_batches(tf_dataset_from(chunk, element_spec))
    train_seconds += time.perf_counter() - start
    print(f"{name} step {trainer.step}: {(time.perf_counter() - start) / len(chunk):.2f} s/step",
          flush=True)
    tokens += sum(r["tokens"] for r in records)
    done = train_seconds >= _SECONDS.value
    if train_seconds >= next_eval or done:
      val = trainer.evaluate(validation)
      write({"arm": name, "overrides": overrides, "parameters": parameters,
             "step": trainer.step, "train_seconds": round(train_seconds, 1),
             "target_tokens": int(tokens), "tokens_per_second": tokens / train_seconds,
             "train_loss_last_chunk": sum(r["loss"] * r["tokens"] for r in records)
                                      / max(sum(r["tokens"] for r in records), 1.0),
             "val_loss": val["loss"], "val_accuracy": val["accuracy"],
             "learning_rate": trainer.learning_rate, "final": done, **machine_load()})
      next_eval += _EVAL_EVERY.value
    if done:
      return


def tf_dataset_from(batches, element_spec):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=element_spec)


def main(argv):
  del argv
  out = Path(_OUT.value)
  out.parent.mkdir(parents=True, exist_ok=True)
  finished = set()
  if out.exists():
    for line in out.read_text().splitlines():
      record = json.loads(line)
      if record.get("final"):
        finished.add(record["arm"])
  tokenizers = load_tokenizers(_TOKENIZER.value)
  train_pairs = ted.local_split_pairs(_DATA_DIR.value, "train")
  validation_pairs = ted.local_split_pairs(_DATA_DIR.value, "validation")
  max_tokens = cpu_2h.get_config().data.max_tokens
  tokenized_train = pipeline.tokenize_pairs(ted.pairs_to_dataset(train_pairs), tokenizers,
                                            max_tokens).cache()
  for _ in tokenized_train:  # fills the cache now: tokenizing is not training time
    pass

  def write(record):
    print(json.dumps(record), flush=True)
    with open(out, "a", encoding="utf-8") as f:
      f.write(json.dumps(record) + "\n")

  for text in _ARMS.value:
    name, overrides = parse_arm(text)
    if name in finished:
      print(f"{name}: done already in {out}; skipped", flush=True)
      continue
    run_arm(name, overrides, tokenizers, tokenized_train, validation_pairs, write)


if __name__ == "__main__":
  flags.mark_flags_as_required(["arm", "out"])
  app.run(main)
