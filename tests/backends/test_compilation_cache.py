"""train.py's persistent compilation cache under KERAS_BACKEND=jax (--compilation_cache,
transformer/run/runtime.py): a second run loads the steps the first compiled, also
when the first left damaged entries or named the folder otherwise (issue 67, case 6).
evaluate.py's use of the same cache is tested in tests/faults/test_jax_faults.py,
beside the JAX run it evaluates."""

import os
from pathlib import Path
import subprocess
import sys

import pytest

from helpers.backends import needs_jax
from helpers.prepared import random_prepared_folder, ted_named_folder

REPO_DIR = Path(__file__).resolve().parents[2]

pytestmark = [needs_jax, pytest.mark.slow]


def train(tmp_path: Path, run: str, *flags: str, keras_backend: str = "jax",
          cwd: Path = REPO_DIR):
  """train.py on configs/tiny.py for one epoch of random prepared shards, with
  the per-user cache folder under ``tmp_path/home`` (no JAX_COMPILATION_CACHE_DIR),
  started in ``cwd``. Every compile is cached: by default JAX skips those under a
  second, and a tiny step's compile time straddles that with the machine's load."""
  prepared = tmp_path / "prepared"
  if not prepared.exists():
    random_prepared_folder(prepared)
  env = {key: value for key, value in os.environ.items() if key != "JAX_COMPILATION_CACHE_DIR"}
  env.update(PYTHONPATH=str(REPO_DIR), KERAS_BACKEND=keras_backend,
             XDG_CACHE_HOME=str(tmp_path / "home"),
             JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
  return subprocess.run([sys.executable, str(REPO_DIR / "train.py"),
                         f"--config={REPO_DIR / 'configs' / 'tiny.py'}", f"--data={prepared}",
                         f"--model_dir={tmp_path / run}", "--noexport", *flags],
                        cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def entries(folder: Path):
  """JAX's entries in ``folder`` (not runtime.py's record of those checked) and their times."""
  return {path.name: path.stat().st_mtime_ns for path in folder.glob("*-cache")}


def test_a_second_run_loads_the_steps_the_first_compiled(tmp_path):
  first = train(tmp_path, "first")
  assert first.returncode == 0, first.stderr
  folder = tmp_path / "home" / "transformer-pt-en" / "jax"  # the per-user default
  written = entries(folder)
  assert {"jit_train_stack", "jit_eval_step"} <= {name.split("-")[0] for name in written}, written
  second = train(tmp_path, "second")
  assert second.returncode == 0, second.stderr
  assert entries(folder) == written  # every step found, none compiled and written again


def test_damaged_entries_are_removed_compiled_once_more_and_then_read(tmp_path):
  folder = tmp_path / "cache"
  first = train(tmp_path, "first", f"--compilation_cache={folder}")
  assert first.returncode == 0, first.stderr
  # What a kill in JAX's write leaves, and what a full disk does: a cut entry, an empty one.
  names = sorted(entries(folder), key=lambda name: -(folder / name).stat().st_size)[:2]
  cut, emptied = folder / names[0], folder / names[1]
  cut.write_bytes(cut.read_bytes()[:cut.stat().st_size // 2])
  emptied.write_bytes(b"")
  second = train(tmp_path, "second", f"--compilation_cache={folder}")
  assert second.returncode == 0, second.stderr
  assert "Error reading persistent compilation cache entry" not in second.stderr, second.stderr
  warnings = [line for line in second.stderr.splitlines() if "compilation cache" in line]
  assert len(warnings) == 1 and warnings[0].startswith(
      f"warning: removed 2 damaged entries of the compilation cache {folder} "), second.stderr
  from jax._src import compilation_cache  # pylint: disable=g-import-not-at-top
  for entry in (cut, emptied):  # compiled and written again, whole
    assert compilation_cache.decompress_executable(entry.read_bytes())
  written = entries(folder)
  third = train(tmp_path, "third", f"--compilation_cache={folder}")
  assert third.returncode == 0, third.stderr
  assert "compilation cache" not in third.stderr, third.stderr
  assert entries(folder) == written  # every entry read, none written again


def test_a_relative_name_and_a_link_to_the_folder_hit_the_same_entries(tmp_path):
  (tmp_path / "cache").mkdir()
  (tmp_path / "link").symlink_to(tmp_path / "cache")
  first = train(tmp_path, "first", "--compilation_cache=cache", cwd=tmp_path)
  assert first.returncode == 0, first.stderr
  written = entries(tmp_path / "cache")
  assert written
  second = train(tmp_path, "second", f"--compilation_cache={tmp_path / 'link'}")
  assert second.returncode == 0, second.stderr
  assert entries(tmp_path / "cache") == written  # JAX's keys hash the folder's path


def test_off_writes_no_cache(tmp_path):
  result = train(tmp_path, "run", "--compilation_cache=off")
  assert result.returncode == 0, result.stderr
  assert not (tmp_path / "home" / "transformer-pt-en").exists()


def test_a_cache_folder_that_cannot_be_made_is_one_warning(tmp_path):
  blocker = tmp_path / "a_file"
  blocker.write_text("not a folder")
  result = train(tmp_path, "run", f"--compilation_cache={blocker / 'cache'}")
  assert result.returncode == 0, result.stderr
  warnings = [line for line in result.stderr.splitlines() if "compilation cache" in line]
  assert warnings == [f"warning: no compilation cache: cannot write {blocker / 'cache'} "
                      "(Not a directory); every shape compiles anew"], result.stderr
  assert (tmp_path / "run" / "checkpoints").is_dir()


def test_the_flag_is_refused_on_the_tensorflow_path(tmp_path):
  ted_named_folder(tmp_path)
  result = subprocess.run(
      [sys.executable, "train.py", "--config=configs/tiny.py", f"--data={tmp_path}",
       f"--model_dir={tmp_path / 'run'}", f"--compilation_cache={tmp_path / 'cache'}"],
      cwd=REPO_DIR, env={**os.environ, "KERAS_BACKEND": "tensorflow"},
      capture_output=True, text=True, timeout=600)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      "train.py: error: --compilation_cache is JAX's: it applies under KERAS_BACKEND=jax with "
      "a prepare.py folder as --data"]
