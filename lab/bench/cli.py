"""The command line of the bench scripts that read run folders: one line, as
``train.py``, ``evaluate.py`` and ``translate.py`` give it.

:func:`run` is ``app.run`` with an expected failure (a missing or unreadable
file, a damaged JSON, a bad argument) reported as one ``<script>: error: ...``
line and exit status 1, and SIGINT/SIGTERM as one ``<script>: stopped by ...``
line and 128 + the signal's number (:mod:`transformer.run.stop_signals`).
"""

import json
from pathlib import Path
import sys

from absl import app

from transformer.run import stop_signals
from transformer.run.errors import describe_error


class BenchError(Exception):
  """A bench script cannot go on; the message names the file."""


def read_json(path: Path):
  """The JSON in ``path``; a damaged file is a :class:`BenchError` naming it
  (``json``'s own error names no file)."""
  try:
    return json.loads(Path(path).read_text(encoding="utf-8"))
  except json.JSONDecodeError as e:
    raise BenchError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None


def run(main) -> None:
  """``app.run(main)``, with failures and signals each one line on stderr."""
  script = Path(sys.argv[0]).name

  def say_stopped(interrupted: stop_signals.Interrupted) -> None:
    print(f"{script}: stopped by {interrupted.name}", file=sys.stderr, flush=True)

  def main_in_one_line(argv):
    stop_signals.interrupt_on_signals(say_stopped)
    try:
      main(argv)
    except stop_signals.Interrupted as e:
      say_stopped(e)
      sys.exit(128 + e.signum)
    except BenchError as e:
      sys.exit(f"{script}: error: {e}")
    except (OSError, ValueError, KeyError) as e:  # OSError names the file; KeyError: a lost field
      sys.exit(f"{script}: error: {describe_error(e)}")

  app.run(main_in_one_line)
