"""The mutation runner (helpers/mutation_runner.py) counts a kill only when a
test fails an assertion: not when the mutated module no longer imports, the
tests cannot be collected or a test crashes. Judged here on a package of one
function and its test, in a scratch folder."""

import textwrap

import pytest

from helpers import mutation_runner
from helpers.mutation_runner import Mutation

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


CASES = {
    "assertion": (OLD, "return 3 * x"),
    "passes": (OLD, "return x + x"),
    "syntax": (OLD, "return 2 * (x"),
    "import": ("def double", "import no_such_module\ndef double"),
    "collection": ("def double(x):", "def twice(x):"),
    "crash": (OLD, "return 2 * x.no_such_attribute"),
}


@pytest.fixture(scope="module")
def verdicts(package):
  """Every case judged in one run of the runner, as the mutation tests are."""
  mutations = [Mutation(name, "a case of the runner's", "pkg/arith.py", old, new,
                        ("tests/test_arith.py",)) for name, (old, new) in CASES.items()]
  result = mutation_runner.judge_all(package, mutations)
  assert (package / "pkg" / "arith.py").read_text() == f"def double(x):\n  {OLD}\n"
  return result


def test_a_failed_assertion_is_a_kill(verdicts):
  verdict = verdicts["assertion"]
  assert verdict.killed and "test_double failed" in verdict.why
  assert verdict.killed_by == "tests/test_arith.py::test_double", verdict


def test_a_mutation_the_tests_pass_survives(verdicts):
  verdict = verdicts["passes"]
  assert not verdict.killed and "all passed" in verdict.why


@pytest.mark.parametrize("case", ["syntax", "import"])
def test_a_module_that_no_longer_imports_is_no_kill(verdicts, case):
  verdict = verdicts[case]
  assert not verdict.killed and "does not import" in verdict.why


def test_tests_that_cannot_be_collected_are_no_kill(verdicts):
  verdict = verdicts["collection"]
  assert not verdict.killed and "status 2" in verdict.why


def test_a_test_that_crashes_is_no_kill(verdicts):
  verdict = verdicts["crash"]
  assert not verdict.killed and "crashed" in verdict.why
