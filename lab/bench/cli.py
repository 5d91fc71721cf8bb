"""The command line of the bench scripts that read run folders: one line, as
``train.py``, ``evaluate.py`` and ``translate.py`` give it.

:func:`run` is ``app.run`` with an expected failure (a missing or unreadable
file, a damaged JSON, a bad argument) reported as one ``<script>: error: ...``
line and exit status 1, and SIGINT/SIGTERM as one ``<script>: stopped by ...``
line and 128 + the signal's number (:func:`transformer.run.script.run_main`).
"""

import json
from pathlib import Path
import sys

from absl import app

from transformer.run import script as script_lib


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
  # OSError names the file; KeyError: a lost field.
  app.run(lambda argv: script_lib.run_main(main, argv, script, errors=lambda: (BenchError,),
                                           described=(OSError, ValueError, KeyError)))
