r"""How long the tests take: the whole suite and the quick tier, wall and CPU time.

  python lab/bench/suite_time.py                  # both tiers, one after the other
  python lab/bench/suite_time.py --tiers=quick

Times README's test commands (``python -m pytest`` and ``python -m pytest -m
"not slow"``) with pytest's cache in a new temporary folder, as on a fresh
clone in CI (the guide's tokenizers are then built within the run). Writes
``--output``: per tier the command, its exit code and test counts, wall
seconds, CPU seconds of everything it waited for (pytest, its workers and
their subprocesses), its slowest tests and those that failed; the machine; and what else was
running at the start and the end of each tier, since a timing beside other work
is not a measurement.
"""

import json
import os
from pathlib import Path
import re
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

from absl import app
from absl import flags

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# The environment the tests get: as the shell gave it, before this process
# sets TensorFlow's allocator and log level for itself.
TEST_ENVIRONMENT = dict(os.environ)

from lab.bench import machine  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.run import runtime  # pylint: disable=g-import-not-at-top,wrong-import-position

TIERS = {"whole": [], "quick": ["-m", "not slow"]}

_TIERS = flags.DEFINE_list("tiers", list(TIERS), f"Which tiers to time, in order: {list(TIERS)}.")
_PYTEST_ARGS = flags.DEFINE_list(
    "pytest_args", [], "More pytest arguments for every tier, e.g. a test file (comma-separated).")
_OUTPUT = flags.DEFINE_string("output", str(machine.REPO_ROOT / "lab" / "bench" / "results" /
                                            "suite_time.json"), "Where the JSON record goes.")


def children_cpu_seconds() -> float:
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def time_tier(name: str):
  """Runs one tier to its end; returns its record."""
  with tempfile.TemporaryDirectory() as scratch:
    report = Path(scratch) / "report.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-o", f"cache_dir={scratch}/cache",
               f"--junitxml={report}", *TIERS[name], *_PYTEST_ARGS.value]
    before = machine.other_activity()
    cpu, start = children_cpu_seconds(), time.time()
    result = subprocess.run(command, cwd=machine.REPO_ROOT, env=TEST_ENVIRONMENT,
                            capture_output=True, text=True, check=False)
    wall, cpu = time.time() - start, children_cpu_seconds() - cpu
    cases = list(ET.parse(report).iter("testcase")) if report.exists() else []
    tests = [(float(case.get("time")), f"{case.get('classname')}::{case.get('name')}")
             for case in cases]
    failed = [f"{case.get('classname')}::{case.get('name')}" for case in cases
              if case.find("failure") is not None or case.find("error") is not None]
  summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
  counts = {kind: int(n) for n, kind in re.findall(
      r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)", summary)}
  return {"command": ["python", "-m", "pytest", *TIERS[name], *_PYTEST_ARGS.value],
          "exit_code": result.returncode,
          "counts": counts, "summary": summary, "wall_seconds": round(wall, 1),
          "cpu_seconds": round(cpu, 1),
          "slowest_tests": [{"seconds": t, "test": n} for t, n in sorted(tests, reverse=True)[:15]],
          "failed_tests": failed,
          "other_activity_before": before,
          "other_activity_after": machine.other_activity()}


def main(argv):
  del argv
  unknown = set(_TIERS.value) - set(TIERS)
  if unknown:
    raise app.UsageError(f"--tiers: unknown {sorted(unknown)}; choose from {list(TIERS)}")
  runtime.import_tensorflow(verbose=False)
  record = {"machine": machine.description(), "tiers": {}}
  for name in _TIERS.value:
    print(f"{name}: running ...", file=sys.stderr, flush=True)
    tier = record["tiers"][name] = time_tier(name)
    print(f"{name}: {tier['summary']} | {tier['wall_seconds'] / 60:.1f} min wall, "
          f"{tier['cpu_seconds'] / 60:.1f} min CPU | "
          f"{machine.summary_line(tier['other_activity_before'])}", flush=True)
  Path(_OUTPUT.value).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
  failed = [name for name, tier in record["tiers"].items() if tier["exit_code"] != 0]
  if failed:
    sys.exit(f"suite_time.py: error: {', '.join(failed)} did not pass; see {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
