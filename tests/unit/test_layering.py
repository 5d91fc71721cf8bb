"""The library's layers point one way: training uses the rest, nothing else uses training.

Read from the source with ``ast`` (nothing is imported): outside
``transformer/training/`` only ``train.py`` imports ``transformer.training``,
so that evaluation, export and the other scripts stand without the training
machinery; the package's ``__init__`` imports none of its modules (the JAX
path must not import the TensorFlow trainer); and no module assigns an
attribute of another ``transformer`` module, so that no module's state is set
from elsewhere. The lab (``lab/``) reads the library through its public names
only, so that the library's private names can change without it.

The folders import in one order (``model`` nothing of the package but itself,
``config`` the model's settings, ``run`` nothing above it, ``data`` run and
config, ``inference`` model, data and run, ``training`` any), the package has
no import cycle, and an import inside a function is there only to keep
TensorFlow (or JAX) out of a process that does not need it, or out of its
start, and says so in a ``# Deferred:`` line.
"""

import ast
import os
from pathlib import Path
import re
import subprocess
import sys

ROOT = Path(__file__).resolve().parents[2]
TRAINING = ROOT / "transformer" / "training"
# The library and the scripts a user runs.
SOURCES = sorted([*(ROOT / "transformer").rglob("*.py"), *ROOT.glob("*.py")])
LAB = sorted((ROOT / "lab").rglob("*.py"))
LIBRARY = sorted((ROOT / "transformer").rglob("*.py"))
# What each part of the package may import of the package, besides itself.
MAY_IMPORT = {
    "model": set(),
    "config": {"model"},
    "run": set(),
    "data": {"run", "config", "model"},
    "inference": {"model", "data", "run", "config"},
    "training": {"model", "data", "run", "config", "inference"},
    "__init__": set(),
}


def imported_modules(path: Path):
  """Every module ``path`` imports, anywhere in it, as dotted names
  (``from transformer import training`` gives ``transformer.training``)."""
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield node.module
      yield from (f"{node.module}.{alias.name}" for alias in node.names)


def is_training(module: str) -> bool:
  return module == "transformer.training" or module.startswith("transformer.training.")


def test_only_train_py_imports_the_training_package():
  importers = sorted(str(path.relative_to(ROOT)) for path in SOURCES
                     if TRAINING not in path.parents
                     and any(map(is_training, imported_modules(path))))
  assert importers == ["train.py"]


def test_the_training_package_imports_none_of_its_modules():
  assert not list(imported_modules(TRAINING / "__init__.py"))


def test_no_module_sets_another_modules_attributes():
  """``other.name = value`` for a module ``other`` of this package, or
  ``global name`` in a library function: state that one module sets for
  another to read."""
  setters = []
  for path in SOURCES + LAB:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    library_names = {alias.asname or alias.name.split(".")[0]
                     for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                         "transformer") or isinstance(node, ast.Import)
                     for alias in node.names
                     if isinstance(node, ast.ImportFrom) or alias.name.startswith("transformer")}
    for node in ast.walk(tree):
      targets = node.targets if isinstance(node, ast.Assign) else []
      for target in targets:
        if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            and target.value.id in library_names):
          setters.append(f"{path.relative_to(ROOT)}:{node.lineno} sets {target.value.id}."
                         f"{target.attr}")
      if isinstance(node, ast.Global) and (ROOT / "transformer") in path.parents:
        setters.append(f"{path.relative_to(ROOT)}:{node.lineno} global {', '.join(node.names)}")
  assert setters == []


def is_private(name: str) -> bool:
  return name.startswith("_") and not name.endswith("__")


def test_the_lab_uses_no_private_name_of_the_library():
  """``from transformer... import _name``, or ``something._name`` on anything
  but ``self``/``cls`` (a library module, a trainer, a layer)."""
  assert LAB, "lab/ has no Python files: the layout changed"
  uses = []
  for path in LAB:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformer"):
        uses += [f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name}"
                 for alias in node.names if is_private(alias.name)]
      elif (isinstance(node, ast.Attribute) and is_private(node.attr)
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
        uses.append(f"{path.relative_to(ROOT)}:{node.lineno} reads .{node.attr}")
  assert uses == []


def module_name(path: Path) -> str:
  """``transformer/model/embedding.py`` -> ``transformer.model.embedding``."""
  parts = path.relative_to(ROOT).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part(module: str) -> str:
  """The folder (or ``config``) of a ``transformer`` module; ``__init__`` for the package."""
  return module.split(".")[1] if "." in module else "__init__"


def library_imports(path: Path):
  """The ``transformer`` modules that ``path`` imports, anywhere in it: for
  ``from package import module`` the module, not the package."""
  modules = {module_name(p) for p in LIBRARY}
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names if alias.name in modules)
    elif isinstance(node, ast.ImportFrom) and node.module in modules:
      submodules = [f"{node.module}.{alias.name}" for alias in node.names
                    if f"{node.module}.{alias.name}" in modules]
      yield from submodules or [node.module]


def test_the_folders_import_only_the_folders_below_them():
  wrong = []
  for path in LIBRARY:
    own = part(module_name(path))
    for module in library_imports(path):
      other = part(module)
      if other != own and other not in MAY_IMPORT[own]:
        wrong.append(f"{path.relative_to(ROOT)} imports {module}")
  assert wrong == []


def import_cycle():
  """A cycle of ``transformer`` modules importing each other, as a list, or None."""
  graph = {module_name(path): set(library_imports(path)) for path in LIBRARY}
  done, on_path = set(), []

  def visit(module):
    if module in on_path:
      return on_path[on_path.index(module):] + [module]
    if module in done:
      return None
    on_path.append(module)
    for imported in sorted(graph.get(module, ())):
      cycle = visit(imported)
      if cycle:
        return cycle
    on_path.pop()
    done.add(module)
    return None

  return next(filter(None, map(visit, sorted(graph))), None)


def test_the_package_has_no_import_cycle():
  assert import_cycle() is None


def deferred_imports(path: Path):
  """``(line number, reason)`` of every import inside a function of ``path``;
  the reason is the ``# Deferred: ...`` comment above it, or above the run of
  imports and comments it closes, or None."""
  lines = path.read_text(encoding="utf-8").splitlines()
  for function in ast.walk(ast.parse("\n".join(lines))):
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
      continue
    for node in ast.walk(function):
      if isinstance(node, (ast.Import, ast.ImportFrom)):
        above = node.lineno - 2
        while above >= 0 and re.match(r"\s*(import |from |# pylint:)", lines[above]):
          above -= 1
        match = re.match(r"\s*# Deferred: (.+)", lines[above]) if above >= 0 else None
        yield node.lineno, match and match.group(1)


def test_every_deferred_import_says_it_keeps_tensorflow_or_jax_out():
  """An import in a function only where it keeps TensorFlow (or JAX) out of a
  process, or out of its start: the reason says which."""
  unexplained = [f"{path.relative_to(ROOT)}:{line} {reason or 'has no # Deferred: line'}"
                 for path in [*LIBRARY, ROOT / "train.py"]
                 for line, reason in deferred_imports(path)
                 if not (reason and re.search(r"TensorFlow|JAX|start", reason))]
  assert unexplained == []


def test_no_module_of_the_library_is_over_300_lines():
  """Small units with one job (the developers' guide)."""
  modules = (ROOT / "transformer").rglob("*.py")
  long = {str(path.relative_to(ROOT)): length for path in modules
          if (length := len(path.read_text(encoding="utf-8").splitlines())) > 300}
  assert long == {}


def test_the_configuration_imports_no_keras():
  """train.py reads its configuration before TensorFlow is set up (quiet, or
  not at all under JAX): ``transformer.config`` and the model's settings it
  reads import no Keras, which would import TensorFlow."""
  probe = "import sys, transformer.config; print(sorted({'keras', 'tensorflow'} & set(sys.modules)))"
  result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
  assert result.stdout.strip() == "[]"
