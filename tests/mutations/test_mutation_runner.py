"""The mutation runner (helpers/mutation_runner.py) counts a kill only when a
test fails an assertion: not when the mutated module no longer imports, the
tests cannot be collected or a test crashes. Judged here on a package of one
function and its test, in a scratch folder."""

import textwrap

import pytest

from helpers import mutation_runner
from helpers.mutations import Mutation

# A child pytest per case.
pytestmark = pytest.mark.slow

OLD = "return 2 * x"


@pytest.fixture(scope="module")
def package(tmp_path_factory):
  root = tmp_path_factory.mktemp("runner")
  (root / "pkg").mkdir()
  (root / "pkg" / "__init__.py").write_text("")
  (root / "pkg" / "arith.py").write_text(f"def double(x):\n  {OLD}\n")
  (root / "tests").mkdir()
  (root / "tests" / "test_arith.py").write_text(textwrap.dedent("""\
      from pkg.arith import double

      def test_double():
        assert double(3) == 6
      """))
  return root


def judge(package, old, new):
  mutation = Mutation("case", "a case of the runner's", "pkg/arith.py", old, new,
                      ("tests/test_arith.py",))
  verdict = mutation_runner.judge(package, mutation)
  assert (package / "pkg" / "arith.py").read_text() == f"def double(x):\n  {OLD}\n"
  return verdict


def test_a_failed_assertion_is_a_kill(package):
  verdict = judge(package, OLD, "return 3 * x")
  assert verdict.killed and "test_double failed" in verdict.why


def test_a_mutation_the_tests_pass_survives(package):
  verdict = judge(package, OLD, "return x + x")
  assert not verdict.killed and "all passed" in verdict.why


@pytest.mark.parametrize("old, new", [(OLD, "return 2 * (x"),
                                      ("def double", "import no_such_module\ndef double")])
def test_a_module_that_no_longer_imports_is_no_kill(package, old, new):
  verdict = judge(package, old, new)
  assert not verdict.killed and "does not import" in verdict.why


def test_tests_that_cannot_be_collected_are_no_kill(package):
  verdict = judge(package, "def double(x):", "def twice(x):")
  assert not verdict.killed and "status 2" in verdict.why


def test_a_test_that_crashes_is_no_kill(package):
  verdict = judge(package, OLD, "return 2 * x.no_such_attribute")
  assert not verdict.killed and "crashed" in verdict.why
