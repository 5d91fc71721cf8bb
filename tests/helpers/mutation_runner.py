"""Runs one mutation of :data:`helpers.mutations.MUTATIONS` in a scratch copy of
the repository and judges it (tests/mutations/test_mutations.py).

A mutation is killed only when a targeted test fails an assertion: the mutated
module must still import (else the tests would fail on the import, whatever
they check), and the child pytest must report a test that failed on an
``assert`` (or ``pytest.raises``/``pytest.fail``), not a collection error, a
fixture error or a test that crashed on another exception. Any of those says
nothing about whether the tests check what they are named for.
"""

import contextlib
import dataclasses
import os
from pathlib import Path
import subprocess
import sys
import tempfile
from typing import Iterator, Optional, Sequence
import xml.etree.ElementTree as ElementTree

# How pytest's report begins the message of a failure that is a test's verdict:
# a rewritten ``assert``, an AssertionError (numpy.testing, pytest.raises' match)
# or pytest.fail / pytest.raises' "DID NOT RAISE".
_VERDICT_PREFIXES = ("assert", "AssertionError", "Failed:")


@dataclasses.dataclass(frozen=True)
class Verdict:
  killed: bool
  why: str  # one line: the failed test, or why the run says nothing


def module_name(file: str) -> str:
  """The import name of a source file: ``transformer/data/shards.py`` -> ``transformer.data.shards``."""
  return ".".join(Path(file).with_suffix("").parts)


def child_environment() -> dict:
  """This environment without PYTHONPATH (the copy must import itself) and
  without this pytest's own variables (PYTEST_ADDOPTS, xdist's worker names)."""
  return {**{k: v for k, v in os.environ.items()
             if k != "PYTHONPATH" and not k.startswith("PYTEST_")},
          "TF_CPP_MIN_LOG_LEVEL": "2"}


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


def import_error(copy: Path, module: str) -> Optional[str]:
  """The last line of the error importing ``module`` in ``copy``, or None."""
  result = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=copy,
                          env=child_environment(), capture_output=True, text=True,
                          timeout=300, check=False)
  if result.returncode == 0:
    return None
  lines = result.stderr.strip().splitlines()
  return lines[-1] if lines else f"exit status {result.returncode}"


def run_tests(copy: Path, tests: Sequence[str], report: Path) -> subprocess.CompletedProcess:
  """pytest on ``tests`` in ``copy``: one process, stop at the first failure,
  a JUnit report at ``report``. The copy is the rootdir, so its setup.cfg puts
  it first on ``sys.path``."""
  return subprocess.run(
      [sys.executable, "-m", "pytest", "-n", "0", "-x", "-q", "-p", "no:cacheprovider",
       f"--junitxml={report}", *tests],
      cwd=copy, env=child_environment(), capture_output=True, text=True, timeout=600,
      check=False)


def judge_report(returncode: int, report: Path) -> Verdict:
  """The verdict of a child pytest's exit status and JUnit report."""
  if returncode not in (0, 1) or not report.is_file():
    return Verdict(False, f"pytest exited with status {returncode} (collection error, "
                          "no such test, or an interrupted run)")
  for case in ElementTree.parse(report).iter("testcase"):
    name = f"{case.get('classname')}::{case.get('name')}"
    for outcome in case:
      message = (outcome.get("message") or "").strip()
      first_line = message.splitlines()[0] if message else ""
      if outcome.tag == "error":
        return Verdict(False, f"{name}: error outside the test ({first_line})")
      if outcome.tag == "failure":
        if message.startswith(_VERDICT_PREFIXES):
          return Verdict(True, f"{name} failed: {first_line}")
        return Verdict(False, f"{name} crashed instead of failing an assertion ({first_line})")
  return Verdict(False, "the targeted tests all passed")


def judge(copy: Path, mutation) -> Verdict:
  """Applies ``mutation`` in ``copy``, checks that its module imports, runs its
  tests and judges them."""
  with applied(copy, mutation):
    error = import_error(copy, module_name(mutation.file))
    if error:
      return Verdict(False, f"{mutation.file} does not import mutated: {error}")
    with tempfile.TemporaryDirectory() as folder:
      report = Path(folder) / "report.xml"
      result = run_tests(copy, mutation.tests, report)
      return judge_report(result.returncode, report)
