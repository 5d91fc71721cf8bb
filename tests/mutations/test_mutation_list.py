"""The mutation list (tests/helpers/mutations.py) still fits the code: every
snippet is in its file once and every targeted test exists. Quick, so that a
change that moves a snippet or renames a test says so before the slow run."""

from pathlib import Path

from helpers.mutations import MUTATIONS

ROOT = Path(__file__).resolve().parents[2]


def test_every_snippet_is_in_its_file():
  """Each mutation's snippet is in its file exactly once, and changes it."""
  problems = []
  for mutation in MUTATIONS:
    count = (ROOT / mutation.file).read_text(encoding="utf-8").count(mutation.old)
    if count != 1 or mutation.old == mutation.new:
      problems.append(f"{mutation.name}: {mutation.file} holds its snippet {count} times")
  assert not problems, "\n".join(problems)
  assert len({m.name for m in MUTATIONS}) == len(MUTATIONS)


def test_every_mutation_says_what_it_stands_for_in_a_line():
  unexplained = [m.name for m in MUTATIONS if not m.reason.strip() or "\n" in m.reason]
  assert not unexplained, unexplained


def test_every_targeted_test_exists():
  """Each node id names a test file, and a test function defined in it."""
  missing = []
  for mutation in MUTATIONS:
    for test in mutation.tests:
      file, _, name = test.partition("::")
      path = ROOT / file
      if not path.is_file() or (name and f"def {name}(" not in path.read_text(encoding="utf-8")):
        missing.append(f"{mutation.name}: {test}")
  assert not missing, "\n".join(missing)
