"""Markers for tests that run the model under another Keras backend."""

import importlib.util

import pytest

# JAX is in the test extras; without it (Python 3.10, or a bare install) these skip.
needs_jax = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason="JAX is not installed (pip install -e '.[test]' brings its CPU wheel)")
