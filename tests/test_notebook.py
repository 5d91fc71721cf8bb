"""The tutorial notebook runs from top to bottom against the current library.

Its code cells are run in order in a fresh interpreter from ``notebooks/``,
with the demonstration training cut from 100 steps to 2.
"""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "transformer_tutorial.ipynb"


def notebook_script():
  cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
  code = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
  script = "\n\n".join(code)
  assert "DEMO_STEPS = 100" in script
  return "import matplotlib\nmatplotlib.use('Agg')\n" + script.replace(
      "DEMO_STEPS = 100", "DEMO_STEPS = 2")


def test_notebook_runs_top_to_bottom(shared_data_dir, tmp_path):
  plot = NOTEBOOK.parent / "attention.png"
  plot.unlink(missing_ok=True)
  script = tmp_path / "notebook.py"
  script.write_text(notebook_script(), encoding="utf-8")
  result = subprocess.run([sys.executable, str(script)], cwd=NOTEBOOK.parent,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
  assert result.returncode == 0, result.stderr[-3000:]
  # The tutorial's first training example, in TFDS order, comes first.
  assert "e quando melhoramos a procura" in result.stdout
  assert plot.stat().st_size > 0
