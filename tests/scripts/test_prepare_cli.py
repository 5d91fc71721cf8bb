"""prepare.py's refusals: one line naming what is wrong, before TensorFlow loads."""

import os
from pathlib import Path
import subprocess
import sys

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, line", [
    ([], "prepare.py: error: --output is required"),
    (["--output={tmp}"], "prepare.py: error: --output={tmp} exists and is not a prepared "
                         "folder; choose another path"),
    (["--output={tmp}/new", "--tokenizer={tmp}/none"],
     "prepare.py: error: --tokenizer={tmp}/none: no tokenizer SavedModel there (no "
     "saved_model.pb); pass one, e.g. ../shared/data/tutorial_tokenizer, or --tokenizer=build"),
    (["--output={tmp}/new", "--data={tmp}"],
     "prepare.py: error: --data={tmp}: not a folder with the TED HRLR files (missing pt.train, "
     "en.train, pt.dev, en.dev, pt.test, en.test)"),
])
def test_bad_input_is_one_line(tmp_path, args, line):
  result = subprocess.run([sys.executable, "prepare.py", *(a.format(tmp=tmp_path) for a in args)],
                          cwd=REPO_DIR, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_DIR)})
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [line.format(tmp=tmp_path)]
  assert not (tmp_path / "new").exists()
