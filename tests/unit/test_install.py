"""setup.cfg's extras: each says what it is for and installs what its path
needs. The ``jax`` extra against the modules the JAX command imports:
tests/backends/test_jax_extra.py."""

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _requirements(section: str, key: str):
  setup = configparser.ConfigParser()
  setup.read(ROOT / "setup.cfg")
  return [line.split(";")[0].strip() for line in setup[section][key].splitlines()
          if line.strip() and not line.strip().startswith("#")]


def test_the_tensorflow_extra_brings_the_download_and_what_it_imports():
  tensorflow = _requirements("options.extras_require", "tensorflow")
  # tensorflow-datasets 4.9.10 imports importlib_resources without declaring it.
  for name in ("tensorflow==", "tensorflow-text==", "tensorflow-datasets==",
               "importlib_resources=="):
    assert any(line.startswith(name) for line in tensorflow), (name, tensorflow)


def test_the_jax_install_has_no_tensorflow_and_the_others_bring_it():
  core = _requirements("options", "install_requires")
  jax = _requirements("options.extras_require", "jax")
  assert not [line for line in core + jax if line.startswith("tensorflow")]
  assert any(line.startswith("jax==") for line in jax)
  for extra in ("notebook", "test"):
    assert any(line.startswith("transformer-pt-en[tensorflow")
               for line in _requirements("options.extras_require", extra)), extra
