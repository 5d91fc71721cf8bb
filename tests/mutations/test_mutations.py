"""The library broken on purpose: each mutation of tests/helpers/mutations.py
must make the tests named for it fail.

A reference implementation is trusted for the errors that leave everything
running: a mask that leaks, a scale that is skipped, a stale cache, an
off-by-one position. Each mutation is one such error, written as an exact
snippet of a source file and its replacement. In a scratch copy of the
repository, one mutation at a time is applied and the tests named for it run in
a child pytest (``-x``, one process, no cache); the mutation is killed when one
of them fails. Before that, the targeted tests run once unmutated in the copy
and must pass, none skipped, so that a failure is the mutation's doing. A
mutation that survives means those tests no longer check what they are named
for: strengthen them rather than drop the mutation.

:data:`helpers.mutations.MUTATIONS` is the one list. A snippet that is no
longer in its file (the code changed), or a test no longer there, fails
test_mutation_list.py in the quick tier, so the list cannot rot silently.
"""

import os
from pathlib import Path
import re
import shutil
import subprocess
import sys
import time

import pytest

from helpers.mutations import MUTATIONS

# Child pytest runs of training, decoding and multi-replica tests: minutes.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# What the targeted tests need of the repository (the scratch copy holds only these).
COPIED = ("transformer", "configs", "tests", "setup.cfg", "train.py", "evaluate.py",
          "translate.py")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
  """A copy of what the tests need, beside a link to ../shared (so that tests
  that read the shared data find it where they would)."""
  root = tmp_path_factory.mktemp("mutations")
  copy = root / "repo"
  copy.mkdir()
  for name in COPIED:
    source = ROOT / name
    if source.is_dir():
      shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns(
          "__pycache__", ".pytest_cache", "mutations"))
    else:
      shutil.copy2(source, copy / name)
  shared = ROOT.parent / "shared"
  if shared.exists():
    (root / "shared").symlink_to(shared)
  return copy


def child_environment():
  """This environment without PYTHONPATH (the copy must import itself) and
  without this pytest's own variables (PYTEST_ADDOPTS, xdist's worker names)."""
  return {k: v for k, v in os.environ.items()
          if k != "PYTHONPATH" and not k.startswith("PYTEST_")}


def run_tests(copy: Path, tests) -> subprocess.CompletedProcess:
  """pytest on ``tests`` in ``copy``: one process, stop at the first failure.
  The copy is the rootdir, so its setup.cfg puts it first on ``sys.path``."""
  return subprocess.run(
      [sys.executable, "-m", "pytest", "-n", "0", "-x", "-q", "-p", "no:cacheprovider", *tests],
      cwd=copy, env={**child_environment(), "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True,
      text=True, timeout=600, check=False)


def summary(result) -> str:
  lines = result.stdout.strip().splitlines()
  return lines[-1] if lines else result.stderr.strip()[-500:]


def test_the_copy_imports_itself_and_its_targeted_tests_pass(scratch):
  """Unmutated, the targeted tests pass in the copy, on the copy's code: so a
  failure below is the mutation's doing."""
  probe = subprocess.run(
      [sys.executable, "-c", "import transformer; print(transformer.__file__)"], cwd=scratch,
      env=child_environment(), capture_output=True, text=True, check=True)
  assert Path(probe.stdout.strip()).is_relative_to(scratch), probe.stdout
  tests = sorted({test for mutation in MUTATIONS for test in mutation.tests})
  result = run_tests(scratch, tests)
  assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
  assert not re.search(r"\d+ skipped", summary(result)), summary(result)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_mutation_is_killed(scratch, mutation):
  path = scratch / mutation.file
  original = path.read_text(encoding="utf-8")
  assert original.count(mutation.old) == 1, f"{mutation.file} no longer holds the snippet"
  path.write_text(original.replace(mutation.old, mutation.new), encoding="utf-8")
  try:
    start = time.time()
    result = run_tests(scratch, mutation.tests)
  finally:
    path.write_text(original, encoding="utf-8")
  # Exit status 1: tests ran and one failed. Anything else (collection errors,
  # no such test) says nothing about the mutation.
  assert result.returncode != 0, (
      f"{mutation.name} survived ({mutation.reason}): {' '.join(mutation.tests)} "
      f"all passed in {time.time() - start:.0f} s")
  assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
