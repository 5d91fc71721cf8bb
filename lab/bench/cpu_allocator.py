r"""TensorFlow's CPU allocator: the default (the C library's malloc) against its BFC allocator.

  PYTHONPATH=. python lab/bench/cpu_allocator.py --rounds=2 --seconds=120 \
      --output=lab/bench/results/cpu_allocator.json

``TF_CPU_ALLOCATOR_USE_BFC=1`` makes TensorFlow keep the memory it frees for
its next tensors instead of handing it back to malloc, which returns large
blocks to the kernel; every step then asks the kernel for fresh pages, each a
page fault and time spent in the kernel (``sys``). The variable is read when
TensorFlow starts, so each arm is its own process: ``lab/bench/sweep.py`` training
``configs/cpu_2h.py`` for ``--seconds`` of training time, the arms alternating
(A/B/A/B) so that a change in what else the machine does hits both alike.

Per process: real target tokens/s (from the sweep's own clock, tokenizing and
the first steps' tracing included), user and system CPU seconds
and minor page faults of the whole process (``resource.getrusage`` of the
child). The JSON holds every round and, per round pair, BFC's tokens/s over the
default's.
"""

import json
import os
from pathlib import Path
import resource
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

from lab.bench import machine

_ROUNDS = flags.DEFINE_integer("rounds", 2, "A/B pairs.")
_SECONDS = flags.DEFINE_float("seconds", 120, "Training seconds per process.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON output file.")
_ALONGSIDE = flags.DEFINE_string("alongside", "nothing", "What else ran on the machine (recorded).")

ARMS = {"malloc": {"TF_CPU_ALLOCATOR_USE_BFC": "0"}, "bfc": {"TF_CPU_ALLOCATOR_USE_BFC": "1"}}


def run_arm(name, seconds, folder):
  """One sweep process with the arm's environment; its record and resource use."""
  out = Path(folder) / f"{name}.jsonl"
  out.unlink(missing_ok=True)
  env = {**os.environ, **ARMS[name], "PYTHONPATH": str(machine.REPO_ROOT)}
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  subprocess.run([sys.executable, str(machine.REPO_ROOT / "lab" / "bench" / "sweep.py"),
                  f"--seconds={seconds}", f"--eval_every={10 * seconds}", f"--arm={name}:",
                  f"--out={out}"], env=env, check=True, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  record = json.loads(out.read_text().splitlines()[-1])
  return {"arm": name, "step": record["step"], "train_seconds": record["train_seconds"],
          "tokens_per_second": record["tokens_per_second"],
          "user_seconds": after.ru_utime - before.ru_utime,
          "system_seconds": after.ru_stime - before.ru_stime,
          "minor_page_faults": after.ru_minflt - before.ru_minflt}


def main(argv):
  del argv
  if not _OUTPUT.value:
    sys.exit("--output is required")
  rounds = []
  with tempfile.TemporaryDirectory() as folder:
    for round_index in range(_ROUNDS.value):
      pair = {name: run_arm(name, _SECONDS.value, folder) for name in ARMS}
      pair["bfc_over_malloc_tokens_per_second"] = (
          pair["bfc"]["tokens_per_second"] / pair["malloc"]["tokens_per_second"])
      print(json.dumps(pair), flush=True)
      rounds.append(pair)
  ratios = [pair["bfc_over_malloc_tokens_per_second"] for pair in rounds]
  result = {"machine": machine.description(), "alongside": _ALONGSIDE.value,
            "seconds_per_process": _SECONDS.value, "rounds": rounds,
            "bfc_over_malloc_tokens_per_second": {"min": min(ratios), "max": max(ratios)}}
  Path(_OUTPUT.value).parent.mkdir(parents=True, exist_ok=True)
  Path(_OUTPUT.value).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
  print(json.dumps(result["bfc_over_malloc_tokens_per_second"]))


if __name__ == "__main__":
  app.run(main)
