r"""One command for an accelerator: the base model and Table 3's arms to convergence, then BLEU.

  python lab/bench/accelerator/converge.py --data=prepared/base --output=runs/converged

For one 10-minute call on one GPU with only JAX and Keras (README.md beside
this file: what to carry and install). ``--minutes`` (default 9) is split:
first the paper's base configuration (``configs/base.py``), then Table 3's
arms, base-sized, most informative first, as long as time is left:

``A_h1`` ``A_h4`` ``A_h16`` ``A_h32``  row A: h heads, d_k = d_v = 512 / h
``B_dk16`` ``B_dk32``                  row B: d_k (ours narrows d_v with it)
``sqrt_unscaled``                      embeddings not × √d_model (no paper row)
``sqrt_normal_unscaled``               ... and drawn N(0, d_model^-0.5)

Each run is ``train.py`` under ``KERAS_BACKEND=jax`` with a time budget
(``training.time_budget_minutes``: whole epochs, the rate falling to zero
over the last third of them), checkpointing every epoch. Stopped on the
validation loss: the epoch of the lowest one is the run's end, and the
``--average`` checkpoints up to it are averaged (§6.1) and scored with beam
search (beam 4, α 0.6) by ``evaluate.py`` from the prepared folder
(``transformer/inference/evaluation_jax.py``: no TensorFlow), on the test
split (a folder prepared before prepare.py wrote it is refused: prepare it again). As the base model's
three-way sharing needs a joint vocabulary, on shards of separate ones the
output layer is tied to the target embedding instead (as ``run.py`` does).

Written to ``--output``: per run ``<run>/result.json`` (the epochs' metrics,
the epoch chosen, the checkpoints averaged, the BLEU record in both
scorings) and ``<run>/samples.txt`` (20 translations beside their
references), and ``summary.json`` over the runs. The run folders (weights)
stay under ``<output>/runs/``: do not commit those.

``--small`` runs the same on a few hundred pairs with one-layer models for
three epochs each (no time budget) on a CPU (``lab/tests/test_accelerator.py``):
it checks the command, not the numbers.

Its flags are checked before any work. SIGINT or SIGTERM goes on to the child
running (``children.py``): a ``train.py`` saves its checkpoint and exits, and
``converge.py`` says in one line where that run stopped and exits 128 + the
signal. The same command resumes: the runs scored already are kept, the
stopped one goes on from its checkpoint; an ``--output`` of another command
is refused.
"""

import argparse
import json
import os
from pathlib import Path
import shutil
import sys
import time

REPO_DIR = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO_DIR))
sys.path.insert(0, str(Path(__file__).resolve().parent))
# Its own imports of the library too (the references, the refusals): Keras on JAX,
# no TensorFlow loaded where it is installed.
os.environ["KERAS_BACKEND"] = "jax"

import children  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.data import shards  # pylint: disable=g-import-not-at-top,wrong-import-position

# (name, train.py overrides), most informative first.
ARMS = (
    ("base", []),
    *((f"A_h{h}", [f"--config.model.num_heads={h}"]) for h in (1, 4, 16, 32)),
    *((f"B_dk{d}", [f"--config.model.key_dim={d}"]) for d in (16, 32)),
    ("sqrt_unscaled", ["--config.model.scale_embeddings=false"]),
    ("sqrt_normal_unscaled", ["--config.model.scale_embeddings=false",
                              "--config.model.embedding_initializer=normal"]),
)
SMALL = ["--train_examples=256", "--validation_examples=64", "--config.model.num_layers=1",
         "--config.model.d_model=32", "--config.model.dff=64", "--config.model.num_heads=4",
         "--config.data.max_tokens=32", "--config.data.tokens_per_batch=1024"]
SAMPLES = 20


def script(*args, capture=False, run_dir=None) -> children.Finished:
  """Runs a script of the repository under JAX; exits with its status if it
  fails, and with a line saying where ``run_dir``'s run stopped after a signal."""
  print(f"== {' '.join(args)}", flush=True)
  done = children.run_child([sys.executable, *args], cwd=REPO_DIR,
                            env=children.python_env(REPO_DIR), capture_stdout=capture)
  if done.signum is not None:
    raise children.Stopped(done.signum, children.where_stopped(run_dir) if run_dir else "")
  if done.returncode:
    sys.exit(done.returncode)
  return done


def train(run_dir: Path, data: str, overrides, minutes: float, small: bool, joint: bool):
  flags = ["--config=configs/base.py", "--config.training.keep_checkpoints=1000"]
  if small:
    # Three epochs, not a time budget, which a loaded CPU's compilation would eat.
    flags += SMALL + ["--config.training.epochs=3"]
  else:
    flags += [f"--config.training.time_budget_minutes={minutes:.3f}",
              "--config.training.cooldown_fraction=0.33", "--config.training.epochs=1000",
              "--mixed_precision=mixed_bfloat16"]
  if not joint:
    flags += ["--config.model.output_weights=tied", "--config.data.vocabulary=separate"]
  flags += overrides  # last: the arm's change wins over --small's shapes
  script("train.py", *flags, f"--data={data}", f"--model_dir={run_dir}", "--export=false",
         "--log_every_steps=1000", run_dir=run_dir)


def stopped_on_validation_loss(run_dir: Path, average: int, selected: Path):
  """``(epochs, best epoch record, checkpoints)``: a copy of the run folder in
  ``selected`` whose checkpoints end at the epoch of the lowest validation
  loss, the last ``average`` of them kept."""
  epochs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
  epochs = [record for record in epochs if "epoch" in record]
  best = min(epochs, key=lambda record: record["val_loss"])
  kept = [path for path in sorted((run_dir / "checkpoints").glob("step-*"),
                                  key=lambda path: int(path.name.split("-")[1]))
          if int(path.name.split("-")[1]) <= best["step"]][-average:]
  if selected.exists():  # a stopped command's, rerun
    shutil.rmtree(selected)
  shutil.copytree(run_dir, selected, ignore=shutil.ignore_patterns("checkpoints", "logs",
                                                                   "train.lock"))
  for path in kept:
    shutil.copytree(path, selected / "checkpoints" / path.name)
  return epochs, best, [path.name for path in kept]


def score(selected: Path, data: str, split: str, count: int, small: bool) -> dict:
  flags = [f"--model_dir={selected}", f"--data={data}", f"--split={split}", "--method=beam",
           f"--average_last={count}", f"--output_dir={selected / 'bleu'}"]
  if small:
    flags.append("--max_sentences=24")
  return json.loads(script("evaluate.py", *flags, capture=True).stdout)


def write_samples(path: Path, record: dict, references) -> None:
  hypotheses = Path(record["hypotheses_file"]).read_text(encoding="utf-8").splitlines()
  path.write_text("".join(f"{h}\n  reference: {r}\n"
                          for h, r in zip(hypotheses[:SAMPLES], references)), encoding="utf-8")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--data", required=True, help="a folder written by prepare.py")
  parser.add_argument("--output", required=True, help="a new folder for the results")
  parser.add_argument("--minutes", type=float, default=9.0, help="the whole command's time")
  parser.add_argument("--base_share", type=float, default=0.4,
                      help="the base run's share of the training time; the arms share the rest")
  parser.add_argument("--arm_minutes", type=float, default=1.5, help="training time per arm")
  parser.add_argument("--average", type=int, default=5, help="checkpoints averaged (§6.1)")
  parser.add_argument("--arms", default=",".join(name for name, _ in ARMS),
                      help="the runs to make, in this order (default: base, then every arm)")
  parser.add_argument("--small", action="store_true", help="a few hundred pairs, small models")
  args = parser.parse_args()
  for name, value, low in (("average", args.average, 1), ("minutes", args.minutes, 1e-9),
                           ("arm_minutes", args.arm_minutes, 1e-9),
                           ("base_share", args.base_share, 1e-9)):
    if value < low:  # --average=0 would average every kept checkpoint ([-0:])
      sys.exit(f"converge.py: error: --{name} must be {'>= 1' if low == 1 else '> 0'}, "
               f"got {value}")
  if args.base_share > 1:
    sys.exit(f"converge.py: error: --base_share must be at most 1, got {args.base_share}")
  arms = dict(ARMS)
  unknown = sorted(set(args.arms.split(",")) - set(arms))
  if unknown:
    sys.exit(f"converge.py: error: unknown --arms {', '.join(unknown)}; choose from "
             f"{', '.join(arms)}")
  if not shards.is_prepared(args.data):
    sys.exit(f"converge.py: error: --data={args.data} is not a folder written by prepare.py")
  output = Path(args.output)
  command = {key: value for key, value in vars(args).items() if key != "output"}
  command["data"] = str(Path(args.data).resolve())
  resumed = children.check_rerun(output, command, "converge.py")
  manifest = shards.read_manifest(args.data)
  split = "test"
  if split not in manifest["splits"]:
    # Deferred: it loads Keras and JAX, which --help and the other checks do not need.
    from transformer.inference import evaluation_jax  # pylint: disable=g-import-not-at-top
    sys.exit(f"converge.py: error: {evaluation_jax.missing_split(args.data, split)}")
  children.record_command(output, command)
  deadline = time.monotonic() + 60 * args.minutes
  joint = manifest.get("vocabulary") == "joint"
  device = children.device_name(REPO_DIR)
  references = raw_references(args.data, manifest, split)
  summary = []
  if resumed and (output / "summary.json").is_file():
    summary = json.loads((output / "summary.json").read_text())
    print(f"== resuming in {output}: {len(summary)} run(s) scored", flush=True)
  for name in args.arms.split(","):
    overrides = arms[name]
    if any(run["run"] == name for run in summary):
      continue
    left = (deadline - time.monotonic()) / 60
    minutes = args.minutes * args.base_share if name == "base" else args.arm_minutes
    # Compiling, the epochs' validation and the scoring take about as long
    # again as the training budget (lab/results/gpu/: 160 s of compiling).
    if left < 2 * minutes:
      print(f"== {name}: not run, {left:.1f} minutes left", flush=True)
      continue
    run_dir, selected = output / "runs" / name, output / "runs" / f"{name}.selected"
    train(run_dir, args.data, overrides, minutes, args.small, joint)
    epochs, best, checkpoints = stopped_on_validation_loss(run_dir, args.average, selected)
    record = score(selected, args.data, split, len(checkpoints), args.small)
    result = {"run": name, "overrides": overrides, "device": device, "split": split,
              "epochs": epochs, "stopped_at": best, "checkpoints_averaged": checkpoints,
              "bleu": record["bleu"], "whole_word_bleu": record["whole_word"]["bleu"],
              "record": record}
    (output / name).mkdir(parents=True, exist_ok=True)
    (output / name / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    write_samples(output / name / "samples.txt", record, references)
    summary.append({key: result[key] for key in ("run", "device", "split", "bleu",
                                                 "whole_word_bleu")}
                   | {"epochs": len(epochs), "best_epoch": best["epoch"],
                      "val_loss": best["val_loss"]})
    print(json.dumps(summary[-1]), flush=True)
    # After each run: a stopped command's rerun keeps what was scored.
    (output / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
  (output / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def raw_references(data: str, manifest: dict, split: str):
  """The split's references as in the data (for the samples), from the prepared folder."""
  from transformer.inference import evaluation_jax  # pylint: disable=g-import-not-at-top
  return evaluation_jax.raw_references(data, split, manifest["splits"][split]["pairs"])


if __name__ == "__main__":
  children.main_of("converge.py", main)
