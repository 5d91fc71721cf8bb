"""The scripts' process: quiet logs, flags' errors in one line, TensorFlow's CPU
allocator and thread pools, JAX's compilation cache.

The scripts import TensorFlow only after their flags are checked (a bad flag
answers at once), through :func:`import_tensorflow`; this module must not
import it itself.
"""

import importlib.util
import json
import logging as python_logging
import os
from pathlib import Path
import sys
from typing import Callable, List, Optional

from absl import flags
from absl import logging

from transformer.run import files
from transformer.run import stop_signals


def import_tensorflow(verbose: bool):
  """Imports and returns TensorFlow (and tensorflow_text, which registers the
  tokenizers' ops), its log lines hidden unless ``verbose``: the C++ start-up
  lines before absl::InitializeLog() (abseil/abseil-cpp#1718) by pointing stderr
  at the null device during the import, then its Python records below ERROR."""
  use_bfc_allocator()
  if not tensorflow_installed():
    sys.exit(f"{Path(sys.argv[0]).name}: error: TensorFlow is not installed: pip install -e "
             "'.[tensorflow]' (or train under KERAS_BACKEND=jax from prepare.py's folder, "
             "docs/training.md)")
  if not verbose:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  stderr = os.dup(2)
  try:
    if not verbose:
      with open(os.devnull, "w", encoding="utf-8") as null:
        os.dup2(null.fileno(), 2)
    # Deferred: TensorFlow only after the set-up above, and never in the JAX process.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  finally:
    os.dup2(stderr, 2)
    os.close(stderr)
  set_cpu_threads(tf)
  if not verbose:
    _drop_records_below(python_logging.ERROR, tf.__file__)
  return tf


def _drop_records_below(level: int, package_file: str) -> None:
  """Drops the log records below ``level`` from the modules of ``package_file``'s folder."""
  folder = os.path.dirname(package_file) + os.sep
  logging.get_absl_handler().addFilter(
      lambda record: record.levelno >= level or not record.pathname.startswith(folder))


class PlainLines(python_logging.Formatter):
  """A log record as a person reads it: the message, after its level for a
  warning or an error ("warning: ..."), without absl's prefix."""

  def format(self, record) -> str:
    message = record.getMessage()
    if record.levelno >= python_logging.WARNING:
      return f"{record.levelname.lower()}: {message}"
    return message


def plain_log_lines(verbose: bool) -> None:
  """Unless ``verbose``, writes the scripts' log lines as :class:`PlainLines`
  and drops records below ERROR from TensorFlow Datasets' modules."""
  if verbose:
    return
  logging.get_absl_handler().setFormatter(PlainLines())
  try:
    tfds_spec = importlib.util.find_spec("tensorflow_datasets")
  except ImportError:
    tfds_spec = None
  if tfds_spec is not None and tfds_spec.origin:
    _drop_records_below(python_logging.ERROR, tfds_spec.origin)


def tensorflow_installed() -> bool:
  """Whether TensorFlow and tensorflow-text (the ``tensorflow`` extra) are
  installed, found without importing them."""
  try:
    return all(importlib.util.find_spec(name) is not None
               for name in ("tensorflow", "tensorflow_text"))
  except ImportError:  # a finder that refuses the name outright
    return False


def hide_jax_logs(verbose: bool) -> None:
  """Drops records below WARNING from JAX's own modules unless ``verbose``;
  call before JAX looks for devices."""
  if verbose:
    return
  # Deferred: JAX is kept out of the TensorFlow process, whose start it would slow.
  import jax  # pylint: disable=g-import-not-at-top
  _drop_records_below(python_logging.WARNING, jax.__file__)


# --compilation_cache's values besides a folder's path.
COMPILATION_CACHE_AUTO, COMPILATION_CACHE_OFF = "auto", "off"


def compilation_cache_dir(setting: str) -> Optional[Path]:
  """The folder of JAX's compilation cache ``setting`` names: ``auto`` is
  ``$JAX_COMPILATION_CACHE_DIR``, else :func:`user_cache`; ``off`` None; else a path."""
  if setting == COMPILATION_CACHE_OFF:
    return None
  if setting != COMPILATION_CACHE_AUTO:
    return Path(setting).expanduser()
  if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    return Path(os.environ["JAX_COMPILATION_CACHE_DIR"]).expanduser()
  return user_cache("jax")


def user_cache(name: str) -> Path:
  """``$XDG_CACHE_HOME`` (default ``~/.cache``) ``/transformer-pt-en/<name>``."""
  return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "transformer-pt-en" / name


def use_compilation_cache(setting: str,
                          warn: Callable[[str], None] = logging.warning) -> Optional[Path]:
  """Points JAX's persistent compilation cache at :func:`compilation_cache_dir`
  (call before the first compile), so that a rerun or a resume loads its
  compiled steps (lab/results/gpu/README.md). Returns the folder, or None when
  it is off or cannot be written (one line through ``warn``; the run goes on).
  The path given is real and absolute (JAX's keys hash it); damaged entries are
  removed (:func:`remove_damaged_entries`); signals wait for a compile
  (:func:`transformer.run.stop_signals.finish_compiles_first`)."""
  # Deferred: JAX is kept out of the TensorFlow process, whose start it would slow.
  import jax  # pylint: disable=g-import-not-at-top
  stop_signals.finish_compiles_first()
  folder = compilation_cache_dir(setting)
  if folder is not None:
    try:
      folder.mkdir(parents=True, exist_ok=True)
      if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"no write permission on {folder}")
      folder = folder.resolve()
      removed = remove_damaged_entries(folder)
    except OSError as e:
      warn(f"no compilation cache: cannot write {folder} ({e.strerror or e}); every shape "
           "compiles anew")
      folder = None
    else:
      if removed:
        warn(f"removed {len(removed)} damaged entr{'y' if len(removed) == 1 else 'ies'} of the "
             f"compilation cache {folder} (cut by a kill or a full disk): "
             f"{', '.join(sorted({name.rsplit('-', 2)[0] for name in removed}))}; each is "
             "compiled once more and written again")
  jax.config.update("jax_enable_compilation_cache", folder is not None)
  if folder is not None:
    jax.config.update("jax_compilation_cache_dir", str(folder))
  return folder


# Beside JAX's entries: {name: [size, mtime in ns]} of those found whole (read once).
CHECKED_ENTRIES_FILE = "transformer-pt-en-checked.json"
_ENTRY_SUFFIX, _ATIME_SUFFIX = "-cache", "-atime"  # jax/_src/lru_cache.py's file names


def remove_damaged_entries(folder: Path) -> List[str]:
  """Removes the entries of JAX's compilation cache in ``folder`` that do not
  decompress in full, and returns their names; OSError if it cannot be listed.

  JAX writes an entry in place: one cut by a kill or a full disk it warns about
  at every run and never writes again. Whole ones are recorded
  (:data:`CHECKED_ENTRIES_FILE`), so only new ones are read.
  """
  # Deferred: JAX is kept out of the TensorFlow process, whose start it would slow.
  from jax._src import compilation_cache  # pylint: disable=g-import-not-at-top
  record = folder / CHECKED_ENTRIES_FILE
  # This JAX's compression's first byte: an entry another JAX compressed otherwise is not judged.
  first_byte = compilation_cache.compress_executable(b"")[:1]
  try:
    checked = json.loads(record.read_text(encoding="utf-8"))
    checked = checked if isinstance(checked, dict) else {}
  except (OSError, ValueError):
    checked = {}
  whole, removed = {}, []
  for entry in sorted(folder.glob(f"*{_ENTRY_SUFFIX}")):
    try:
      stat = entry.stat()
      identity = [stat.st_size, stat.st_mtime_ns]
      if checked.get(entry.name) == identity:
        whole[entry.name] = identity
        continue
      data = entry.read_bytes()
      if data and data[:1] != first_byte:
        continue
      compilation_cache.decompress_executable(data)
      whole[entry.name] = identity
    except OSError:
      continue  # removed meanwhile (another run's eviction), or unreadable: JAX says so
    except Exception:  # pylint: disable=broad-except  (zlib.error, zstd's ZstdError)
      entry.unlink(missing_ok=True)
      Path(str(entry)[:-len(_ENTRY_SUFFIX)] + _ATIME_SUFFIX).unlink(missing_ok=True)
      removed.append(entry.name)
  if whole != checked:
    try:
      files.write_text_atomically(record, json.dumps(whole))
    except OSError:
      pass  # the record only saves reading: the next start checks these again
  return removed


def keras_backend() -> str:
  """The backend Keras will load, without importing Keras: ``$KERAS_BACKEND``,
  else ``$KERAS_HOME/keras.json``'s (``~/.keras``), else tensorflow."""
  if os.environ.get("KERAS_BACKEND"):
    return os.environ["KERAS_BACKEND"]
  keras_json = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "keras.json"
  try:
    return str(json.loads(keras_json.read_text(encoding="utf-8")).get("backend", "tensorflow"))
  except (OSError, ValueError, AttributeError):
    return "tensorflow"


def keras_on_tensorflow(script: str, why: str, say: Callable[[str], None]) -> None:
  """Makes Keras load its TensorFlow backend, for a script's TensorFlow-only
  input (a SavedModel, tf.data), where another backend's ops cannot run in
  TensorFlow's graphs; ``say`` gets ``<script>: KERAS_BACKEND=<it> is not
  used: <why>`` when another was named. Call before Keras is imported (else
  RuntimeError)."""
  backend = keras_backend()
  if backend == "tensorflow" or not tensorflow_installed():
    return  # without TensorFlow, import_tensorflow's one line says what to install
  keras = sys.modules.get("keras")
  if keras is not None and keras.backend.backend() != "tensorflow":
    raise RuntimeError(f"Keras was loaded with the {keras.backend.backend()} backend before "
                       f"{script} chose TensorFlow's")
  os.environ["KERAS_BACKEND"] = "tensorflow"
  say(f"{script}: KERAS_BACKEND={backend} is not used: {why}")


def use_bfc_allocator():
  """Asks for TensorFlow's BFC allocator for CPU tensors (call before TensorFlow
  loads; TF_CPU_ALLOCATOR_USE_BFC=0 keeps malloc): it keeps freed memory for the
  next step, sparing malloc's page faults (1.5x the tokens/s of configs/cpu_2h.py,
  lab/bench/results/cpu_allocator.json)."""
  os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "1")


def usable_cores() -> int:
  """Cores this process may run on (``taskset``, cgroup cpusets), not the machine's."""
  return len(os.sched_getaffinity(0))


def set_cpu_threads(tf, threads: int = 0):
  """Sizes TensorFlow's intra- and inter-op thread pools to ``threads``, or
  with 0 to :func:`usable_cores` (TensorFlow counts the machine's cores, too
  many for a pinned process: ``lab/results/cpu_2h/sweeps.md``) unless
  ``TF_NUM_INTRAOP_THREADS`` / ``TF_NUM_INTEROP_THREADS`` are set."""
  count = threads or usable_cores()
  for variable, set_pool in (
      ("TF_NUM_INTRAOP_THREADS", tf.config.threading.set_intra_op_parallelism_threads),
      ("TF_NUM_INTEROP_THREADS", tf.config.threading.set_inter_op_parallelism_threads)):
    if threads or variable not in os.environ:
      set_pool(count)


def flag_error_line(error: Exception) -> str:
  """An absl flag error (``flag --x=y: why``, perhaps a config file's traceback
  after it) as one line: the flag and the last line."""
  lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
  if not lines:
    return type(error).__name__
  flag_and_why = lines[0].removeprefix("flag ")
  return flag_and_why if len(lines) == 1 else f"{flag_and_why.split(': ')[0]}: {lines[-1]}"


def flags_parser(script: str, exit_code: int = 1,
                 describe: Optional[Callable[[List[str], Exception], str]] = None):
  """A ``flags_parser`` for ``app.run``: a refused flag is one ``script: error:``
  line on stderr and ``exit_code``, not absl's "FATAL Flags parsing error";
  ``describe(argv, error)`` gives the line (default: :func:`flag_error_line`)."""
  def parse(argv):
    try:
      return flags.FLAGS(argv)
    except Exception as e:  # pylint: disable=broad-except  (flags.Error, what a config file raised)
      line = describe(argv, e) if describe else flag_error_line(e)
      print(f"{script}: error: {line}", file=sys.stderr)
      sys.exit(exit_code)
  return parse
