"""What a mutation is (:class:`Mutation`, the entries of
:data:`helpers.mutations.MUTATIONS`), and how each is run in a scratch copy of
the repository and judged (tests/mutations/test_mutations.py).

A mutation is killed only when a targeted test fails an assertion: the mutated
module must still import (else the tests would fail on the import, whatever
they check), and pytest must report a test that failed on an ``assert`` (or
``pytest.raises``/``pytest.fail``), not a collection error, a fixture error or
a test that crashed on another exception. Any of those says nothing about
whether the tests check what they are named for.

:func:`judge_all` runs one child Python in the copy that imports the heavy
libraries (TensorFlow, Keras) once, then for each mutation writes it, forks,
and in the fork imports the mutated module and runs ``pytest.main`` on its
tests: a mutation then costs its tests, not two imports of TensorFlow (about
9 CPU seconds each). The copy's own code is imported only in the forks, after
the mutation is written.
"""

import contextlib
import dataclasses
import importlib
import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator, Sequence
import xml.etree.ElementTree as ElementTree

# How pytest's report begins the message of a failure that is a test's verdict:
# a rewritten ``assert``, an AssertionError (numpy.testing, pytest.raises' match)
# or pytest.fail / pytest.raises' "DID NOT RAISE".
_VERDICT_PREFIXES = ("assert", "AssertionError", "Failed:")
# Imported once by the child Python, before it forks (each only if installed).
PRELOADED = ("numpy", "tensorflow", "tensorflow_text", "keras", "ml_collections", "pytest")
# A fork's exit status when the mutated module does not import.
_NO_IMPORT = 99
# The most a mutation's tests (or one targeted test of the unmutated run) may take.
TIMEOUT_SECONDS = 600


@dataclasses.dataclass(frozen=True)
class Mutation:
  """A silent bug: ``old``, exactly once in ``file``, replaced by ``new``."""
  name: str
  reason: str    # the silent error it stands for
  file: str      # relative to the repository root
  old: str       # exactly once in the file
  new: str
  tests: tuple   # pytest node ids (or files) that must fail with it


@dataclasses.dataclass(frozen=True)
class Verdict:
  killed: bool
  why: str  # one line: the failed test, or why the run says nothing
  killed_by: str = ""  # the pytest node id of the test whose assertion failed
  skipped: str = ""  # why a targeted test skipped (e.g. ../shared/data absent), if one did
  seconds: float = 0.0  # the fork's wall time
  cpu_seconds: float = 0.0  # the fork's and its children's CPU time: what it costs the suite


def module_name(file: str) -> str:
  """The import name of a source file: ``transformer/data/shards.py`` -> ``transformer.data.shards``."""
  return ".".join(Path(file).with_suffix("").parts)


def child_environment(copy: Path) -> dict:
  """This environment without PYTHONPATH (the copy must import itself) and
  without this pytest's own variables (PYTEST_ADDOPTS, xdist's worker names),
  with a JAX compilation cache beside ``copy`` for every JAX process the
  tests start: a mutation's JAX tests compile only the programs no run
  before them compiled (the cache is keyed by the compiled program, so one
  that a mutation changed is compiled anew)."""
  return {**{k: v for k, v in os.environ.items()
             if k != "PYTHONPATH" and not k.startswith("PYTEST_")},
          "TF_CPP_MIN_LOG_LEVEL": "2",
          "JAX_COMPILATION_CACHE_DIR": str(Path(copy).parent / "jax_compilation_cache"),
          # Every program, however quick to compile: the tiny models' steps are.
          "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


def pytest_arguments(tests: Sequence[str], report: Path) -> list:
  """One process, stop at the first failure, a JUnit report at ``report``."""
  return ["-n", "0", "-x", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *tests]


def run_tests(copy: Path, tests: Sequence[str], report: Path) -> subprocess.CompletedProcess:
  """pytest on ``tests`` in ``copy``, in a child Python, given
  :data:`TIMEOUT_SECONDS` a test. The copy is the rootdir, so its setup.cfg
  puts it first on ``sys.path``."""
  return subprocess.run([sys.executable, "-m", "pytest", *pytest_arguments(tests, report)],
                        cwd=copy, env=child_environment(copy), capture_output=True, text=True,
                        timeout=TIMEOUT_SECONDS * len(tests), check=False)


@contextlib.contextmanager
def applied(copy: Path, mutation) -> Iterator[None]:
  """``mutation`` written into ``copy`` for the block, the file restored after."""
  path = Path(copy) / mutation.file
  original = path.read_text(encoding="utf-8")
  if original.count(mutation.old) != 1:
    raise ValueError(f"{mutation.name}: {mutation.file} does not hold its snippet once")
  path.write_text(original.replace(mutation.old, mutation.new), encoding="utf-8")
  try:
    yield
  finally:
    path.write_text(original, encoding="utf-8")


def judge_report(returncode: int, report: Path) -> Verdict:
  """The verdict of a pytest run's exit status and JUnit report."""
  if returncode not in (0, 1) or not report.is_file():
    return Verdict(False, f"pytest exited with status {returncode} (collection error, "
                          "no such test, or an interrupted run)")
  skipped = ""
  for case in ElementTree.parse(report).iter("testcase"):
    name = f"{case.get('classname')}::{case.get('name')}"
    for outcome in case:
      message = (outcome.get("message") or "").strip()
      first_line = message.splitlines()[0] if message else ""
      if outcome.tag == "skipped":
        skipped = skipped or f"{name}: {first_line}"
      if outcome.tag == "error":
        return Verdict(False, f"{name}: error outside the test ({first_line})")
      if outcome.tag == "failure":
        if message.startswith(_VERDICT_PREFIXES):
          return Verdict(True, f"{name} failed: {first_line}", killed_by=node_id(case))
        return Verdict(False, f"{name} crashed instead of failing an assertion ({first_line})")
  if skipped:
    return Verdict(False, f"no targeted test failed; one skipped ({skipped})", skipped=skipped)
  return Verdict(False, "the targeted tests all passed")


def node_id(case) -> str:
  """The pytest node id of a JUnit ``testcase`` of a module-level test."""
  return f"{case.get('classname').replace('.', '/')}.py::{case.get('name')}"


def judge_all(copy: Path, mutations) -> Dict[str, Verdict]:
  """Each mutation's verdict, by name, from one child Python in ``copy``."""
  with tempfile.TemporaryDirectory() as folder:
    request, answer = Path(folder) / "mutations.json", Path(folder) / "verdicts.json"
    request.write_text(json.dumps([dataclasses.asdict(m) for m in mutations]), encoding="utf-8")
    result = subprocess.run([sys.executable, __file__, str(request), str(answer)], cwd=copy,
                            env=child_environment(copy), capture_output=True, text=True,
                            timeout=TIMEOUT_SECONDS * max(1, len(mutations)), check=False)
    if result.returncode != 0:
      raise RuntimeError(f"the mutation runner failed: {result.stderr[-3000:]}")
    return {name: Verdict(**verdict)
            for name, verdict in json.loads(answer.read_text(encoding="utf-8")).items()}


def _in_fork(mutation, report: Path) -> int:
  """In a fork: imports the mutated module, then runs its tests; the exit status."""
  log = os.open(report.with_suffix(".log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
  os.dup2(log, 1)
  os.dup2(log, 2)
  try:
    importlib.import_module(module_name(mutation.file))
  except BaseException as e:  # pylint: disable=broad-except  (SyntaxError, ImportError...)
    report.with_suffix(".import").write_text(f"{type(e).__name__}: {e}", encoding="utf-8")
    return _NO_IMPORT
  import pytest  # pylint: disable=g-import-not-at-top
  return int(pytest.main(pytest_arguments(mutation.tests, report)))


def _wait(pid: int):
  """``(exit status, CPU seconds)`` of the fork (and of the processes it
  waited for); it is killed after :data:`TIMEOUT_SECONDS`."""
  deadline = time.monotonic() + TIMEOUT_SECONDS
  while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
      return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
    if time.monotonic() > deadline:
      os.kill(pid, signal.SIGKILL)
      _, _, usage = os.wait4(pid, 0)
      return -signal.SIGKILL, usage.ru_utime + usage.ru_stime
    time.sleep(0.1)


def _serve(request: Path, answer: Path) -> None:
  """The child Python of :func:`judge_all`, in the copy."""
  sys.path[0] = os.getcwd()  # the copy, not this script's folder
  for name in PRELOADED:
    with contextlib.suppress(ImportError):
      importlib.import_module(name)
  verdicts = {}
  with tempfile.TemporaryDirectory() as folder:
    for fields in json.loads(request.read_text(encoding="utf-8")):
      mutation = Mutation(**fields)
      report = Path(folder) / f"{mutation.name}.xml"
      start = time.monotonic()
      with applied(Path.cwd(), mutation):
        pid = os.fork()
        if pid == 0:  # the fork never returns into this loop, whatever happens
          status = 1
          try:
            status = _in_fork(mutation, report)
          finally:
            os._exit(status)  # pylint: disable=protected-access
        status, cpu_seconds = _wait(pid)
      if status == _NO_IMPORT:
        error = report.with_suffix(".import").read_text(encoding="utf-8")
        verdict = Verdict(False, f"{mutation.file} does not import mutated: {error}")
      else:
        verdict = judge_report(status, report)
      verdict = dataclasses.replace(verdict, seconds=round(time.monotonic() - start, 2),
                                    cpu_seconds=round(cpu_seconds, 2))
      verdicts[mutation.name] = dataclasses.asdict(verdict)
  answer.write_text(json.dumps(verdicts), encoding="utf-8")


if __name__ == "__main__":
  _serve(Path(sys.argv[1]), Path(sys.argv[2]))
