"""notebooks/scaling.ipynb, which measures the two scalings of
``model.scale_attention_logits`` and ``model.embedding_initializer``, runs from
top to bottom as a script."""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "scaling.ipynb"


def notebook_script():
  cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
  code = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
  return "import matplotlib\nmatplotlib.use('Agg')\n" + "\n\n".join(code)


@pytest.mark.slow
def test_scaling_notebook_runs_top_to_bottom(tmp_path):
  script = tmp_path / "notebook.py"
  script.write_text(notebook_script(), encoding="utf-8")
  result = subprocess.run([sys.executable, str(script)], cwd=NOTEBOOK.parent,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
  assert result.returncode == 0, result.stderr[-3000:]
  # It read and printed the measured statistics.
  assert "d_k" in result.stdout and "RMS" in result.stdout
