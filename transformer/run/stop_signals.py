"""Stopping a training run cleanly on SIGTERM or SIGINT (Ctrl-C).

Inside ``with StopSignals() as stop:`` the first SIGTERM/SIGINT is only
recorded in ``stop.received``; the loop in :mod:`transformer.training.tf_engine` checks it
after every step, saves a checkpoint and returns with
``TrainResult.interrupted_by`` set. ``train.py`` then exits with status 128 +
the signal number, 143 for SIGTERM and 130 for Ctrl-C, like a shell, so that a
scheduler sees the run as unfinished and reruns it.

The first signal also puts the previous handler back, so that a second one acts
at once (Ctrl-C twice aborts). Python runs signal handlers on the main thread
only, so on any other thread nothing is installed and ``received`` stays None.

``evaluate.py`` and ``translate.py``, which have nothing to save, stop at once
instead: :func:`interrupt_on_signals` makes both signals raise
:class:`Interrupted`, which they report in one line before exiting 128 + the
signal number.

Under JAX, a signal that arrives while the main thread waits for XLA to
compile is held until the compile returns (:func:`finish_compiles_first`):
jaxlib's wait lets the handler raise there, and the compile, abandoned on
XLA's threads, then ran on into the interpreter's exit, which destroyed the
JAX client under it: ``Fatal Python error: Segmentation fault`` after the
script's line.
"""

import functools
import os
import signal
import sys
import threading
from typing import Callable, List, Optional

from absl import logging

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
  """SIGTERM or SIGINT arrived (see :func:`interrupt_on_signals`); ``signum``
  is its number, ``name`` its name."""

  def __init__(self, signum: int):
    self.signum = signum
    self.name = signal.Signals(signum).name
    super().__init__(self.name)


def interrupt_on_signals(say_stopped: Callable[[Interrupted], None]) -> None:
  """From now on SIGTERM and SIGINT raise :class:`Interrupted` in the main
  thread (a signal ignored when the process started, e.g. SIGINT under
  ``nohup ... &``, stays ignored), for the script to report with
  ``say_stopped`` and exit 128 + its number. Python runs the handler between
  bytecodes: a TensorFlow op running then finishes first.

  When the signal lands in a destructor (``__del__``, which TensorFlow's
  resources have), Python ignores the exception and the script would go on:
  then ``say_stopped`` is called there and the process exits at once, with
  stdout flushed.

  A signal that arrives during a JAX compile (:func:`finish_compiles_first`)
  is raised when the compile returns; a second one then exits at once, after
  ``say_stopped``, as a kill would (the compile is dropped with the process).
  """
  def interrupt(signum, frame):  # pylint: disable=unused-argument
    if _compiles_in_progress:
      if _held_signals:  # asked twice
        say_stopped(Interrupted(signum))
        _exit_now(128 + signum)
      _held_signals.append(signum)
      return
    raise Interrupted(signum)
  for signum in SIGNALS:
    if signal.getsignal(signum) is not signal.SIG_IGN:
      signal.signal(signum, interrupt)
  default_hook = sys.unraisablehook

  def exit_if_interrupted(unraisable):
    if not isinstance(unraisable.exc_value, Interrupted):
      default_hook(unraisable)
      return
    say_stopped(unraisable.exc_value)
    _exit_now(128 + unraisable.exc_value.signum)
  sys.unraisablehook = exit_if_interrupted


def _exit_now(status: int) -> None:
  """Exits at once with ``status``, stdout flushed, skipping the interpreter's exit."""
  try:
    sys.stdout.flush()
  except (OSError, RuntimeError):  # a closed pipe; a flush the signal cut into
    pass
  os._exit(status)  # pylint: disable=protected-access


# JAX compiles the main thread is waiting for (one inside another's callback
# counts twice), and the signals :func:`interrupt_on_signals` held meanwhile.
_compiles_in_progress: List[bool] = []
_held_signals: List[int] = []


def finish_compiles_first() -> None:
  """Makes a SIGTERM or SIGINT that arrives while the main thread waits for a
  JAX compile raise :class:`Interrupted` only when the compile returns; call
  once JAX is imported, before the first compile (idempotent).

  jaxlib compiles on XLA's threads and lets signal handlers run while the
  main thread waits: an exception raised there abandoned the compile, which
  then ran on while the interpreter exited and destroyed the JAX client it
  was compiling for (a segmentation fault after the script's line). The
  compile's persistent-cache write is inside the same call, so it is never
  cut by a signal either. Only the signals of :func:`interrupt_on_signals`
  are held; :class:`StopSignals` records without raising anyway. Compiles on
  other threads are left alone: Python waits for those threads at exit.

  It wraps ``jax._src.compiler.compile_or_get_cached``, through which every
  compile goes (``pxla`` calls it by the module's attribute); a JAX without
  it is left as it is (tests/faults/test_jax_faults.py tests the pinned one).
  """
  try:
    # Deferred: JAX is kept out of the TensorFlow process, whose start it would slow.
    from jax._src import compiler  # pylint: disable=g-import-not-at-top
  except ImportError:
    return
  compile_or_get_cached = getattr(compiler, "compile_or_get_cached", None)
  if compile_or_get_cached is None or getattr(compile_or_get_cached, "finishes_before_signals",
                                              False):
    return

  @functools.wraps(compile_or_get_cached)
  def compile_then_interrupt(*args, **kwargs):
    if threading.current_thread() is not threading.main_thread():
      return compile_or_get_cached(*args, **kwargs)
    _compiles_in_progress.append(True)
    try:
      return compile_or_get_cached(*args, **kwargs)
    finally:
      _compiles_in_progress.pop()
      if not _compiles_in_progress and _held_signals:
        signum = _held_signals[0]
        _held_signals.clear()
        raise Interrupted(signum)  # pylint: disable=lost-exception
  compile_then_interrupt.finishes_before_signals = True
  compiler.compile_or_get_cached = compile_then_interrupt


class StopSignals:
  """A context manager that records the first SIGTERM/SIGINT received inside it.

  ``received``: that signal's number (an ``int``), or None. ``finishing`` says in
  the warning what is finished before stopping. Entering installs the
  handlers (on the main thread only); leaving puts the previous ones back. One
  instance serves one ``with`` block.
  """

  def __init__(self, finishing: str = "the current step and saving a checkpoint"):
    self.received: Optional[int] = None
    self._finishing = finishing  # what is done before stopping, for the warning
    self._previous = {}

  def __enter__(self) -> "StopSignals":
    if threading.current_thread() is threading.main_thread():
      for signum in SIGNALS:
        self._previous[signum] = signal.getsignal(signum)
        signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc_info) -> None:
    for signum in self._previous:
      self._put_back(signum)

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    if self.received is None:
      logging.warning("received %s: stopping after %s (send it again to abort at once)",
                      signal.Signals(signum).name, self._finishing)
      self.received = signum
      self._put_back(signum)

  def _put_back(self, signum):
    # getsignal gives None for a handler not installed from Python; the
    # default is the closest Python can put back.
    previous = self._previous[signum]
    signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
