"""What the benchmarks record about the machine and about what else was running.

Every benchmark record says which machine and versions produced it and how busy
the machine was at the start and the end, so that a figure measured beside
another job can be recognised as such.
"""

import os
from pathlib import Path
import platform
import resource
import subprocess
import time

from absl import flags

from transformer import config
from transformer.run import runtime

# Benchmarks measure TensorFlow as train.py runs it. Set on import because most
# benchmarks import TensorFlow (through transformer/) right after this module.
runtime.use_bfc_allocator()

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = config.SHARED_DATA_DIR


def description():
  """CPU, cores, memory, Python/TensorFlow/Keras versions and the git commit."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cpu = next((line.split(":", 1)[1].strip() for line in _lines("/proc/cpuinfo")
              if line.startswith("model name")), platform.processor())
  memory = next((int(line.split()[1]) * 1024 for line in _lines("/proc/meminfo")
                 if line.startswith("MemTotal")), None)
  commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()
  return {"cpu": cpu, "machine": platform.machine(), "cores": os.cpu_count(),
          "cores_allowed": sorted(os.sched_getaffinity(0)), "memory_bytes": memory,
          "python": platform.python_version(), "tensorflow": tf.__version__,
          "keras": keras.__version__, "git_commit": commit,
          "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
          "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads()}


def _lines(path):
  try:
    return Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
  except OSError:
    return []


def _cpu_ticks():
  """{pid: (command, user + system clock ticks)} of every readable process."""
  ticks = {}
  for entry in Path("/proc").iterdir():
    if not entry.name.isdigit():
      continue
    try:
      stat = (entry / "stat").read_text()
      command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
          errors="replace").strip()
    except OSError:
      continue
    fields = stat[stat.rindex(")") + 2:].split()
    ticks[int(entry.name)] = (command or stat[stat.index("(") + 1:stat.rindex(")")],
                              int(fields[11]) + int(fields[12]))
  return ticks


def other_activity(seconds=1.0, min_share=0.05):
  """The load average and the other processes that used at least ``min_share`` of
  a core over ``seconds``: ``{"load_average", "busy_processes": [{pid, cpu, command}]}``."""
  before = _cpu_ticks()
  time.sleep(seconds)
  after = _cpu_ticks()
  hertz = os.sysconf("SC_CLK_TCK")
  busy = []
  for pid, (command, ticks) in after.items():
    if pid == os.getpid() or pid not in before:
      continue
    share = (ticks - before[pid][1]) / hertz / seconds
    if share >= min_share:
      busy.append({"pid": pid, "cpu": round(share, 2), "command": command[:160]})
  return {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "load_average": os.getloadavg(),
          "busy_processes": sorted(busy, key=lambda p: -p["cpu"])}


def peak_rss_bytes():
  """This process's peak resident set size so far (``VmHWM``).

  Not ``getrusage``'s ``ru_maxrss``: Linux carries that across ``execve``, so
  a child started by a large process reports at least the parent's size.
  """
  for line in _lines("/proc/self/status"):
    if line.startswith("VmHWM:"):
      return int(line.split()[1]) * 1024
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def define_input_flags():
  """Defines ``--data_dir``, ``--tokenizer`` and ``--threads``, as the speed
  benchmarks take them, and returns their holders in that order."""
  return (
      flags.DEFINE_string("data_dir", str(SHARED_DATA / "ted_hrlr_pt_to_en"),
                          "Folder with the TED HRLR pt/en files (pt.train en.train pt.dev ...)."),
      flags.DEFINE_string("tokenizer", str(SHARED_DATA / "tutorial_tokenizer"),
                          "Tokenizer SavedModel (the tutorial's converter)."),
      flags.DEFINE_integer("threads", 0, "TensorFlow threads; 0: one per usable core."))


def set_threads(threads):
  """:func:`transformer.run.runtime.set_cpu_threads` for a benchmark's ``--threads``
  (0: one thread per usable core, unless ``TF_NUM_*`` say otherwise)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  runtime.set_cpu_threads(tf, threads)


def summary_line(activity):
  """One line for the console: load average and the busiest other processes."""
  load = ", ".join(f"{value:.2f}" for value in activity["load_average"])
  busy = "; ".join(f"{p['cpu']:.0%} {p['command'][:60]}" for p in activity["busy_processes"][:4])
  return f"load average {load}; other busy processes: {busy or 'none'}"
