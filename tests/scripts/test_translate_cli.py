"""translate.py as a user runs it on an exported translator: sentences as
arguments or one a line on stdin, a translation a line on stdout. (Its bad
input: test_cli_errors.py; its console: test_console.py.)"""

import os
from pathlib import Path
import subprocess
import sys

import pytest

# A run of translate.py in a fresh Python.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_translate_cli_reads_arguments_and_stdin(tiny_translator_dir, tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  sentences = ["olá mundo .", "", "mas e se estes fatores fossem ativos ?"]
  translator = tf.saved_model.load(str(tiny_translator_dir))
  expected = [s.decode("utf-8")
              for s in translator.translate_greedy(tf.constant(sentences)).numpy()]
  # Without PYTHONPATH: translate.py finds the project beside itself.
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  run = subprocess.run(
      [sys.executable, str(ROOT / "translate.py"), f"--export_dir={tiny_translator_dir}",
       "--method=greedy", "--batch_size=2", "-"],
      input="\n".join(sentences) + "\n", cwd=tmp_path, env=env, capture_output=True,
      text=True, timeout=300, check=False)
  assert run.returncode == 0, run.stderr[-3000:]
  assert run.stdout.split("\n")[:-1] == expected
