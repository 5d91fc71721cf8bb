"""Files of a run folder written safely, without TensorFlow: whole text files and the run's lock.

Both trainers use them: :mod:`transformer.training.checkpointing` (TensorFlow)
and :mod:`transformer.training.jax_trainer` (Keras on JAX).
"""

import fcntl
import os
from pathlib import Path

from absl import logging

from transformer.run.errors import TrainingError

LOCK_FILE = "train.lock"


class RunLockedError(TrainingError):
  """Another running process holds the run folder's lock; ``holder`` is its PID."""

  def __init__(self, message: str, holder: str):
    super().__init__(message)
    self.holder = holder


def write_text_atomically(path: Path, text: str) -> None:
  """Writes ``text`` to a temporary file beside ``path`` and renames it over
  ``path``: a kill or a full disk leaves the old file or the new one, whole."""
  temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
  try:
    with open(temporary, "w", encoding="utf-8") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(temporary, path)
  finally:
    temporary.unlink(missing_ok=True)


class RunLock:
  """An exclusive lock on a run folder, held by one ``train.py`` until it exits.

  ``flock`` on ``<model_dir>/train.lock``, which holds the holder's PID. The
  kernel drops the lock when its process ends, however it ends, so a lock file
  left by a killed run is stale by construction and taken over; a run that
  ends cleanly removes it (:meth:`release`).
  """

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
      # The holder may have removed the file between our open and our lock
      # (release): then the lock is on a file no other run will open again.
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
