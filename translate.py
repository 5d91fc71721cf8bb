"""Translates Portuguese to English with a trained model (tutorial: "Run
inference" with the exported ``translator``).

  python translate.py --model_dir runs/cpu_2h "este é um problema ." "olá ."
  python translate.py --export_dir DIR --input_file sentences.pt
  python translate.py --export_dir DIR < sentences.pt     (or: ... - < sentences.pt)

``--model_dir`` takes a ``train.py`` output folder: its exported translator
(``export/translator``) once the run has finished, else (a run stopped with
Ctrl-C, or still training) its latest intact checkpoint, saying so in one line
on stderr; ``--average_last=N`` averages its last N checkpoints instead.
``--export_dir`` takes a translator SavedModel itself.

Prints one translation per input sentence on stdout, in order, and nothing
else. Without sentences it reads stdin, one sentence per line, unless stdin is
a terminal. Input must be UTF-8: a line that is not stops the run after the
lines before it are translated (--invalid_utf8=replace puts U+FFFD in place of
the bad bytes instead). Errors are one line on stderr; exit status 2 for a bad
command line, 1 for a bad --export_dir, --model_dir or input (also an export
whose vocabulary files were changed since it was saved), 130 or 143 when
stopped by Ctrl-C or SIGTERM. TensorFlow's own log lines are hidden unless
--verbose (or TF_CPP_MIN_LOG_LEVEL is set).

With --export_dir it needs only TensorFlow and tensorflow_text: the SavedModel
from ``transformer.inference.export.export_translator`` holds the tokenizers and the model.
It translates on TensorFlow under any ``KERAS_BACKEND`` (a run trained under
JAX too); one line on stderr says so when that names another backend.
"""

import os
from pathlib import Path
import signal
import sys
from typing import List, Optional, Tuple

from absl import app
from absl import flags
from absl import logging

from transformer.run import keras_checkpoints
from transformer.run import run_folder
from transformer.run import runtime
from transformer.run import script as script_lib
from transformer.run.errors import describe_error

_EXPORT_DIR = flags.DEFINE_string(
    "export_dir", None,
    "Translator SavedModel folder (train.py writes <model_dir>/export/translator).")
_MODEL_DIR = flags.DEFINE_string(
    "model_dir", None,
    "train.py output folder: its export when the run has finished, else its latest "
    "intact checkpoint (a stopped or running run).")
_AVERAGE_LAST = flags.DEFINE_integer(
    "average_last", 0, "With --model_dir: average its last N checkpoints (§6.1 uses 5); "
    "0: its export, else its latest checkpoint.", lower_bound=0)
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

_EXPORT_HINT = ("pass the folder train.py writes at <model_dir>/export/translator, or "
                "--model_dir=<model_dir>")
EXPORT_SUBDIR = Path(run_folder.EXPORT_SUBDIR) / run_folder.EXPORT_TRANSLATOR


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


def run_folder_hint(export_dir: Path) -> str:
  """What to pass instead of an ``export_dir`` that is missing: the run folder
  it would be in, when that holds checkpoints (the run was stopped before it
  exported), else the usual hint."""
  if export_dir.parts[-2:] == EXPORT_SUBDIR.parts:
    model_dir = export_dir.parent.parent
    if checkpoint_steps(model_dir):
      return (f"{model_dir} has checkpoints but no export yet (the run did not finish): "
              f"--model_dir={model_dir} translates with its latest checkpoint")
  return _EXPORT_HINT


def checkpoint_steps(model_dir: Path) -> List[int]:
  """The steps of ``model_dir``'s checkpoints, either trainer's (``ckpt-N.index``
  files, ``step-N`` folders), in order."""
  names = [*(index.name[:-len(".index")] for index in
             run_folder.checkpoint_dir(model_dir).glob("ckpt-*.index")),
           *(path.name for path in keras_checkpoints.checkpoint_dirs(
               run_folder.checkpoint_dir(model_dir)))]
  return sorted(int(name.split("-", 1)[1]) for name in names if name.split("-", 1)[1].isdigit())


def check_export_dir(export_dir: str) -> None:
  """The checks that need no TensorFlow; InputError unless a SavedModel folder."""
  path = Path(export_dir)
  if not path.is_dir():
    raise InputError(f"--export_dir={export_dir}: "
                     f"{'not a folder' if path.exists() else 'no such folder'}; "
                     f"{run_folder_hint(path)}")
  if not (path / "saved_model.pb").is_file():
    raise InputError(f"--export_dir={export_dir}: not a SavedModel (no saved_model.pb); "
                     f"{_EXPORT_HINT}")


def check_model_dir(model_dir: str, average_last: int) -> Tuple[Optional[str], str]:
  """The checks of --model_dir that need no TensorFlow. Returns ``(export,
  why)``: the path of its export to translate with, or None for its
  checkpoints and why (no export yet, or one older than the checkpoints: a
  finished run trained further). InputError naming what the folder holds when
  it has neither."""
  path = Path(model_dir)
  if problem := run_folder.not_a_folder(model_dir):
    raise InputError(problem)
  steps = checkpoint_steps(path)
  export = path / EXPORT_SUBDIR
  why = f"no export in {model_dir} yet"
  if (export / "saved_model.pb").is_file():
    step = run_folder.exported_step(export.parent)
    if not average_last and (step is None or not steps or steps[-1] <= step):
      return str(export), ""
    why = f"the export of {model_dir} (step {step}) is older than its checkpoints"
  if not steps:
    holds = sorted(child.name for child in path.iterdir())
    raise InputError(f"--model_dir={model_dir}: no export and no checkpoint yet (it holds "
                     f"{', '.join(holds) or 'nothing'}); train.py writes its first "
                     "checkpoint after config.training.checkpoint_every_steps steps")
  return None, why


def restore_translator(model_dir: str, average_last: int, why: str):
  """An in-memory translator over the run's latest (or ``average_last``
  averaged) checkpoints, with the run's tokenizer and decoding settings;
  says which on stderr, after ``why`` when there is no --average_last."""
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  from transformer.inference.export import Translator  # pylint: disable=g-import-not-at-top
  from transformer.run.checkpoint_files import checkpoint_name  # pylint: disable=g-import-not-at-top
  from transformer.run.errors import TrainingError  # pylint: disable=g-import-not-at-top
  try:
    config, run_tokenizers, model, paths = evaluation.restore_model_dir(model_dir, average_last)
  except (TrainingError, evaluation.EvaluationError, tokenizers.TokenizerError, ted.DataError,
          OSError) as e:
    raise InputError(f"--model_dir={model_dir}: {describe_error(e)}") from e
  names = ", ".join(map(checkpoint_name, paths))
  said = (f"translating with the average of {names}" if average_last
          else f"{why}: translating with its checkpoint {names}")
  print(f"translate.py: {said}", file=sys.stderr, flush=True)
  return Translator(run_tokenizers, model, config.decoding)


def load_translator(export_dir: str):
  """The translator SavedModel at ``export_dir``; InputError if it is not one."""
  from transformer.data import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top
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
  if bool(_EXPORT_DIR.value) == bool(_MODEL_DIR.value):
    raise UsageError("give one of --model_dir (a train.py output folder) and --export_dir "
                     "(a translator SavedModel)")
  if _AVERAGE_LAST.value and not _MODEL_DIR.value:
    raise UsageError("--average_last needs --model_dir")
  sentences = open_sentences(argv[1:], _INPUT_FILE.value, _INVALID_UTF8.value)
  why = ""
  if _MODEL_DIR.value:
    export_dir, why = check_model_dir(_MODEL_DIR.value, _AVERAGE_LAST.value)
  else:
    export_dir = _EXPORT_DIR.value
    check_export_dir(export_dir)
  if not _VERBOSE.value:
    logging.set_verbosity(logging.ERROR)
  runtime.keras_on_tensorflow(
      "translate.py", "it translates on TensorFlow (runs trained under JAX too)",
      lambda line: print(line, file=sys.stderr, flush=True))
  tf = runtime.import_tensorflow(_VERBOSE.value)
  translator = (load_translator(export_dir) if export_dir
                else restore_translator(_MODEL_DIR.value, _AVERAGE_LAST.value, why))
  translate = (translator.translate if _METHOD.value == "beam"
               else translator.translate_greedy)
  translate_and_print(tf, translate, sentences, _BATCH_SIZE.value)


def main_with_exits(argv):
  """main, ending quietly when the reader leaves, and with exit status 2 and
  the usage after a bad command line."""
  try:
    main(argv)
  except BrokenPipeError:
    # The reader left (``| head -1``): end quietly, as Unix filters do. stdout
    # points at the null device so that Python's flush at exit fails no more.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(128 + signal.SIGPIPE)
  except UsageError as e:
    app.usage(shorthelp=True, detailed_error=f"translate.py: error: {e}", exitcode=2)


def run(argv):
  # After a signal, the translations printed so far are whole lines, in input order.
  script_lib.run_main(main_with_exits, argv, "translate.py", errors=lambda: (InputError,))


if __name__ == "__main__":
  app.run(run, flags_parser=runtime.flags_parser("translate.py", exit_code=2))
