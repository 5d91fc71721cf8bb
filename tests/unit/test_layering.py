"""The library's layers point one way: training uses the rest, nothing else uses training.

Read from the source with ``ast`` (nothing is imported): outside
``transformer/training/`` only ``train.py`` imports ``transformer.training``,
so that evaluation, export and the other scripts stand without the training
machinery; the package's ``__init__`` imports none of its modules (the JAX
path must not import the TensorFlow trainer); and no module assigns an
attribute of another ``transformer`` module, so that no module's state is set
from elsewhere. The lab (``lab/``) reads the library through its public names
only, so that the library's private names can change without it.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAINING = ROOT / "transformer" / "training"
# The library and the scripts a user runs.
SOURCES = sorted([*(ROOT / "transformer").rglob("*.py"), *ROOT.glob("*.py")])
LAB = sorted((ROOT / "lab").rglob("*.py"))


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
