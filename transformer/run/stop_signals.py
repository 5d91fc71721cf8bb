"""Stopping a training run cleanly on SIGTERM or SIGINT (Ctrl-C).

Inside ``with StopSignals() as stop:`` the first SIGTERM/SIGINT is only
recorded in ``stop.received``; the loop in :mod:`transformer.training.tf_trainer` checks it
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
"""

import os
import signal
import sys
import threading
from typing import Callable, Optional

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
  """
  def interrupt(signum, frame):  # pylint: disable=unused-argument
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
    try:
      sys.stdout.flush()
    except (OSError, RuntimeError):  # a closed pipe; a flush the signal cut into
      pass
    os._exit(128 + unraisable.exc_value.signum)  # pylint: disable=protected-access
  sys.unraisablehook = exit_if_interrupted


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
