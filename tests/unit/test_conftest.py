"""The shared fixtures (tests/helpers/fixtures.py) work with pytest's cache plugin off."""

import os
from pathlib import Path
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_tokenizer_cache_dir_is_a_folder(tokenizer_cache_dir):
  assert tokenizer_cache_dir.is_dir()


@pytest.mark.slow
def test_tokenizer_cache_dir_without_the_cache_plugin():
  # -p no:cacheprovider leaves pytest's config without .cache.
  result = subprocess.run(
      [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0",
       f"{Path(__file__).relative_to(ROOT)}::test_tokenizer_cache_dir_is_a_folder"],
      cwd=ROOT, capture_output=True, text=True, timeout=120,
      env={**os.environ, "PYTHONPATH": str(ROOT)})
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  assert "1 passed" in result.stdout
