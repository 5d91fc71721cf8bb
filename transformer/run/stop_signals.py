"""Stopping on SIGTERM or SIGINT (Ctrl-C).

Training (:class:`StopSignals`) records the first signal; the loop saves a
checkpoint after the step and returns, and ``train.py`` exits 128 + the
signal number (143, 130) like a shell, so that a scheduler reruns it. The
first signal puts the previous handler back: a second one acts at once.
``evaluate.py`` and ``translate.py``, with nothing to save, stop at once
(:func:`interrupt_on_signals`). Under JAX a signal is held until a compile in
progress returns (:func:`finish_compiles_first`).
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
  """SIGTERM or SIGINT arrived (:func:`interrupt_on_signals`): ``signum``, ``name``."""

  def __init__(self, signum: int):
    self.signum = signum
    self.name = signal.Signals(signum).name
    super().__init__(self.name)


def interrupt_on_signals(say_stopped: Callable[[Interrupted], None]) -> None:
  """From now on SIGTERM and SIGINT raise :class:`Interrupted` in the main
  thread (one ignored at start, as SIGINT under ``nohup ... &``, stays
  ignored), for the script to report with ``say_stopped`` and exit 128 + its
  number. Where Python would swallow it (in a ``__del__``), and at a second
  signal during a JAX compile, ``say_stopped`` is called and the process exits
  at once, stdout flushed.
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


# JAX compiles the main thread waits for (nested ones count twice), and the signals held meanwhile.
_compiles_in_progress: List[bool] = []
_held_signals: List[int] = []


def finish_compiles_first() -> None:
  """Makes :func:`interrupt_on_signals`' SIGTERM or SIGINT raise only when the
  JAX compile the main thread waits for returns; call before the first compile
  (idempotent).

  jaxlib lets handlers run during the wait, and an abandoned compile ran on
  into the interpreter's exit: a segmentation fault. It wraps
  ``jax._src.compiler.compile_or_get_cached``, every compile's way (a JAX
  without it is left alone; tests/faults/test_jax_faults.py).
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
  """Records in ``received`` the first SIGTERM/SIGINT inside its ``with`` block
  (handlers only on the main thread, the previous ones put back on leaving);
  the warning names what is ``finishing`` before stopping. One block each."""

  def __init__(self, finishing: str = "the current step and saving a checkpoint"):
    self.received: Optional[int] = None
    self._finishing = finishing
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
    # getsignal gives None for a handler not installed from Python: SIG_DFL is closest.
    previous = self._previous[signum]
    signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
