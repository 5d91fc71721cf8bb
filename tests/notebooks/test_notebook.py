"""The tutorial notebook: it runs from top to bottom against the current
library, and is committed with the outputs of such a run.

The run goes through a Jupyter kernel (nbclient), from ``notebooks/``, with the
demonstration training cut to 2 steps of 8 sentences on one-layer stacks, the
data found as the scripts find it (the shared data beside the repository) and
no trained run, as on a fresh clone; any cell error fails it. The committed outputs are those of a run with
the README's trained model.
"""

import configparser
from pathlib import Path
import re

import nbformat
from nbclient import NotebookClient
import pytest

# Executes the tutorial notebook.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "transformer_tutorial.ipynb"
# The scripts' --data=auto (transformer/data/sources.py), not a path of its own.
DATA_LINE = "DATA, _ = sources.resolve_data(sources.AUTO)"
TOKENIZER_LINE = "TUTORIAL_TOKENIZER = sources.SHARED_DATA_DIR / 'tutorial_tokenizer'"
RUN_LINE = "RUN_DIR = Path('../runs/cpu_2h')"
# The tutorial's four sentences, and words that an English rendering of each holds.
TUTORIAL_SENTENCES = {
    "este é um problema que temos que resolver.": ("problem", "solve"),
    "os meus vizinhos ouviram sobre esta ideia.": ("neighbors", "idea"),
    "vou então muito rapidamente partilhar convosco algumas histórias de algumas coisas "
    "mágicas que aconteceram.": ("share", "stories", "magic"),
    "este é o primeiro livro que eu fiz.": ("first", "book"),
}


def code_cells(notebook):
  return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_one_cell_finds_the_data_as_the_scripts_do():
  cells = code_cells(nbformat.read(NOTEBOOK, as_version=4))
  assert not [cell.source for cell in cells if "'../../shared" in cell.source]  # no path of its own
  with_data = [cell.source for cell in cells if "DATA" in cell.source and "sources" in cell.source]
  assert len(with_data) == 1
  assert DATA_LINE in with_data[0] and TOKENIZER_LINE in with_data[0]


def test_committed_with_the_outputs_of_a_run():
  cells = code_cells(nbformat.read(NOTEBOOK, as_version=4))
  assert [cell.execution_count for cell in cells] == list(range(1, len(cells) + 1))
  outputs = [output for cell in cells for output in cell.outputs]
  assert not [output for output in outputs if output.output_type == "error"]
  images = [output for output in outputs if "image/png" in output.get("data", {})]
  assert len(images) >= 5  # positional encodings, learning rate, three attention plots
  printed = "".join(output.get("text", "") for output in outputs)
  assert "e quando melhoramos a procura" in printed  # the tutorial's first example
  displayed = "".join(output.get("data", {}).get("text/plain", "") for output in outputs)
  assert "10,184,162" in displayed  # the tutorial's model, in Keras' summary
  # The translations come from the trained run, and read as English.
  assert "epochs in" in printed and "test BLEU (beam search)" in printed
  predictions = {line.split(": ", 1)[1] for line in printed.splitlines()
                 if line.startswith("Prediction")}
  for sentence, words in TUTORIAL_SENTENCES.items():
    assert f"Input:         : {sentence}" in printed
    assert any(all(word in p for word in words) for p in predictions), (sentence, predictions)


def test_saved_outputs_hold_no_host_paths_or_tensorflow_noise():
  cells = code_cells(nbformat.read(NOTEBOOK, as_version=4))
  printed = "".join(output.get("text", "") for cell in cells for output in cell.outputs)
  assert not re.search(r"/root/|/home/|/work/|site-packages|cuda|InitializeLog|Warning",
                       printed, re.IGNORECASE), printed


def test_the_notebook_names_the_extra_that_brings_jupyter():
  setup = configparser.ConfigParser()
  setup.read(ROOT / "setup.cfg")
  notebook_extra = setup["options.extras_require"]["notebook"].split()
  assert any(line.startswith("jupyterlab==") for line in notebook_extra), notebook_extra
  introduction = nbformat.read(NOTEBOOK, as_version=4).cells[0].source
  assert "pip install -e '.[notebook]'" in introduction


def test_notebook_runs_top_to_bottom(ted_data_dir, tutorial_tokenizer_path):
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  # Smaller batches and one-layer stacks: the same code runs, in a fraction of
  # the time (what the tutorial's sizes give is in the committed outputs).
  replacements = {"DEMO_STEPS = 5": "DEMO_STEPS = 2",
                  "BATCH_SIZE = 64": "BATCH_SIZE = 8",
                  "Encoder(num_layers=4,": "Encoder(num_layers=1,",
                  "Decoder(num_layers=4,": "Decoder(num_layers=1,",
                  "num_layers = 4": "num_layers = 1",
                  RUN_LINE: "RUN_DIR = Path('no-such-run')"}
  for old, new in replacements.items():
    cells = [cell for cell in code_cells(notebook) if old in cell.source]
    assert len(cells) == 1, old
    cells[0].source = cells[0].source.replace(old, new)
  # Raises CellExecutionError, with the cell and its traceback, on any error.
  NotebookClient(notebook, timeout=900, kernel_name="python3",
                 resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
  printed = "".join(output.get("text", "") for cell in code_cells(notebook)
                    for output in cell.outputs)
  # The fixtures skip without ../shared/data; with it, --data=auto's choice.
  assert "data: the local copy in ../shared/data" in printed
  assert "e quando melhoramos a procura" in printed
  assert "no run at no-such-run" in printed
  assert printed.count("Prediction") == 5
