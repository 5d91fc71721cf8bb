"""Both engines implement the loop's interface alike, never call back into the
loop, and leave the time to it.

Read from the source with ``ast`` (importing the engines would import
TensorFlow and JAX): every member of ``transformer.training.engine.Engine`` is
defined by ``TensorFlowEngine`` and ``JaxEngine`` as the same kind (a property
or a method) with the same required parameters; neither engine names the
loop's module, and neither reads a clock: an epoch's seconds come from the
loop's ``EpochClock`` (``time.monotonic``).
"""

import ast
from pathlib import Path

import pytest

TRAINING = Path(__file__).resolve().parents[2] / "transformer" / "training"
ENGINES = {"TensorFlowEngine": TRAINING / "tf_engine.py", "JaxEngine": TRAINING / "jax_engine.py"}


def class_node(path: Path, name: str) -> ast.ClassDef:
  tree = ast.parse(path.read_text(encoding="utf-8"))
  return next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name)


def members(node: ast.ClassDef):
  """``{name: (kind, parameters)}`` of the class's public functions, ``kind``
  "property" or "method", ``parameters`` those without a default (what the
  loop passes)."""
  found = {}
  for function in node.body:
    if isinstance(function, ast.FunctionDef) and not function.name.startswith("_"):
      decorators = {getattr(d, "id", None) for d in function.decorator_list}
      kind = "property" if "property" in decorators else "method"
      required = function.args.args[:len(function.args.args) - len(function.args.defaults)]
      found[function.name] = (kind, [arg.arg for arg in required])
  return found


def test_the_interface_is_the_loops_protocol():
  interface = class_node(TRAINING / "engine.py", "Engine")
  assert any(getattr(base, "id", None) == "Protocol" for base in interface.bases)
  assert {"step", "train", "read", "save", "restore", "evaluate"} <= members(interface).keys()


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_each_engine_implements_every_member_alike(name):
  interface = members(class_node(TRAINING / "engine.py", "Engine"))
  engine = members(class_node(ENGINES[name], name))
  assert {member: engine.get(member) for member in interface} == interface


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_no_engine_calls_back_into_the_loop(name):
  names = {node.id for node in ast.walk(class_node(ENGINES[name], name))
           if isinstance(node, ast.Name)}
  assert "loop" not in names


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_no_engine_reads_a_clock(name):
  tree = ast.parse(ENGINES[name].read_text(encoding="utf-8"))
  clocks = [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "time"]
  assert clocks == []
