r"""One command for an accelerator: train from prepared shards on Keras and JAX.

  python lab/bench/accelerator/run.py --data=prepared/tutorial --output=runs/accelerator

(README.md beside this file: what to carry to a machine with JAX but no
TensorFlow or Keras, and how to install it offline.) Two runs of
``train.py`` under ``KERAS_BACKEND=jax`` on every local device, one after the
other, each printing per epoch its training loss, validation loss and
accuracy and target tokens/s (train.py's epoch lines):

``tutorial``  ``configs/tutorial.py:gpu``: 20 epochs of length-bucketed
              batches of 2,048 tokens, 8 steps a dispatch, float32, with an
              empty compilation cache (``<output>/jax_cache``).
``tutorial_warm``  the same again in a new run folder, with the cache the
              first run filled: a rerun's start.
``base``      ``configs/base.py:gpu`` (6 layers, d_model 512, batches of 25,000
              tokens a side) in ``mixed_bfloat16`` for ``--base_epochs``
              epochs. Its three-way sharing needs one joint vocabulary
              (shards prepared with ``--config=configs/base.py
              --tokenizer=build``); on other shards (the tutorial's separate
              pt and en vocabularies) the output layer is tied to the target
              embedding instead (``output_weights=tied``), as the run's line
              says.

Then one JSON line per run on stdout (also ``<output>/summary.json``): the
device, the run's wall seconds end to end (train.py's start to its exit), epochs, the target tokens/s of the epochs after the first (whose time
holds the compilations) and the last validation loss and accuracy. Exit
status: 0 when both runs finished, else the first failing run's (1 for a
NaN/Inf loss, with train.py's one line saying so).

``--small`` runs both on a few hundred pairs with small models, for a CPU:
it checks the command, not the speed.

Its flags are checked before any work. SIGINT (Ctrl-C) or SIGTERM goes on to
the ``train.py`` running (``children.py``): it saves its checkpoint and
exits, and ``run.py`` says in one line where that run stopped and exits 128 +
the signal. The same command resumes: the runs already done are kept (the
output folder's ``summary.json``, written after each run), the stopped one
goes on from its checkpoint; an ``--output`` of another command is refused.
"""

import argparse
import json
from pathlib import Path
import sys

REPO_DIR = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO_DIR))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import children  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.data import shards  # pylint: disable=g-import-not-at-top,wrong-import-position

# Overrides of --small: both runs take seconds on a CPU.
SMALL = ["--train_examples=256", "--validation_examples=64", "--config.model.num_layers=1",
         "--config.model.d_model=32", "--config.model.dff=64", "--config.model.num_heads=4",
         "--config.data.max_tokens=32", "--config.data.bucket_lengths=(16, 32)"]


def runs(data: str, small: bool, base_epochs: int):
  """``{name: train.py flags}``."""
  joint = shards.read_manifest(data).get("vocabulary") == "joint"  # prepare.py --tokenizer=build
  base = ["--config=configs/base.py:gpu", "--mixed_precision=mixed_bfloat16",
          f"--config.training.epochs={base_epochs}"]
  if not joint:
    base += ["--config.model.output_weights=tied", "--config.data.vocabulary=separate"]
  tutorial = ["--config=configs/tutorial.py:gpu"]
  if small:
    tutorial += SMALL + ["--config.training.epochs=2"]
    # --base_epochs last: it wins over --small's shapes.
    base += SMALL + ["--config.data.tokens_per_batch=1024", f"--config.training.epochs={base_epochs}"]
  return {"tutorial": tutorial, "tutorial_warm": tutorial, "base": base}


def train(name: str, flags, data: str, output: Path):
  """Runs train.py; its epoch lines and errors go to this console. Returns its
  exit status and wall seconds; a signal that stopped it is :class:`children.Stopped`."""
  command = [sys.executable, "train.py", *flags, f"--data={data}",
             f"--model_dir={output / name}", "--strategy=auto", "--export=false",
             "--log_every_steps=1000", f"--compilation_cache={output / 'jax_cache'}"]
  print(f"== {name}: {' '.join(command[1:])}", flush=True)
  done = children.run_child(command, cwd=REPO_DIR, env=children.python_env(REPO_DIR))
  if done.signum is not None:
    raise children.Stopped(done.signum, children.where_stopped(output / name))
  print(f"== {name}: exit {done.returncode} after {done.seconds:.0f} s", flush=True)
  return done.returncode, done.seconds


def summary(name: str, run_dir: Path) -> dict:
  """The run's metrics.jsonl in one record."""
  records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
  epochs = [r for r in records if "epoch" in r]
  later = epochs[1:] or epochs
  tokens = sum(r["tokens_per_second"] * r["seconds"] for r in later)
  return {"run": name, "epochs": len(epochs), "steps": epochs[-1]["step"],
          "target_tokens_per_second": tokens / sum(r["seconds"] for r in later),
          "first_epoch_seconds": epochs[0]["seconds"],
          "training_seconds": sum(r["seconds"] for r in epochs),
          "val_loss": epochs[-1]["val_loss"], "val_accuracy": epochs[-1]["val_accuracy"]}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--data", required=True, help="a folder written by prepare.py")
  parser.add_argument("--output", required=True, help="where the run folders go")
  parser.add_argument("--base_epochs", type=int, default=None,
                      help="epochs of the base run (default 10, about 60 steps each on the "
                           "pt-en set; 2 with --small)")
  parser.add_argument("--small", action="store_true", help="a few hundred pairs, small models")
  args = parser.parse_args()
  if args.base_epochs is not None and args.base_epochs < 1:
    sys.exit(f"run.py: error: --base_epochs must be >= 1, got {args.base_epochs}")
  base_epochs = args.base_epochs or (2 if args.small else 10)
  if not shards.is_prepared(args.data):
    sys.exit(f"run.py: error: --data={args.data} is not a folder written by prepare.py")
  output = Path(args.output)
  command = {"data": str(Path(args.data).resolve()), "base_epochs": base_epochs,
             "small": args.small}
  results = []
  if children.check_rerun(output, command, "run.py"):
    if (output / "summary.json").is_file():
      results = json.loads((output / "summary.json").read_text())
    print(f"== resuming in {output}: {len(results)} run(s) done", flush=True)
  children.record_command(output, command)
  device = children.device_name(REPO_DIR)
  print(f"== devices: {device}", flush=True)
  done = {result["run"] for result in results}
  for name, flags in runs(args.data, args.small, base_epochs).items():
    if name in done:
      continue
    returncode, seconds = train(name, flags, args.data, output)
    if returncode:
      sys.exit(returncode)
    results.append({**summary(name, output / name), "wall_seconds": seconds, "device": device})
    print(json.dumps(results[-1]), flush=True)
    # After each run: a stopped command's rerun keeps what finished.
    (output / "summary.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
  children.main_of("run.py", main)
