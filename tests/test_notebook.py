"""The tutorial notebook: it runs from top to bottom against the current
library, and is committed with the outputs of such a run.

The run goes through a Jupyter kernel (nbclient), from ``notebooks/``, with the
demonstration training cut from 100 steps to 2 and the data cell pointed at
the shared data fixtures; any cell error fails it.
"""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "transformer_tutorial.ipynb"
DATA_LINE = "DATA = Path('../../shared/data/ted_hrlr_pt_to_en')  # or 'tfds'"
TOKENIZER_LINE = "TUTORIAL_TOKENIZER = Path('../../shared/data/tutorial_tokenizer')"


def code_cells(notebook):
  return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_one_cell_says_where_the_data_comes_from():
  cells = code_cells(nbformat.read(NOTEBOOK, as_version=4))
  with_paths = [cell.source for cell in cells if "shared/data" in cell.source]
  assert len(with_paths) == 1
  assert DATA_LINE in with_paths[0] and TOKENIZER_LINE in with_paths[0]


def test_committed_with_the_outputs_of_a_run():
  cells = code_cells(nbformat.read(NOTEBOOK, as_version=4))
  assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1))
  outputs = [output for cell in cells for output in cell.outputs]
  assert not [output for output in outputs if output.output_type == "error"]
  images = [output for output in outputs if "image/png" in output.get("data", {})]
  assert len(images) >= 4  # positional encodings, learning rate, loss, attention
  printed = "".join(output.get("text", "") for output in outputs)
  assert "e quando melhoramos a procura" in printed  # the tutorial's first example


def test_notebook_runs_top_to_bottom(ted_data_dir, tutorial_tokenizer_path):
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  replacements = {"DEMO_STEPS = 100": "DEMO_STEPS = 2",
                  DATA_LINE: f"DATA = Path({str(ted_data_dir)!r})",
                  TOKENIZER_LINE: f"TUTORIAL_TOKENIZER = Path({str(tutorial_tokenizer_path)!r})"}
  for old, new in replacements.items():
    cells = [cell for cell in code_cells(notebook) if old in cell.source]
    assert len(cells) == 1, old
    cells[0].source = cells[0].source.replace(old, new)
  plot = NOTEBOOK.parent / "attention.png"
  plot.unlink(missing_ok=True)
  # Raises CellExecutionError, with the cell and its traceback, on any error.
  NotebookClient(notebook, timeout=900, kernel_name="python3",
                 resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
  printed = "".join(output.get("text", "") for cell in code_cells(notebook)
                    for output in cell.outputs)
  assert "e quando melhoramos a procura" in printed
  assert plot.stat().st_size > 0
  plot.unlink()
