r"""The phases of one accelerator call, each under its own deadline (``device_call.sh`` runs it).

  python lab/bench/accelerator/call.py --out=$OUT --work=/tmp/device_call

Most informative first, each phase as long as the call's time allows
(``--seconds``, the whole command's; a phase gets at most its own share,
``PHASES``), and each run in it stopped by its validation loss: the driver
reads the run's ``metrics.jsonl`` while ``train.py`` trains and, once
``--patience`` epochs have passed without a lower validation loss (or the
phase's deadline has come), sends it one SIGTERM, on which it saves its
checkpoint and exits:

``tutorial``  ``configs/tutorial.py:gpu`` for at most its 20 epochs.
``base``      ``configs/base.py:gpu`` in ``mixed_bfloat16`` until the
              validation loss stops falling; the last ``--average``
              checkpoints up to its lowest averaged (§6.1) and scored on the
              test split with beam 4, α 0.6 (``evaluate.py`` under JAX), in
              both scorings, with 20 sample translations.
``loop``      ``loop_speed.py`` on the tutorial's prepared pairs: the whole
              loop's real target tokens/s against the compiled step's on the
              same batches (it compiles every shape three times: after the
              base model, which needs the minutes more).
``arms``      the tutorial's model with embeddings × √d_model and without,
              each with a tied and an untied output layer, each to its lowest
              validation loss, scored alike.
``table3``    Table 3's rows A (heads) and B (d_k), base-sized, while time is
              left.

After every phase (and every run of one) ``<out>/summary.json`` is written
again, keyed by phase; a phase's record holds numbers only: the validation
``accuracy`` and loss at the epoch chosen, ``bleu`` and ``whole_word_bleu``
where it is scored, ``compile_seconds`` (the sum of the trainer's
``compiled the ... in X s`` lines) apart from ``training_seconds`` (the
epochs' own seconds, as ``metrics.jsonl`` records them), and ``recompiles``
(a compile of a kind and shape that the same process had compiled already).
``<out>`` also gets ``machine.json``, ``metrics.json`` (every run's epoch
records) and ``samples.txt``: at most 5 files, each small, within the
device's return limits. Run folders, checkpoints and the compilation cache
stay under ``--work``; each run keeps only the checkpoints its averaging
needs.

The same command resumes: a phase recorded in ``<work>/summary.json`` is
not run again. SIGINT or SIGTERM goes on to the child running, which saves
its checkpoint; the call then says where it stopped and exits 128 + N.

``--tiny`` runs every phase with one-layer models for a few steps (the arms
and Table 3 with one or two runs each), for the rehearsal on a CPU
(``device_call.sh --rehearsal``).
"""

import argparse
import json
from pathlib import Path
import re
import shutil
import sys
import time

REPO_DIR = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO_DIR))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import children  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.data import shards  # pylint: disable=g-import-not-at-top,wrong-import-position

TUTORIAL_DATA = "prepared/tutorial_gpu"
BASE_DATA = "prepared/base_gpu"
# (phase, its share of the call's seconds at most): the most informative first.
PHASES = (("tutorial", 0.35), ("base", 0.60), ("loop", 0.15), ("arms", 1.0), ("table3", 1.0))
ARMS = (
    ("scaled_untied", ["--config.model.scale_embeddings=true",
                       "--config.model.output_weights=untied"]),
    ("scaled_tied", ["--config.model.scale_embeddings=true", "--config.model.output_weights=tied"]),
    ("unscaled_untied", ["--config.model.scale_embeddings=false",
                         "--config.model.output_weights=untied"]),
    ("unscaled_tied", ["--config.model.scale_embeddings=false",
                       "--config.model.output_weights=tied"]),
)
TABLE3 = (
    *((f"A_h{h}", [f"--config.model.num_heads={h}"]) for h in (1, 4, 16, 32)),
    *((f"B_dk{d}", [f"--config.model.key_dim={d}"]) for d in (16, 32)),
)
# --tiny: one-layer models on a few hundred pairs, a few steps an epoch, one
# shape (compiling is most of a CPU's time), and a rate that overfits within
# TINY_EPOCHS, so that the validation loss stops the runs.
TINY = ["--train_examples=256", "--validation_examples=64", "--config.model.num_layers=1",
        "--config.model.d_model=32", "--config.model.dff=64", "--config.model.num_heads=4",
        "--config.data.max_tokens=32", "--config.data.bucket_lengths=(32,)",
        "--config.data.tokens_per_batch=1024", "--config.training.warmup_steps=20"]
TINY_EPOCHS = 30
TINY_RUNS = ("scaled_untied", "unscaled_tied", "A_h1")
SAMPLES = 20
COMPILED = re.compile(r"compiled the (training step(?: \(\d+ a dispatch\))?|validation step) "
                      r"for (\d+) × (\d+) in ([\d.]+) s")
# Seconds kept back at the end of the call: the last summary, the files.
RESERVE = 15
# Seconds a train.py has, after the SIGTERM of a deadline, to finish its step
# (a compile under way finishes first) and save; then it is killed.
GRACE = 45


class Tee:
  """This process's stdout, also written to ``<out>/console.txt`` up to 15 MiB
  (the device returns files of 16 MiB at most)."""

  LIMIT = 15 * 2**20

  def __init__(self, stream, path: Path):
    self.stream, self.file, self.written = stream, open(path, "a", encoding="utf-8"), 0

  def write(self, text: str) -> int:
    if self.written + len(text) <= self.LIMIT:
      self.file.write(text)
      self.written += len(text)
    return self.stream.write(text)

  def flush(self) -> None:
    self.file.flush()
    self.stream.flush()

  def __getattr__(self, name):
    return getattr(self.stream, name)


def machine() -> dict:
  """The accelerator, its driver, Python and the packages' versions, said and returned."""
  import importlib.metadata  # pylint: disable=g-import-not-at-top
  import platform  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  record = {"python": platform.python_version(), "machine": platform.machine()}
  for package in ("jax", "jaxlib", "keras", "numpy", "ml-collections", "sacrebleu"):
    try:
      record[package] = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      record[package] = None
  try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                          "--format=csv,noheader"], capture_output=True, text=True, check=False)
    record["gpu"] = smi.stdout.strip() or smi.stderr.strip()
  except OSError:
    record["gpu"] = None  # no NVIDIA driver here
  record["jax_devices"] = children.device_name(REPO_DIR)
  print("== machine: " + ", ".join(f"{key} {value}" for key, value in record.items()), flush=True)
  return record


class Call:
  """The call's clock, its folders and its summary."""

  def __init__(self, args):
    self.args = args
    self.out, self.work = Path(args.out), Path(args.work)
    self.end = time.monotonic() + args.seconds - RESERVE
    self.summary = {}
    self.epochs = {}  # run: its epoch records, for metrics.json
    saved = self.work / "summary.json"
    if saved.is_file():
      state = json.loads(saved.read_text())
      self.summary, self.epochs = state["summary"], state["epochs"]
      print(f"== resuming: {', '.join(self.summary) or 'no phase'} done", flush=True)

  def left(self) -> float:
    return self.end - time.monotonic()

  def env(self) -> dict:
    # One compilation cache for the trainers and the evaluation (evaluate.py's
    # --compilation_cache=auto reads it too, where it has one).
    return {**children.python_env(REPO_DIR),
            "JAX_COMPILATION_CACHE_DIR": str(self.work / "jax_cache")}

  def write(self) -> None:
    """summary.json and metrics.json in --out, and the state in --work."""
    self.out.mkdir(parents=True, exist_ok=True)
    for folder, name, value in ((self.out, "summary.json", self.summary),
                                (self.out, "metrics.json", self.epochs),
                                (self.work, "summary.json",
                                 {"summary": self.summary, "epochs": self.epochs})):
      partial = folder / f".{name}.partial"
      partial.write_text(json.dumps(value, indent=2) + "\n")
      partial.replace(folder / name)


def compile_counter():
  """``(on_line, totals)``: ``on_line`` reads one train.py process's console;
  ``totals`` holds its compile seconds, compiles and recompiles so far."""
  seen, totals = set(), {"compile_seconds": 0.0, "compiles": 0, "recompiles": 0}

  def on_line(line: str) -> None:
    match = COMPILED.search(line)
    if not match:
      return
    kind, rows, length, seconds = match.groups()
    key = (kind, rows, length)
    totals["recompiles" if key in seen else "compiles"] += 1
    totals["compile_seconds"] += float(seconds)
    seen.add(key)

  return on_line, totals


def train_run(call: Call, name: str, flags, data: str, deadline: float, max_epochs: int):
  """Trains one run until its validation loss stops falling (or ``deadline``);
  returns its record (numbers only) and its folder."""
  args = call.args
  run_dir = call.work / "runs" / name
  # What averaging up to the best epoch needs, and a margin for the epochs that
  # end between the driver's reading of the loss and the child's stop.
  keep = args.average + args.patience + 8
  command = [sys.executable, "train.py", *flags, f"--data={data}", f"--model_dir={run_dir}",
             "--strategy=auto", "--export=false", "--log_every_steps=100000",
             f"--config.training.epochs={max_epochs}",
             f"--config.training.keep_checkpoints={keep}",
             "--config.training.checkpoint_every_steps=1000000000"]
  print(f"== {name}: {' '.join(command[1:])} ({deadline - time.monotonic():.0f} s at most)",
        flush=True)

  metrics, read = run_dir / "metrics.jsonl", [None]

  def converged() -> bool:
    try:
      stamp = metrics.stat().st_mtime_ns
    except FileNotFoundError:
      return False
    if stamp == read[0]:  # read again only when an epoch was added
      return False
    read[0] = stamp
    losses = [record["val_loss"] for record in children.epoch_records(run_dir)]
    return bool(losses) and len(losses) - 1 - losses.index(min(losses)) >= args.patience

  on_line, totals = compile_counter()
  done = children.run_child(command, cwd=REPO_DIR, env=call.env(), deadline=deadline,
                            grace=GRACE, on_line=on_line, stop_when=converged, stop_every=0.05)
  if done.signum is not None:
    raise children.Stopped(done.signum, children.where_stopped(run_dir))
  # 143: the SIGTERM this driver sent (converged, or the deadline).
  if done.returncode not in (0, 143) or (done.returncode == 143 and not (
      done.deadline_passed or done.stopped_early)):
    raise RuntimeError(f"{name}: train.py exited {done.returncode}")
  epochs = children.epoch_records(run_dir)
  if not epochs:
    raise RuntimeError(f"{name}: no epoch finished before the deadline")
  call.epochs[name] = epochs
  best = min(epochs, key=lambda record: record["val_loss"])
  later = epochs[1:] or epochs
  seconds = sum(record["seconds"] for record in later)
  record = {
      "epochs": len(epochs), "best_epoch": best["epoch"], "steps": epochs[-1]["step"],
      "val_loss": best["val_loss"], "accuracy": best["val_accuracy"],
      "last_accuracy": epochs[-1]["val_accuracy"],
      "compile_seconds": round(totals["compile_seconds"], 2),
      "training_seconds": round(sum(record["seconds"] for record in epochs), 2),
      "first_epoch_seconds": round(epochs[0]["seconds"], 2),
      "compiles": totals["compiles"], "recompiles": totals["recompiles"],
      "target_tokens_per_second": round(
          sum(r["tokens_per_second"] * r["seconds"] for r in later) / seconds if seconds else 0,
          1),
      "wall_seconds": round(done.seconds, 2),
      "stopped_by_validation_loss": int(done.stopped_early),
      "stopped_by_deadline": int(done.deadline_passed and not done.stopped_early),
  }
  keep_for_averaging(run_dir, best["step"], args.average)
  return record, run_dir


def keep_for_averaging(run_dir: Path, best_step: int, average: int) -> None:
  """Deletes every checkpoint but the last ``average`` up to ``best_step`` (the
  first ``average`` after it, saying so, if the rotation dropped those)."""
  steps = sorted(int(path.name.split("-")[1]) for path in (run_dir / "checkpoints").glob("step-*")
                 if path.name.split("-")[1].isdigit())
  kept = [step for step in steps if step <= best_step][-average:]
  if not kept:
    kept = steps[:average]
    print(f"== {run_dir.name}: no checkpoint left up to step {best_step}; averaging steps "
          f"{kept} after it", flush=True)
  for step in steps:
    if step not in kept:
      shutil.rmtree(run_dir / "checkpoints" / f"step-{step}")


def score(call: Call, run_dir: Path, data: str, deadline: float) -> dict:
  """Beam-search BLEU of the averaged checkpoints on the test split, both scorings."""
  averaged = len(list((run_dir / "checkpoints").glob("step-*")))
  command = [sys.executable, "evaluate.py", f"--model_dir={run_dir}", f"--data={data}",
             "--split=test", "--method=beam", f"--average_last={averaged}",
             f"--output_dir={run_dir / 'bleu'}"]
  if call.args.tiny:
    command.append("--max_sentences=8")
  print(f"== scoring: {' '.join(command[1:])}", flush=True)
  done = children.run_child(command, cwd=REPO_DIR, env=call.env(), deadline=deadline, grace=10,
                            capture_stdout=True)
  if done.signum is not None:
    raise children.Stopped(done.signum, f"scoring {run_dir.name}")
  if done.returncode:
    raise RuntimeError(f"evaluate.py exited {done.returncode} on {run_dir.name}")
  result = json.loads(done.stdout)
  result["scoring_seconds"] = done.seconds
  result["checkpoints_averaged"] = averaged
  return result


def scored(record: dict, result: dict) -> dict:
  return {**record, "bleu": result["bleu"], "whole_word_bleu": result["whole_word"]["bleu"],
          "checkpoints_averaged": result["checkpoints_averaged"],
          "scoring_seconds": round(result["scoring_seconds"], 2)}


def write_samples(call: Call, result: dict, data: str, heading: str) -> None:
  hypotheses = Path(result["hypotheses_file"]).read_text(encoding="utf-8").splitlines()
  references = shards.read_references(data, "test") or []
  with open(call.out / "samples.txt", "a", encoding="utf-8") as samples:
    samples.write(f"# {heading}\n")
    samples.writelines(f"{h}\n  reference: {r}\n"
                       for h, r in zip(hypotheses[:SAMPLES], references))


def tutorial_flags(tiny: bool):
  return ["--config=configs/tutorial.py:gpu", *(TINY if tiny else [])]


def base_flags(data: str, tiny: bool):
  flags = ["--config=configs/base.py:gpu", "--mixed_precision=mixed_bfloat16"]
  if shards.read_manifest(data).get("vocabulary") != "joint":
    # Three-way sharing needs one joint vocabulary (prepare.py --tokenizer=build).
    flags += ["--config.model.output_weights=tied", "--config.data.vocabulary=separate"]
  return flags + (TINY if tiny else [])


def phase_tutorial(call: Call, deadline: float) -> dict:
  args = call.args
  record, _ = train_run(call, "tutorial", tutorial_flags(args.tiny), args.tutorial_data,
                        deadline, TINY_EPOCHS if args.tiny else 20)
  return record


def phase_loop(call: Call, deadline: float) -> dict:
  args = call.args
  output = call.work / "loop_speed.json"
  command = [sys.executable, "lab/bench/accelerator/loop_speed.py",
             f"--data={args.tutorial_data}", "--stack=8", f"--output={output}"]
  command += ["--small", "--pairs=128", "--rounds=1"] if args.tiny else ["--rounds=3"]
  print(f"== loop_speed: {' '.join(command[1:])}", flush=True)
  done = children.run_child(command, cwd=REPO_DIR, env=call.env(), deadline=deadline, grace=5)
  if done.signum is not None:
    raise children.Stopped(done.signum, "in loop_speed.py")
  if done.returncode or not output.is_file():
    raise RuntimeError(f"loop_speed.py exited {done.returncode}")
  speed = json.loads(output.read_text())
  return {"loop_tokens_per_second": round(speed["loop_8"]["target_tokens_per_second"], 1),
          "step_tokens_per_second": round(speed["step_8"]["target_tokens_per_second"], 1),
          "loop_over_step": round(speed["loop_over_step_8"]["seconds"], 4),
          "wall_seconds": round(done.seconds, 2)}


def trained_and_scored(call: Call, name: str, flags, data: str, deadline: float,
                       max_epochs: int, samples: bool = False) -> dict:
  # The scoring's share: a quarter of the run's time, at most 90 s.
  span = deadline - time.monotonic()
  training_deadline = deadline - min(90.0, 0.25 * span)
  record, run_dir = train_run(call, name, flags, data, training_deadline, max_epochs)
  result = score(call, run_dir, data, deadline)
  if samples:
    write_samples(call, result, data, f"{name}: test, beam 4, alpha 0.6, averaged "
                  f"{result['checkpoints_averaged']} checkpoints")
  return scored(record, result)


def phase_base(call: Call, deadline: float) -> dict:
  data = call.args.base_data
  return trained_and_scored(call, "base", base_flags(data, call.args.tiny), data,
                            deadline, TINY_EPOCHS if call.args.tiny else 1000, samples=True)


def phase_of_runs(call: Call, phase: str, runs, flags, data: str, deadline: float,
                  max_epochs: int) -> dict:
  """Each of ``runs`` with an equal share of what is left; a run without time for
  a first epoch and its scoring is left out, saying so."""
  records = call.summary.get(phase, {})
  todo = [(name, extra) for name, extra in runs
          if name not in records and (name in TINY_RUNS or not call.args.tiny)]
  for index, (name, extra) in enumerate(todo):
    share = (deadline - time.monotonic()) / (len(todo) - index)
    if share < call.args.min_run_seconds:
      print(f"== {phase}/{name}: not run, {share:.0f} s left for it", flush=True)
      break
    records[name] = trained_and_scored(call, name, flags + extra, data,
                                       time.monotonic() + share, max_epochs)
    call.summary[phase] = records
    call.write()
  return records


def phase_arms(call: Call, deadline: float) -> dict:
  return phase_of_runs(call, "arms", ARMS, tutorial_flags(call.args.tiny),
                       call.args.tutorial_data,
                       deadline, TINY_EPOCHS if call.args.tiny else 100)


def phase_table3(call: Call, deadline: float) -> dict:
  data = call.args.base_data
  return phase_of_runs(call, "table3", TABLE3, base_flags(data, call.args.tiny), data,
                       deadline, TINY_EPOCHS if call.args.tiny else 1000)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", required=True, help="what comes back: summary.json and a few files")
  parser.add_argument("--work", required=True, help="run folders, checkpoints, the cache")
  parser.add_argument("--seconds", type=float, default=540,
                      help="the whole call's seconds: the command's 600-s limit less the "
                           "start, and a stopped run's last step and checkpoint (GRACE)")
  parser.add_argument("--patience", type=int, default=5,
                      help="epochs without a lower validation loss before a run stops")
  parser.add_argument("--average", type=int, default=5, help="checkpoints averaged (§6.1)")
  parser.add_argument("--min_run_seconds", type=float, default=60,
                      help="a run of the arms or Table 3 needs at least this many seconds")
  parser.add_argument("--phases", default=",".join(name for name, _ in PHASES),
                      help="the phases to run, in this order")
  parser.add_argument("--tiny", action="store_true", help="one-layer models, a few steps each")
  parser.add_argument("--tutorial_data", default=TUTORIAL_DATA,
                      help="the tutorial's prepared folder (pack.py's)")
  parser.add_argument("--base_data", default=BASE_DATA,
                      help="the base model's prepared folder (pack.py's)")
  args = parser.parse_args()
  known = [name for name, _ in PHASES]
  unknown = sorted(set(args.phases.split(",")) - set(known))
  if unknown:
    sys.exit(f"call.py: error: unknown --phases {', '.join(unknown)}; choose from "
             f"{', '.join(known)}")
  for name in ("seconds", "patience", "average", "min_run_seconds"):
    if getattr(args, name) < 1:
      sys.exit(f"call.py: error: --{name} must be >= 1, got {getattr(args, name)}")
  for data in (args.tutorial_data, args.base_data):
    if not shards.is_prepared(REPO_DIR / data):
      sys.exit(f"call.py: error: {data} is not a prepared folder; run "
               "lab/bench/accelerator/pack.py and carry what it prints")
  if Path(args.work).resolve().is_relative_to(Path(args.out).resolve()):
    sys.exit(f"call.py: error: --work={args.work} is inside --out: run folders do not go back")
  call = Call(args)
  call.work.mkdir(parents=True, exist_ok=True)
  call.out.mkdir(parents=True, exist_ok=True)
  sys.stdout = Tee(sys.stdout, call.out / "console.txt")
  (call.out / "machine.json").write_text(json.dumps(machine(), indent=2) + "\n")
  phases = dict(PHASES)
  functions = {"tutorial": phase_tutorial, "base": phase_base, "loop": phase_loop,
               "arms": phase_arms, "table3": phase_table3}
  for name in args.phases.split(","):
    if name in call.summary and name not in ("arms", "table3"):
      continue
    left = call.left()
    seconds = min(left, phases[name] * args.seconds)
    if seconds < args.min_run_seconds:
      print(f"== {name}: not run, {left:.0f} s left", flush=True)
      continue
    start = time.monotonic()
    print(f"== phase {name}: {seconds:.0f} s at most", flush=True)
    try:
      record = functions[name](call, start + seconds)
    except RuntimeError as e:  # a failed run ends its phase, not the call
      print(f"== {name}: {e}", flush=True)
      continue
    if record:
      call.summary[name] = record
    call.write()
    print(f"== phase {name}: done in {time.monotonic() - start:.0f} s", flush=True)
  call.write()
  print(json.dumps(call.summary), flush=True)


if __name__ == "__main__":
  children.main_of("call.py", main)
