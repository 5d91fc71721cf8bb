"""Checkpoints of the Keras trainer without TensorFlow (:mod:`transformer.training.jax_engine`).

One folder per checkpoint, ``<model_dir>/checkpoints/step-<N>``, holding
``model.weights.h5`` (the TensorFlow side loads it too), ``optimizer.npz`` and
``non_trainable.npz`` (the variables in order, the dropout layers' random
states among them, so that a resumed run draws the same masks),
``state.json`` (the position in the data) and ``sha256.json`` (each file's
digest as written: h5py alone loads damaged floats silently).

Written through :func:`transformer.run.files.staged`. As with TensorFlow's
checkpoints, a newest one that cannot be read is moved to
``checkpoints/unreadable/`` with a warning (readers skip it in place).
"""

import json
from pathlib import Path
import re
import shutil
import zipfile
from typing import List, Optional, Tuple

from absl import logging
import numpy as np

from transformer.run import files
from transformer.run.errors import CheckpointError, describe_error
from transformer.run.run_folder import UNREADABLE_SUBDIR

WEIGHTS_FILE = "model.weights.h5"
DIGESTS_FILE = "sha256.json"
_FILES = (WEIGHTS_FILE, "optimizer.npz", "non_trainable.npz", "state.json")
_NAME = re.compile(r"step-(\d+)")


def checkpoint_dirs(directory: Path) -> List[Path]:
  """The complete checkpoints of ``directory`` (``checkpoints/``), oldest first."""
  found = [p for p in Path(directory).glob("step-*") if _NAME.fullmatch(p.name) and p.is_dir()]
  return sorted(found, key=lambda p: int(_NAME.fullmatch(p.name).group(1)))


def exist(directory: Path) -> bool:
  """Whether ``directory`` holds checkpoints of this trainer."""
  return bool(checkpoint_dirs(directory))


def damage(path: Path) -> Optional[str]:
  """Why the checkpoint folder ``path`` cannot be trusted (a file missing or
  changed since written), or None."""
  missing = [name for name in _FILES if not (path / name).is_file()]
  if missing:
    return f"missing {', '.join(missing)}"
  if not (path / DIGESTS_FILE).is_file():
    return None
  try:
    recorded = json.loads((path / DIGESTS_FILE).read_text(encoding="utf-8"))
    changed = [name for name in _FILES if recorded[name] != files.sha256_of(path / name)]
  except (OSError, ValueError, KeyError, TypeError) as e:
    return f"{DIGESTS_FILE} unreadable ({describe_error(e)})"
  if changed:
    return (f"{', '.join(changed)} changed since written (sha256 differs from "
            f"{DIGESTS_FILE}: a damaged disk or an edited file)")
  return None


def save(directory: Path, step: int, model, optimizer_values, non_trainable_values,
         state: dict, keep: int) -> Path:
  """Writes checkpoint ``step`` (the model's variables must hold the values to
  save; the other values are arrays) and keeps the newest ``keep``."""
  directory = Path(directory)
  final = directory / f"step-{step}"
  try:
    # The same step may be saved again (a resumed run's first save): replaced whole.
    with files.staged(final, folder=True) as partial:
      model.save_weights(str(partial / WEIGHTS_FILE))
      np.savez(partial / "optimizer.npz", *[np.asarray(v) for v in optimizer_values])
      np.savez(partial / "non_trainable.npz", *[np.asarray(v) for v in non_trainable_values])
      (partial / "state.json").write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
      (partial / DIGESTS_FILE).write_text(
          json.dumps({name: files.sha256_of(partial / name) for name in _FILES}, indent=1) + "\n",
          encoding="utf-8")
  except OSError as e:
    latest = checkpoint_dirs(directory)
    raise CheckpointError(
        f"cannot write the checkpoint {final}: {describe_error(e)}. The last good checkpoint "
        f"is {latest[-1] if latest else 'none (none was written yet)'}; free space and rerun "
        "the same command to resume from it") from e
  for old in checkpoint_dirs(directory)[:-keep]:
    shutil.rmtree(old, ignore_errors=True)
  return final


class _Unreadable(Exception):
  """A checkpoint's files cannot be read in full (cut short, missing, not what they should be)."""


def _read(path: Path, model) -> Tuple[List[np.ndarray], List[np.ndarray], dict]:
  """Loads the weights into ``model`` and returns the other files' contents;
  :class:`CheckpointError` for another model's weights."""
  reason = damage(path)
  if reason:
    raise _Unreadable(reason)
  try:
    state = json.loads((path / "state.json").read_text(encoding="utf-8"))
    arrays = []
    for name in ("optimizer.npz", "non_trainable.npz"):
      with np.load(path / name, allow_pickle=False) as npz:
        arrays.append([npz[f"arr_{i}"] for i in range(len(npz.files))])
  except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
    raise _Unreadable(describe_error(e)) from e
  try:
    model.load_weights(str(path / WEIGHTS_FILE))
  except OSError as e:  # h5py: a truncated or damaged file
    raise _Unreadable(describe_error(e)) from e
  except ValueError as e:  # Keras: other shapes or layers
    raise CheckpointError(
        f"cannot restore the checkpoint {path}: it was written by a different "
        f"model/configuration (e.g. another d_model or vocabulary). Use a new --model_dir, or "
        f"delete {path.parent} to start over. Cause: {describe_error(e)}") from e
  return arrays[0], arrays[1], state


def restore(directory: Path,
            model) -> Optional[Tuple[Path, List[np.ndarray], List[np.ndarray], dict]]:
  """Loads the newest readable checkpoint's weights into ``model`` and returns
  ``(path, optimizer values, non-trainable values, state)``, or None without
  checkpoints; :class:`CheckpointError` when none can be read."""
  directory = Path(directory)
  for partial in directory.glob(".step-*.partial"):
    logging.warning("removing %s, a checkpoint write that did not finish", partial)
    shutil.rmtree(partial, ignore_errors=True)
  unreadable = []
  for path in reversed(checkpoint_dirs(directory)):
    try:
      return (path, *_read(path, model))
    except _Unreadable as e:
      reason = str(e)
      aside = directory / UNREADABLE_SUBDIR
      aside.mkdir(exist_ok=True)
      shutil.rmtree(aside / path.name, ignore_errors=True)
      path.rename(aside / path.name)
      logging.warning("skipping the checkpoint %s: it cannot be read (%s); moved to %s",
                      path, reason, aside)
      unreadable.append(f"{path.name} ({reason})")
  if unreadable:
    raise CheckpointError(f"no readable checkpoint left in {directory}: {'; '.join(unreadable)} "
                          f"(moved to {directory / UNREADABLE_SUBDIR}). Use a new --model_dir "
                          f"or delete {directory} to start over")
  return None


def last_weights(directory: Path, n: int) -> List[Path]:
  """The weights files of the last ``n`` checkpoints up to the newest intact
  one, oldest first; :class:`CheckpointError` when there are fewer."""
  dirs = checkpoint_dirs(directory)
  while dirs and (reason := damage(dirs[-1])):
    logging.warning("skipping the checkpoint %s: it cannot be read (%s)", dirs.pop(), reason)
  if n < 1 or len(dirs) < n:
    raise CheckpointError(f"asked for the last {n} checkpoints but {directory} has {len(dirs)}")
  return [path / WEIGHTS_FILE for path in dirs[-n:]]


def load_weights(model, paths: List[Path]) -> None:
  """Loads ``paths[0]`` into the built ``model``, or with several the
  element-wise mean of their floating-point weights (paper §6.1)."""
  sums = None
  for path in paths:
    try:
      model.load_weights(str(path))
    except (OSError, ValueError) as e:
      raise CheckpointError(f"cannot load {path} into the model: {describe_error(e)}") from e
    if len(paths) > 1:
      values = [np.asarray(w.numpy(), np.float64) for w in model.weights]
      sums = values if sums is None else [total + v for total, v in zip(sums, values)]
  if len(paths) > 1:
    for weight, total in zip(model.weights, sums):
      if np.issubdtype(np.dtype(weight.dtype), np.floating):
        weight.assign((total / len(paths)).astype(weight.dtype))
