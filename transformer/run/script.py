"""How every script ends: an expected failure as one line, a signal as one line.

:func:`run_main` runs a script's ``main`` with SIGTERM and SIGINT raising
:class:`~transformer.run.stop_signals.Interrupted` (one line, exit 128 + the
signal's number, as a shell), and the errors the script expects (bad input, a
full disk, a corrupt file) as one ``<script>: error: ...`` line, exit 1.
Anything else is a bug and keeps its traceback.
"""

import signal
import sys
from typing import Callable, Tuple, Type

from transformer.run import stop_signals
from transformer.run.errors import describe_error

ErrorTypes = Tuple[Type[BaseException], ...]


def stopped_by(interrupted: KeyboardInterrupt) -> str:
  """``stopped by SIGTERM`` (a plain KeyboardInterrupt: SIGINT)."""
  return f"stopped by {signal.Signals(signal_number(interrupted)).name}"


def signal_number(interrupted: KeyboardInterrupt) -> int:
  """The signal behind ``interrupted``: its own, or SIGINT for Python's Ctrl-C."""
  return getattr(interrupted, "signum", signal.SIGINT)


def wrapped_interruption(error: BaseException):
  """The KeyboardInterrupt behind ``error``, or None: a signal that lands in C
  code calling back into Python (TensorFlow binding a NumPy batch to a
  ``tf.function``) comes back wrapped, as a TypeError from a SystemError."""
  seen = set()
  while error is not None and id(error) not in seen:
    if isinstance(error, KeyboardInterrupt):
      return error
    seen.add(id(error))
    error = error.__cause__ or error.__context__
  return None


def run_main(main: Callable[[list], None], argv: list, script: str,
             errors: Callable[[], ErrorTypes] = tuple,
             described: ErrorTypes = (),
             stopped_line: Callable[[KeyboardInterrupt], str] = stopped_by) -> None:
  """Runs ``main(argv)``; exits as the module docstring says, each line starting
  with ``script`` (``evaluate.py``). ``errors()`` gives the error types whose
  message is the line (called only when an error arrives, so that it may import
  TensorFlow's modules then), ``described`` those shown by
  :func:`~transformer.run.errors.describe_error`; ``stopped_line`` gives the
  line after a signal, after ``<script>: ``."""
  def say_stopped(interrupted: KeyboardInterrupt) -> None:
    said = getattr(interrupted, "said", "") or stopped_line(interrupted)
    print(f"{script}: {said}", file=sys.stderr, flush=True)

  stop_signals.interrupt_on_signals(say_stopped)
  try:
    main(argv)
  except KeyboardInterrupt as e:  # Interrupted, or Ctrl-C where SIGINT kept Python's handler
    say_stopped(e)
    sys.exit(128 + signal_number(e))
  except Exception as e:  # pylint: disable=broad-except
    interrupted = wrapped_interruption(e)
    if interrupted is not None:
      say_stopped(interrupted)
      sys.exit(128 + signal_number(interrupted))
    if isinstance(e, errors()):
      sys.exit(f"{script}: error: {e}")
    if isinstance(e, described):
      sys.exit(f"{script}: error: {describe_error(e)}")
    raise
