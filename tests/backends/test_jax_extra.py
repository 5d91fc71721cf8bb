"""``pip install -e '.[jax]'``, without TensorFlow, runs the JAX training
command. The child that runs it can import only what that install brings:
setup.cfg's install_requires and ``jax`` extra, and their own requirements as
the installed metadata names them; every other installed distribution
(TensorFlow among them, and whatever the TensorFlow extra brings) is made
unimportable, as in a fresh environment where only that was installed. The
``tensorflow`` extra's side: tests/unit/test_install.py.
"""

import ast
import configparser
import importlib.metadata
import json
import os
from pathlib import Path
import re
import subprocess
import sys

from packaging.requirements import Requirement
import pytest

from helpers.backends import needs_jax
from helpers.prepared import random_prepared_folder, ted_named_folder

pytestmark = [pytest.mark.slow, needs_jax]

ROOT = Path(__file__).resolve().parents[2]
# Runs a script with the top-level modules in $NOT_INSTALLED unimportable.
RUNNER = """
import json, os, runpy, sys

NOT_INSTALLED = set(json.loads(os.environ["NOT_INSTALLED"]))


class _NotInstalled:
  def find_spec(self, name, path=None, target=None):
    if name.partition(".")[0] in NOT_INSTALLED:
      raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return None


sys.meta_path.insert(0, _NotInstalled())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _canonical(name: str) -> str:
  return re.sub(r"[-_.]+", "-", name).lower()


def _declared(extra: str):
  """Requirements of install_requires and of ``extra`` in setup.cfg."""
  setup = configparser.ConfigParser()
  setup.read(ROOT / "setup.cfg")
  lines = (setup["options"]["install_requires"] + "\n"
           + setup["options.extras_require"][extra]).splitlines()
  return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def _installed_with(requirements):
  """The canonical names of ``requirements`` and, from the installed metadata,
  everything they require in turn (markers evaluated for this Python)."""
  names, pending = set(), list(requirements)
  while pending:
    requirement = pending.pop()
    if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
      continue
    name = _canonical(requirement.name)
    if name in names:
      continue
    names.add(name)
    try:
      pending.extend(Requirement(r) for r in importlib.metadata.requires(name) or ())
    except importlib.metadata.PackageNotFoundError:
      pass
  return names


def _not_installed_by(requirements):
  """The top-level modules of this environment that only distributions outside
  ``requirements`` (and what they require) provide."""
  installed = _installed_with(requirements)
  return sorted(module for module, names in importlib.metadata.packages_distributions().items()
                if not {_canonical(name) for name in names} & installed
                and module not in sys.stdlib_module_names and module != "transformer")


def _imported_at_load(module: str, seen=None):
  """The top-level names of what ``module`` (a ``transformer`` module) and the
  package's modules it imports import when loaded (imports inside functions
  are left out: those are the deferred ones)."""
  seen = set() if seen is None else seen
  seen.add(module)
  path = ROOT / Path(*module.split("."))
  path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
  names = set()
  for node in ast.parse(path.read_text(encoding="utf-8")).body:
    if isinstance(node, ast.Import):
      imported = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
      imported = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    else:
      continue
    for name in imported:
      if name.partition(".")[0] != "transformer":
        names.add(name.partition(".")[0])
      elif name not in seen and ((ROOT / Path(*name.split("."))).is_dir()
                                 or (ROOT / Path(*name.split("."))).with_suffix(".py").is_file()):
        names |= _imported_at_load(name, seen)
  return names


def test_the_jax_extra_brings_what_the_jax_evaluation_imports():
  """``evaluate.py --data=<prepared folder>`` under JAX scores BLEU without
  TensorFlow: what it loads must come with install_requires and the jax extra."""
  missing = (_imported_at_load("transformer.inference.evaluation_jax")
             & set(_not_installed_by(_declared("jax"))))
  assert not missing


def test_the_jax_extra_alone_runs_the_jax_training_command(tmp_path):
  not_installed = _not_installed_by(_declared("jax"))
  # The check has teeth: TensorFlow, the TensorFlow extra's packages.
  assert {"tensorflow", "tensorflow_text", "tensorflow_datasets", "matplotlib"} <= set(not_installed)
  prepared = random_prepared_folder(tmp_path / "prepared")
  runner = tmp_path / "runner.py"
  runner.write_text(RUNNER)
  result = subprocess.run(
      [sys.executable, str(runner), "train.py", "--config=configs/tiny.py", f"--data={prepared}",
       f"--model_dir={tmp_path / 'run'}", "--config.training.epochs=1",
       "--config.data.max_tokens=16"],
      cwd=ROOT, capture_output=True, text=True, timeout=600,
      env={**os.environ, "PYTHONPATH": str(ROOT), "KERAS_BACKEND": "jax",
           "NOT_INSTALLED": json.dumps(not_installed)})
  assert result.returncode == 0, result.stderr[-3000:]
  assert (tmp_path / "run" / "export" / "transformer.weights.h5").is_file()

  # A TensorFlow command in the same environment names the install it needs.
  ted_named_folder(tmp_path / "ted")
  result = subprocess.run(
      [sys.executable, str(runner), "prepare.py", "--config=configs/tiny.py",
       f"--data={tmp_path / 'ted'}", "--tokenizer=build", f"--output={tmp_path / 'out'}"],
      cwd=ROOT, capture_output=True, text=True, timeout=600,
      env={**os.environ, "PYTHONPATH": str(ROOT), "NOT_INSTALLED": json.dumps(not_installed)})
  assert (result.returncode, result.stderr) == (1, (
      "prepare.py: error: TensorFlow is not installed: pip install -e '.[tensorflow]' (or train "
      "under KERAS_BACKEND=jax from prepare.py's folder, docs/training.md)\n"))
