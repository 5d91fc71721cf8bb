"""Files written safely, without TensorFlow: staged then renamed, and a run folder's lock.

:func:`staged` is the one way this project replaces a file or a folder whole:
the new version is written beside the target (``.NAME.partial``) and put in
its place, so that a kill or a full disk leaves the old version or the new
one. :func:`lock_run_folder` takes the run's lock.
"""

import atexit
import contextlib
import ctypes
import fcntl
import hashlib
import os
from pathlib import Path
import shutil
from typing import Iterator

from absl import logging

from transformer.run.errors import TrainingError
from transformer.run.run_folder import LOCK_FILE

# renameat2's flag that swaps two paths in one step (Linux 3.15+, glibc 2.28+).
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class RunLockedError(TrainingError):
  """Another running process holds the run folder's lock; ``holder`` is its PID."""

  def __init__(self, message: str, holder: str):
    super().__init__(message)
    self.holder = holder


def staging_path(path: Path) -> Path:
  """Where :func:`staged` writes ``path``'s next version, keeping its suffixes
  for Keras (``model.weights.h5`` -> ``.model.partial.weights.h5``)."""
  stem, dot, suffixes = path.name.partition(".")
  return path.with_name(f".{stem}.partial{dot}{suffixes}")


def _remove(path: Path) -> None:
  if path.is_dir() and not path.is_symlink():
    shutil.rmtree(path, ignore_errors=True)
  elif path.exists() or path.is_symlink():
    path.unlink(missing_ok=True)


def _fsync_below(path: Path, recursive: bool = True) -> None:
  """Flushes ``path`` (and with ``recursive`` every file below it) to the disk."""
  below = [p for p in path.rglob("*") if p.is_file()] if recursive and path.is_dir() else []
  for file in [path, *below]:
    fd = os.open(file, os.O_RDONLY)
    try:
      os.fsync(fd)
    finally:
      os.close(fd)


def _exchange(first: Path, second: Path) -> bool:
  """Swaps two existing paths in one step; False where the system cannot."""
  # The process's own symbols, the C library's among them (no search for its file).
  renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
  if renameat2 is None:
    return False
  return renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
                   _RENAME_EXCHANGE) == 0


def _put_in_place(staging: Path, path: Path) -> None:
  """Puts ``staging`` where ``path`` is; a folder is swapped in one step where
  the system allows (``path`` never missing), else renamed aside first."""
  if not (path.is_dir() and staging.is_dir()):
    os.replace(staging, path)
  elif _exchange(staging, path):
    shutil.rmtree(staging, ignore_errors=True)  # the old version now
  else:
    old = path.with_name(f".{path.name}.old")
    _remove(old)
    path.rename(old)
    staging.rename(path)
    shutil.rmtree(old, ignore_errors=True)
  _fsync_below(path.parent, recursive=False)  # the rename itself


def recover(path: Path) -> None:
  """Undoes what a kill left of a :func:`staged` write of ``path``."""
  old = path.with_name(f".{path.name}.old")
  if old.exists() and not path.exists():
    logging.warning("putting back %s, which a stopped write had set aside", path)
    old.rename(path)
  _remove(old)
  _remove(staging_path(path))


@contextlib.contextmanager
def staged(path, folder: bool = False) -> Iterator[Path]:
  """Yields where to write ``path``'s next version (an empty folder if
  ``folder``); when the block ends without an error, flushes it and puts it in
  place. On an error (or a signal) ``path`` is left as it was."""
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  recover(path)
  staging = staging_path(path)
  if folder:
    staging.mkdir()
  try:
    yield staging
    _fsync_below(staging)
    _put_in_place(staging, path)
  except OSError as e:  # a full disk's EFBIG/ENOSPC names no file: this one is named
    if e.errno is not None and e.filename is None:
      e.filename = str(path)
    raise
  finally:
    _remove(staging)


def write_text_atomically(path: Path, text: str) -> None:
  """Replaces ``path`` with ``text`` whole (:func:`staged`)."""
  with staged(path) as staging:
    staging.write_text(text, encoding="utf-8")


def sha256_of(path: Path) -> str:
  """The hex sha256 of the file ``path``."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def check_writable(folder: Path) -> None:
  """Creates ``folder`` and writes a file in it: an ``OSError`` now rather than
  after hours of work."""
  folder = Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  probe = folder / f".write_check.{os.getpid()}"
  try:
    probe.write_bytes(b"\n")
  finally:
    probe.unlink(missing_ok=True)


def lock_run_folder(model_dir: Path) -> "RunLock":
  """Creates ``model_dir`` and takes its :class:`RunLock` until the process ends."""
  model_dir.mkdir(parents=True, exist_ok=True)
  lock = RunLock(model_dir)
  atexit.register(lock.release)  # first: a Ctrl-C right after acquire() is an exit too
  lock.acquire()
  return lock


class RunLock:
  """An exclusive lock on a run folder for one ``train.py``: ``flock`` on
  ``<model_dir>/train.lock``, which holds the holder's PID. The kernel drops
  it when the process ends, so a killed run's lock file is taken over."""

  def __init__(self, model_dir: Path):
    self.path = Path(model_dir) / LOCK_FILE
    self._fd = None

  def acquire(self) -> None:
    """Takes the lock; raises :class:`RunLockedError` naming the holder's PID."""
    while True:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError as e:
        holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise RunLockedError(
            f"{self.path.parent} is in use by another train.py (PID {holder}); wait for it "
            "to end or stop it, or use another --model_dir", holder) from e
      # The holder may have removed the file between our open and our lock.
      if self.path.exists() and os.path.samestat(os.fstat(fd), os.stat(self.path)):
        break
      os.close(fd)
    previous = os.read(fd, 64).decode("ascii", "replace").strip()
    if previous:
      logging.warning("taking over the stale lock %s of PID %s, which no longer runs",
                      self.path, previous)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    self._fd = fd

  def release(self) -> None:
    """Removes the lock file and lets go of the lock."""
    if self._fd is not None:
      self.path.unlink(missing_ok=True)
      os.close(self._fd)
      self._fd = None
