"""The accelerator drivers' children: one script at a time, stopped cleanly.

``run.py``, ``converge.py`` and ``call.py`` run ``train.py`` and
``evaluate.py`` as children. :func:`run_child` starts one in a process group
of its own, so that a Ctrl-C at the terminal reaches the driver only, and
hands it each SIGINT or SIGTERM the driver receives: ``train.py`` then
finishes its step, writes its checkpoint, releases its run folder's lock and
exits 130 or 143, and the driver waits for that before it says where the run
stopped (a second signal, forwarded too, makes the child abort at once, as
it does at a terminal). A deadline, where one is given, sends the child one
SIGTERM when it passes, and SIGKILL only if the child is still running
``grace`` seconds later.

The child's output (stdout and stderr together) goes to the driver's stdout
line by line as it comes, and each line is also handed to ``on_line``, for
the drivers that read the compile lines.
"""

import dataclasses
import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, List, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclasses.dataclass
class Finished:
  """How a child ended: its exit status, the driver's own signal that stopped
  it (None: none came), whether the deadline or ``stop_when`` stopped it, its
  wall seconds and its stdout when it was captured."""
  returncode: int
  signum: Optional[int]
  deadline_passed: bool
  seconds: float
  stdout: str = ""
  stopped_early: bool = False


def run_child(command: List[str], *, cwd: Path, env: dict, deadline: Optional[float] = None,
              grace: float = 120.0, capture_stdout: bool = False,
              on_line: Optional[Callable[[str], None]] = None,
              stop_when: Optional[Callable[[], bool]] = None,
              stop_every: float = 1.0) -> Finished:
  """Runs ``command`` to its end, forwarding SIGINT/SIGTERM (module docstring).

  Args:
    deadline: a ``time.monotonic()`` value; past it the child gets SIGTERM.
    grace: seconds from that SIGTERM (or a forwarded signal) to a SIGKILL.
    capture_stdout: keep the child's stdout apart (returned, not echoed) and
      pass its stderr through; otherwise both are echoed as one stream.
    on_line: called with each line of the echoed stream.
    stop_when: asked every ``stop_every`` seconds; True sends the child one
      SIGTERM (an early stop: the driver read what it needed from the child's
      files).
  """
  received: List[int] = []
  previous = {}
  child = subprocess.Popen(
      command, cwd=cwd, env=env, text=True, bufsize=1, process_group=0,
      stdout=subprocess.PIPE, stderr=None if capture_stdout else subprocess.STDOUT)
  killed_at = [None]

  def forward(signum, frame):  # pylint: disable=unused-argument
    received.append(signum)
    if child.poll() is None:
      child.send_signal(signum)
      killed_at[0] = killed_at[0] or time.monotonic() + grace

  for signum in SIGNALS:
    previous[signum] = signal.signal(signum, forward)
  chunks: List[str] = []

  def read():
    for line in child.stdout:
      if capture_stdout:
        chunks.append(line)
        continue
      sys.stdout.write(line)
      sys.stdout.flush()
      if on_line:
        on_line(line.rstrip("\n"))

  reader = threading.Thread(target=read, daemon=True)
  reader.start()
  start = time.monotonic()
  deadline_passed = stopped_early = False
  asked = 0.0
  try:
    while child.poll() is None:
      now = time.monotonic()
      if deadline is not None and now > deadline and not (deadline_passed or stopped_early):
        deadline_passed = True
        child.send_signal(signal.SIGTERM)
        killed_at[0] = killed_at[0] or now + grace
      if (stop_when is not None and now - asked >= stop_every
          and not (deadline_passed or stopped_early)
          and not received):
        asked = now
        if stop_when():
          stopped_early = True
          child.send_signal(signal.SIGTERM)
          killed_at[0] = killed_at[0] or now + grace
      if killed_at[0] is not None and now > killed_at[0]:
        child.kill()
      time.sleep(min(0.2, stop_every))
    reader.join(timeout=10)
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)
  return Finished(child.returncode, received[0] if received else None, deadline_passed,
                  time.monotonic() - start, "".join(chunks), stopped_early)


def python_env(repo_dir: Path) -> dict:
  """The environment of a child script: Keras on JAX, the repository first on
  the path, then whatever path an offline install used (pip --target)."""
  path = os.pathsep.join(filter(None, [str(repo_dir), os.environ.get("PYTHONPATH")]))
  return {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def where_stopped(run_dir: Path) -> str:
  """Where a train.py run stands, from its folder: its last checkpoint's step
  and the epochs it has recorded."""
  steps = [int(path.name.split("-")[1]) for path in (run_dir / "checkpoints").glob("step-*")
           if path.name.split("-")[1].isdigit()]
  epochs = len(epoch_records(run_dir))
  if not steps:
    return f"{run_dir.name} had no checkpoint yet"
  return (f"{run_dir.name} stopped at step {max(steps)} ({epochs} epoch"
          f"{'' if epochs == 1 else 's'} recorded)")


def epoch_records(run_dir: Path) -> list:
  """The epoch records of a run's metrics.jsonl (none when it has none yet)."""
  path = run_dir / "metrics.jsonl"
  if not path.is_file():
    return []
  records = []
  for line in path.read_text(encoding="utf-8").splitlines():
    try:
      record = json.loads(line)
    except ValueError:  # a line being appended
      continue
    if "epoch" in record:
      records.append(record)
  return records


def check_rerun(output: Path, command: dict, script: str) -> bool:
  """Whether ``output`` is a rerun's (True: resume there) or new (False).

  A driver's output folder holds ``command.json``, its flags: the same
  command resumes there, another one is refused (SystemExit, one line).
  """
  recorded = output / "command.json"
  if not output.exists():
    return False
  if not recorded.is_file():
    sys.exit(f"{script}: error: --output={output} exists and was not written by {script}; "
             "choose a new one")
  old = json.loads(recorded.read_text(encoding="utf-8"))
  if old != command:
    changed = ", ".join(f"--{key} was {old.get(key)!r}, now {value!r}"
                        for key, value in command.items() if old.get(key) != value)
    sys.exit(f"{script}: error: --output={output} holds runs of another command ({changed}); "
             "rerun that command to resume them, or choose a new --output")
  return True


def record_command(output: Path, command: dict) -> None:
  output.mkdir(parents=True, exist_ok=True)
  (output / "command.json").write_text(json.dumps(command, indent=2) + "\n", encoding="utf-8")


class Stopped(KeyboardInterrupt):
  """A SIGINT or SIGTERM that came between two children (or stopped one)."""

  def __init__(self, signum: int, line: str = ""):
    super().__init__(signal.Signals(signum).name)
    self.signum, self.line = signum, line


def main_of(script: str, main: Callable[[], None]) -> None:
  """Runs a driver's ``main``: a signal between its children raises
  :class:`Stopped`, and a :class:`Stopped` ends the driver with one line
  (``<script>: stopped by SIGTERM: ...``) and status 128 + the signal."""
  def stop(signum, frame):  # pylint: disable=unused-argument
    raise Stopped(signum)
  for signum in SIGNALS:
    signal.signal(signum, stop)
  try:
    main()
  except Stopped as e:
    where = f": {e.line}" if e.line else ""
    print(f"{script}: stopped by {signal.Signals(e.signum).name}{where}; rerun the same command "
          "to resume", file=sys.stderr, flush=True)
    sys.exit(128 + e.signum)


def device_name(repo_dir: Path) -> str:
  """``<count> x <kind>`` of JAX's devices, asked in a child: JAX in the driver
  itself would take most of the accelerator's memory from its children."""
  done = subprocess.run(
      [sys.executable, "-c", "import jax; d = jax.devices(); print(f'{len(d)} x {d[0].device_kind}')"],
      cwd=repo_dir, env=python_env(repo_dir), capture_output=True, text=True, check=False)
  return done.stdout.strip() or f"unknown ({done.stderr.strip().splitlines()[-1:]})"
