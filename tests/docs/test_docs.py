"""The README and docs/ hold: every relative link resolves, the README stays
short, and its commands use only flags and fields that exist."""

from pathlib import Path
import re
import shlex
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted([ROOT / "README.md", ROOT / "lab" / "README.md", ROOT / "lab" / "bench" / "README.md",
                    ROOT / "lab" / "results" / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
SHELL_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)


def _readme():
  return (ROOT / "README.md").read_text(encoding="utf-8")


def _anchors(text):
  """GitHub's anchors for the headings of a Markdown text."""
  headings = re.findall(r"^#+ (.+)$", text, re.MULTILINE)
  return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document):
  text = document.read_text(encoding="utf-8")
  broken = []
  for target in LINK.findall(text):
    if re.match(r"[a-z]+:", target):  # https:, mailto:
      continue
    path, _, anchor = target.partition("#")
    linked = (document.parent / path).resolve() if path else document
    if not linked.exists():
      broken.append(target)
    elif anchor and linked.suffix == ".md" and anchor not in _anchors(
        linked.read_text(encoding="utf-8")):
      broken.append(target)
  assert not broken, f"{document.relative_to(ROOT)}: {broken}"


def test_the_documents_have_links_to_check():
  # A pattern that matched nothing would pass the test above on every file.
  assert len(LINK.findall(_readme())) >= 10


def test_readme_is_short_and_speaks_to_users():
  text = _readme()
  assert len(text.splitlines()) <= 200
  assert not re.search(r"(?<![\w/])#\d+\b", text), "an issue number"
  assert not re.search(r"`[0-9a-f]{7,40}`", text), "a commit hash"
  assert not re.search(r"\b\d\d:\d\d(:\d\d)? UTC\b", text), "a clock time"


def test_readme_test_command_is_what_ci_runs():
  ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
  assert f"```sh\n{ci}\n```" in _readme()


def _readme_commands():
  """(script, arguments) of each `python X.py ...` in the README's sh blocks."""
  for block in SHELL_BLOCK.findall(_readme()):
    for line in block.splitlines():
      for command in line.split("&&"):
        words = shlex.split(command)
        if len(words) > 1 and words[0] == "python" and words[1].endswith(".py"):
          yield words[1], words[2:]


def test_readme_commands_use_flags_that_exist():
  commands = list(_readme_commands())
  assert {script for script, _ in commands} >= {"train.py", "translate.py", "evaluate.py"}
  helps = {}
  for script, args in commands:
    if script not in helps:
      # absl's --helpfull exits with status 1 after printing every flag.
      helps[script] = subprocess.run([sys.executable, script, "--helpfull"], cwd=ROOT,
                                     capture_output=True, text=True, timeout=120,
                                     check=False).stdout
    for arg in args:
      name = arg.split("=", 1)[0]
      if arg.startswith("--") and not name.startswith("--config."):
        assert f"  {name}:" in helps[script], f"{script} has no {name}"


def test_readme_config_overrides_name_real_fields():
  from configs import cpu_2h  # pylint: disable=g-import-not-at-top
  config = cpu_2h.get_config("clock")
  overrides = re.findall(r"--config\.([\w.]+)=", _readme())
  assert overrides
  for field in overrides:
    section, name = field.split(".", 1)
    assert name in config[section], field
