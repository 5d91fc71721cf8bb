"""The library broken on purpose: each mutation of tests/helpers/mutations.py
must make the tests named for it fail.

A reference implementation is trusted for the errors that leave everything
running: a mask that leaks, a scale that is skipped, a stale cache, an
off-by-one position. Each mutation is one such error, written as an exact
snippet of a source file and its replacement. In a scratch copy of the
repository, one mutation at a time is applied and the tests named for it run in
a fork of one child Python that imported TensorFlow once (``-x``, no cache);
the mutation is killed when one of them fails an assertion
(helpers/mutation_runner.py: the mutated module must import, and a collection
error or a crash is no kill; test_mutation_runner.py tests that). Then each
test that killed a mutation runs unmutated in the copy and must pass, none
skipped, so that its failure was the mutation's doing (a test that killed
nothing cannot have killed by accident; the suite runs them all anyway). A mutation that survives means
those tests no longer check what they are named for: strengthen them rather
than drop the mutation.

:data:`helpers.mutations.MUTATIONS` is the one list. A snippet that is no
longer in its file (the code changed), or a test no longer there, fails
test_mutation_list.py in the quick tier, so the list cannot rot silently.
"""

from pathlib import Path
import re
import shutil
import subprocess
import sys
import time

import pytest

from helpers import mutation_runner
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


@pytest.fixture(scope="module")
def verdicts(scratch, request):
  """The verdicts of the mutations this session runs, judged in one run of the
  runner (helpers/mutation_runner.py: TensorFlow imported once for all)."""
  selected = [item.callspec.params["mutation"] for item in request.session.items
              if getattr(item, "originalname", None) == "test_mutation_is_killed"] or MUTATIONS
  start = time.time()
  result = mutation_runner.judge_all(scratch, selected)
  print(f"{len(selected)} mutations judged in {time.time() - start:.0f} s")
  return result


def test_the_tests_that_killed_pass_unmutated_in_the_copy(scratch, verdicts):
  """Unmutated, in the copy and on the copy's code, every test that killed a
  mutation passes: so its failure was the mutation's doing."""
  probe = subprocess.run(
      [sys.executable, "-c", "import transformer; print(transformer.__file__)"], cwd=scratch,
      env=mutation_runner.child_environment(scratch), capture_output=True, text=True, check=True)
  assert Path(probe.stdout.strip()).is_relative_to(scratch), probe.stdout
  killers = sorted({verdict.killed_by for verdict in verdicts.values() if verdict.killed})
  assert killers, verdicts
  result = mutation_runner.run_tests(scratch, killers, scratch.parent / "unmutated.xml")
  assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
  last_line = result.stdout.strip().splitlines()[-1]
  assert re.search(rf"\b{len(killers)} passed", last_line), last_line
  assert not re.search(r"\d+ skipped", last_line), last_line


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_mutation_is_killed(verdicts, mutation):
  verdict = verdicts[mutation.name]
  if not verdict.killed and verdict.skipped and not (ROOT.parent / "shared").exists():
    pytest.skip(f"its tests need ../shared, absent here: {verdict.skipped}")
  assert verdict.killed, (f"{mutation.name} ({mutation.reason}) not killed by "
                          f"{' '.join(mutation.tests)}: {verdict.why}")
