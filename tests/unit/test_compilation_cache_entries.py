"""What transformer/run/runtime.py does to JAX's compilation cache before JAX
sees it (issue 67, case 6): damaged entries removed, each entry read in full
once, an entry another environment compressed otherwise left alone; a
TensorFlow-only input under KERAS_BACKEND=jax (case 7). The runs that use
them: tests/backends/test_compilation_cache.py and tests/faults/test_jax_faults.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.backends import needs_jax
from transformer.run import runtime

REPO_DIR = Path(__file__).resolve().parents[2]


def _entry(executable: bytes) -> bytes:
  """A cache entry as this JAX writes it: the compile time, then the executable, compressed."""
  from jax._src import compilation_cache  # pylint: disable=g-import-not-at-top
  return compilation_cache.compress_executable(
      compilation_cache.combine_executable_and_time(executable, 3))


@needs_jax
def test_damaged_entries_are_removed_and_whole_ones_read_once(tmp_path):
  whole = _entry(b"executable" * 1000)
  (tmp_path / "jit_step-aa-cache").write_bytes(whole)
  (tmp_path / "jit_step-bb-cache").write_bytes(whole[:len(whole) // 2])  # a kill mid-write
  (tmp_path / "jit_step-bb-atime").write_bytes(bytes(8))
  (tmp_path / "jit_step-cc-cache").write_bytes(b"")  # a full disk before the first byte
  (tmp_path / "jit_step-dd-cache").write_bytes(b"\x28\xb5\x2f\xfd junk")  # zstd's frame: not ours
  assert runtime.remove_damaged_entries(tmp_path) == ["jit_step-bb-cache", "jit_step-cc-cache"]
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      "jit_step-aa-cache", "jit_step-dd-cache", runtime.CHECKED_ENTRIES_FILE]
  checked = json.loads((tmp_path / runtime.CHECKED_ENTRIES_FILE).read_text())
  assert list(checked) == ["jit_step-aa-cache"]
  # Recorded whole: not read again while its size and time stay (this damage goes unseen).
  stat = (tmp_path / "jit_step-aa-cache").stat()
  (tmp_path / "jit_step-aa-cache").write_bytes(whole[:2] + bytes(len(whole) - 2))
  os.utime(tmp_path / "jit_step-aa-cache", ns=(stat.st_atime_ns, stat.st_mtime_ns))
  assert runtime.remove_damaged_entries(tmp_path) == []
  # Written again (another time): read again.
  os.utime(tmp_path / "jit_step-aa-cache", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
  assert runtime.remove_damaged_entries(tmp_path) == ["jit_step-aa-cache"]


@needs_jax
def test_the_cache_folder_is_given_to_jax_as_its_real_path(tmp_path):
  (tmp_path / "cache").mkdir()
  (tmp_path / "link").symlink_to(tmp_path / "cache")
  script = ("import jax, sys\nfrom transformer.run import runtime\n"
            "print(runtime.use_compilation_cache(sys.argv[1]), "
            "jax.config.jax_compilation_cache_dir)")
  for name in ("link", "cache", str(tmp_path / "link")):
    result = subprocess.run([sys.executable, "-c", script, name], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO_DIR)},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == [str((tmp_path / "cache").resolve())] * 2, name


@pytest.mark.skipif(not runtime.tensorflow_installed(), reason="TensorFlow is not installed")
def test_keras_on_tensorflow_says_it_in_one_line_when_jax_was_asked(monkeypatch):
  lines = []
  monkeypatch.setenv("KERAS_BACKEND", "jax")
  monkeypatch.delitem(sys.modules, "keras", raising=False)  # not loaded yet, as in the scripts
  runtime.keras_on_tensorflow("translate.py", "it translates on TensorFlow", lines.append)
  assert os.environ["KERAS_BACKEND"] == "tensorflow"
  assert lines == ["translate.py: KERAS_BACKEND=jax is not used: it translates on TensorFlow"]
  runtime.keras_on_tensorflow("translate.py", "it translates on TensorFlow", lines.append)
  assert len(lines) == 1  # already TensorFlow's: nothing said
