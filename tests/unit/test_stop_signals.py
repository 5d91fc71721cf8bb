"""StopSignals: the first SIGTERM/SIGINT is recorded, a second acts at once, and the
handlers are put back on exit; nothing is installed off the main thread."""

import signal
import threading

import pytest

from transformer.training import stop_signals


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
