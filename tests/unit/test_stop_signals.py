"""StopSignals: the first SIGTERM/SIGINT is recorded, a second acts at once, and the
handlers are put back on exit; nothing is installed off the main thread."""

import os
from pathlib import Path
import signal
import subprocess
import sys
import threading

import pytest

from transformer.run import stop_signals


@pytest.fixture
def previous_handlers():
  """Python handlers for SIGTERM and SIGINT that record what they receive."""
  received = []
  handlers = {signum: lambda signum, frame: received.append(signum)
              for signum in stop_signals.SIGNALS}
  old = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
  yield handlers, received
  for signum, handler in old.items():
    signal.signal(signum, handler)


@pytest.mark.parametrize("signum", stop_signals.SIGNALS)
def test_first_signal_is_recorded_and_a_second_reaches_the_previous_handler(
    previous_handlers, signum):
  handlers, received = previous_handlers
  other = next(s for s in stop_signals.SIGNALS if s != signum)
  with stop_signals.StopSignals() as stop:
    assert stop.received is None
    signal.raise_signal(signum)
    assert stop.received == signum and received == []
    # The previous handler is back for this signal only.
    assert signal.getsignal(signum) is handlers[signum]
    assert signal.getsignal(other) is not handlers[other]
    signal.raise_signal(signum)
    assert received == [signum]
    signal.raise_signal(other)  # a different signal after the first is not recorded
    assert stop.received == signum and received == [signum]
  assert all(signal.getsignal(s) is handlers[s] for s in stop_signals.SIGNALS)


def test_handlers_are_put_back_without_a_signal(previous_handlers):
  handlers, received = previous_handlers
  with stop_signals.StopSignals() as stop:
    assert all(signal.getsignal(s) is not handlers[s] for s in stop_signals.SIGNALS)
  assert all(signal.getsignal(s) is handlers[s] for s in stop_signals.SIGNALS)
  assert stop.received is None and received == []


def test_nothing_is_installed_off_the_main_thread(previous_handlers):
  handlers, _ = previous_handlers
  seen = {}

  def run():
    with stop_signals.StopSignals() as stop:
      seen.update({s: signal.getsignal(s) for s in stop_signals.SIGNALS})
    seen["received"] = stop.received
  thread = threading.Thread(target=run)
  thread.start()
  thread.join()
  assert seen == {**handlers, "received": None}


def _run_child(code: str):
  """``(exit status, stdout, stderr)`` of ``code`` in a child Python at the repository."""
  repo = Path(__file__).resolve().parents[2]
  result = subprocess.run([sys.executable, "-c", code], cwd=repo,
                          env={**os.environ, "PYTHONPATH": str(repo)}, capture_output=True,
                          text=True, timeout=60, check=False)
  return result.returncode, result.stdout, result.stderr


_SIGNAL_IN_A_DESTRUCTOR = """
import os, signal, sys, time
from transformer.run import stop_signals
stop_signals.interrupt_on_signals(lambda e: print(f"stopped by {e.name}", file=sys.stderr))
class Dying:
  def __del__(self):
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):  # the handler runs here, inside __del__, whose exceptions Python ignores
      pass
Dying()
time.sleep(10)
print("went on")
"""


def test_a_signal_that_lands_in_a_destructor_still_stops_the_script():
  """interrupt_on_signals: the Interrupted that a destructor swallows (TensorFlow's
  resources have __del__) still ends the script, in one line, with 143."""
  assert _run_child(_SIGNAL_IN_A_DESTRUCTOR) == (128 + signal.SIGTERM, "", "stopped by SIGTERM\n")


_SIGNAL_WRAPPED_BY_C_CODE = """
import signal, sys
from transformer.run import script, stop_signals
def main(argv):
  try:  # as CPython and tf.function's input binding wrap a signal that lands in __array__
    try:
      raise stop_signals.Interrupted(signal.SIGTERM)
    except KeyboardInterrupt as interrupted:
      raise SystemError("__array__ returned a result with an exception set") from interrupted
  except SystemError as error:
    raise TypeError(f"Binding inputs to tf.function failed due to `{error}`") from error
script.run_main(main, [], "evaluate.py")
"""


def test_a_signal_that_c_code_wrapped_in_another_error_still_stops_in_one_line():
  """run_main: a SIGTERM that TensorFlow hands back as a TypeError (evaluate.py,
  tests/faults/test_faults.py::test_sigterm_during_evaluate_is_one_line) is the signal."""
  assert _run_child(_SIGNAL_WRAPPED_BY_C_CODE) == (
      128 + signal.SIGTERM, "", "evaluate.py: stopped by SIGTERM\n")
