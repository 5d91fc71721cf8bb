"""Fused attention gives the explicit path's outputs under JAX too
(helpers/fused_attention.py, in a child Python with KERAS_BACKEND=jax)."""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from helpers import fused_attention
from helpers.backends import needs_jax

REPO_DIR = Path(__file__).resolve().parents[2]


@needs_jax
@pytest.mark.slow
def test_fused_attention_matches_the_explicit_path_under_jax():
  env = {**os.environ, "KERAS_BACKEND": "jax",
         "PYTHONPATH": os.pathsep.join([str(REPO_DIR), str(REPO_DIR / "tests")])}
  result = subprocess.run([sys.executable, "-m", "helpers.fused_attention"], cwd=REPO_DIR,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  fused_attention.check(json.loads(result.stdout.strip().splitlines()[-1]))
