"""Translates Portuguese to English with an exported model (tutorial: "Run
inference" with the exported ``translator``).

  python translate.py --export_dir DIR "este é um problema ." "olá ."
  python translate.py --export_dir DIR --input_file sentences.pt
  python translate.py --export_dir DIR < sentences.pt     (or: ... - < sentences.pt)

Prints one translation per input sentence on stdout, in order, and nothing
else. Without sentences it reads stdin, one sentence per line, unless stdin is
a terminal. Input must be UTF-8: a line that is not stops the run after the
lines before it are translated (--invalid_utf8=replace puts U+FFFD in place of
the bad bytes instead). Errors are one line on stderr; exit status 2 for a bad
command line, 1 for a bad --export_dir or input (also an export whose vocabulary
files were changed since it was saved), 130 or 143 when stopped by Ctrl-C or
SIGTERM. TensorFlow's own log lines are
hidden unless --verbose (or TF_CPP_MIN_LOG_LEVEL is set).

Needs only TensorFlow and tensorflow_text: the SavedModel from
``transformer.export.export_translator`` holds the tokenizers and the model.
"""

import os
from pathlib import Path
import signal
import sys

from absl import app
from absl import flags
from absl import logging

from transformer.training import runtime
from transformer.training import stop_signals

_EXPORT_DIR = flags.DEFINE_string(
    "export_dir", None,
    "Translator SavedModel folder (train.py writes <model_dir>/export/translator).",
    required=True)
_INPUT_FILE = flags.DEFINE_string("input_file", None,
                                  "UTF-8 file, one sentence per line ('-' for stdin).")
_INVALID_UTF8 = flags.DEFINE_enum(
    "invalid_utf8", "error", ["error", "replace"],
    "A line that is not UTF-8: error (stop, naming the line) or replace (bad bytes "
    "become U+FFFD).")
_METHOD = flags.DEFINE_enum("method", "beam", ["beam", "greedy"],
                            "beam: the paper's beam search; greedy: faster.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sentences translated together.",
                                   lower_bound=1)
_VERBOSE = flags.DEFINE_bool("verbose", False, "Show TensorFlow's own log lines on stderr.")

_EXPORT_HINT = "pass the folder train.py writes at <model_dir>/export/translator"


class UsageError(ValueError):
  """A bad command line (exit status 2)."""


class InputError(ValueError):
  """A bad --export_dir or input (exit status 1)."""


def decode_utf8(raw: bytes, where: str, invalid_utf8: str) -> str:
  """One sentence from the bytes of one input line; ``where`` names the line."""
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError as e:
    if invalid_utf8 == "replace":
      return raw.decode("utf-8", errors="replace")
    raise InputError(f"{where} is not valid UTF-8 ({e.reason} at byte {e.start}); "
                     "--invalid_utf8=replace replaces the bad bytes") from e


def read_sentences(lines, name: str, invalid_utf8: str):
  """Yields the sentences of a binary line stream (a file or stdin) lazily, so
  that a bad line is found only after the lines before it were translated."""
  for number, raw in enumerate(lines, start=1):
    yield decode_utf8(raw.rstrip(b"\n").rstrip(b"\r"), f"{name}: line {number}", invalid_utf8)


def open_sentences(args, input_file, invalid_utf8):
  """The sentences to translate, from the arguments, ``input_file`` or stdin."""
  if args and input_file:
    raise UsageError("give sentences or --input_file, not both")
  if input_file == "-" or args == ["-"] or (not args and not input_file):
    if not args and not input_file and sys.stdin.isatty():
      raise UsageError("no sentences: give them as arguments, with --input_file, or on "
                       "stdin")
    return read_sentences(sys.stdin.buffer, "stdin", invalid_utf8)
  if input_file:
    try:
      f = open(input_file, "rb")  # pylint: disable=consider-using-with  # Read lazily.
    except OSError as e:
      raise InputError(f"--input_file={input_file}: {e.strerror}") from e
    return read_sentences(f, input_file, invalid_utf8)
  # The shell's bytes, which Python decoded with surrogateescape.
  return (decode_utf8(arg.encode("utf-8", "surrogateescape"), f"argument {number}", invalid_utf8)
          for number, arg in enumerate(args, start=1))


def check_export_dir(export_dir: str) -> None:
  """The checks that need no TensorFlow; InputError unless a SavedModel folder."""
  path = Path(export_dir)
  if not path.is_dir():
    raise InputError(f"--export_dir={export_dir}: "
                     f"{'not a folder' if path.exists() else 'no such folder'}; {_EXPORT_HINT}")
  if not (path / "saved_model.pb").is_file():
    raise InputError(f"--export_dir={export_dir}: not a SavedModel (no saved_model.pb); "
                     f"{_EXPORT_HINT}")


def load_translator(export_dir: str):
  """The translator SavedModel at ``export_dir``; InputError if it is not one."""
  from transformer import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top
  try:
    translator = tokenizers_lib.load_saved_model(export_dir, "translator")
    missing = [name for name in ("translate", "translate_greedy", "tokenizers")
               if not hasattr(translator, name)]
    if missing:
      raise InputError(f"--export_dir={export_dir}: a SavedModel but not a translator (no "
                       f"{', '.join(missing)}); {_EXPORT_HINT}")
    # The tokenizers' token tables come from assets/*.txt: the files saved?
    tokenizers_lib.check_vocabulary_files(translator.tokenizers)
  except tokenizers_lib.TokenizerError as e:
    raise InputError(f"--export_dir={export_dir}: {e}") from e
  return translator


def translate_and_print(tf, translate, sentences, batch_size: int):
  """Translates and prints ``sentences`` batch by batch. When the input turns
  out bad, the sentences read before it are still translated and printed."""
  def emit(batch):
    for translation in translate(tf.constant(batch, dtype=tf.string)).numpy():
      sys.stdout.buffer.write(translation + b"\n")
    sys.stdout.buffer.flush()

  batch = []
  try:
    for sentence in sentences:
      batch.append(sentence)
      if len(batch) == batch_size:
        emit(batch)
        batch = []
  except InputError:
    if batch:
      emit(batch)
    raise
  if batch:
    emit(batch)


def main(argv):
  sentences = open_sentences(argv[1:], _INPUT_FILE.value, _INVALID_UTF8.value)
  check_export_dir(_EXPORT_DIR.value)
  if not _VERBOSE.value:
    logging.set_verbosity(logging.ERROR)
  tf = runtime.import_tensorflow(_VERBOSE.value)
  translator = load_translator(_EXPORT_DIR.value)
  translate = (translator.translate if _METHOD.value == "beam"
               else translator.translate_greedy)
  translate_and_print(tf, translate, sentences, _BATCH_SIZE.value)


def say_stopped(interrupted) -> None:
  # The translations printed so far are whole lines, in input order.
  print(f"translate.py: stopped by {interrupted.name}", file=sys.stderr, flush=True)


def run(argv):
  stop_signals.interrupt_on_signals(say_stopped)
  try:
    main(argv)
  except stop_signals.Interrupted as e:
    say_stopped(e)
    sys.exit(128 + e.signum)
  except BrokenPipeError:
    # The reader left (``| head -1``): end quietly, as Unix filters do. stdout
    # points at the null device so that Python's flush at exit fails no more.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(128 + signal.SIGPIPE)
  except UsageError as e:
    app.usage(shorthelp=True, detailed_error=f"translate.py: error: {e}", exitcode=2)
  except InputError as e:
    sys.exit(f"translate.py: error: {e}")


if __name__ == "__main__":
  app.run(run, flags_parser=runtime.flags_parser("translate.py", exit_code=2))
