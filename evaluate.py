"""BLEU of a trained model on the validation or test split (paper §6.1).

  python evaluate.py --model_dir runs/cpu_2h --split test --method beam --average_last 5
  python evaluate.py --translator runs/cpu_2h/export/translator --method greedy

Restores the ``train.py`` folder's latest checkpoint, or the mean of its last N
(the paper's base model averages 5), or takes an exported translator
SavedModel (``--translator``), translates the split and writes the hypotheses
and a JSON record to ``--output_dir`` (default ``<model_dir>/bleu``), once,
whole, after the scoring: a stop keeps the previous ones. ``--export_dir`` also
exports the evaluated model there, swapped in whole, into a folder that is new,
empty or an earlier export. ``--max_sentences=N`` scores the split's first N
sentences: a partial score, ``<split>.<method>.partial<N>.json`` with
``"partial": true``. ``--data`` is the TED files, ``tfds`` or ``auto``
(:mod:`transformer.data.sources`), scored on TensorFlow whatever
``KERAS_BACKEND`` says (one line says so), or under ``KERAS_BACKEND=jax`` a
``prepare.py`` folder, scored without TensorFlow, its compiled decoding steps
kept in train.py's cache (``--compilation_cache``). Both are
:func:`transformer.inference.evaluation.evaluate`; ``bleu`` is this project's
score, ``whole_word.bleu`` the published results' (:mod:`transformer.inference.bleu`).

stdout holds only the JSON record; stderr what it does and how long it took (a
live count on a terminal); TensorFlow's logs only with ``--verbose``. Exit
status: 0, 1 with one ``evaluate.py: error: ...`` line on bad input (flags,
data, a folder that is not a run or translator, a missing or corrupt
checkpoint), 130 or 143 with one line on Ctrl-C or SIGTERM.
"""

import json
from pathlib import Path
import sys
import time

from absl import app
from absl import flags
from absl import logging

from transformer import config as config_lib
from transformer.run import progress
from transformer.run import run_folder
from transformer.run import runtime
from transformer.data import shards
from transformer.data import sources
from transformer.run import script as script_lib
from transformer.run.errors import TrainingError


_MODEL_DIR = flags.DEFINE_string("model_dir", None,
                                 "train.py output folder (or give --translator).")
_TRANSLATOR = flags.DEFINE_string(
    "translator", None, "An exported translator SavedModel to score instead of --model_dir.")
_SPLIT = flags.DEFINE_enum("split", "validation", ["validation", "test"], "Split to score.")
_METHOD = flags.DEFINE_enum("method", "beam", ["beam", "greedy"],
                            "beam: config.decoding's beam search (§6.1); greedy: faster.")
_AVERAGE_LAST = flags.DEFINE_integer(
    "average_last", 0, "Average the last N checkpoints (§6.1 uses 5); 0 uses the latest.")
_DATA = flags.DEFINE_string(
    "data", sources.AUTO,
    sources.DATA_HELP + " Default: the --data the run of --model_dir trained on, where its "
    "trained_with.json records it and it is still there; else auto.")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "Deprecated: the old name of --data.")
_MAX_SENTENCES = flags.DEFINE_integer(
    "max_sentences", 0, "Score only the split's first N sentences (a quick look); 0: all.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Default: <model_dir>/bleu.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Sentences translated together.")
_EXPORT_DIR = flags.DEFINE_string(
    "export_dir", None, "If set, also export the evaluated model as a translator SavedModel.")
_COMPILATION_CACHE = flags.DEFINE_string(
    "compilation_cache", runtime.COMPILATION_CACHE_AUTO,
    "Under KERAS_BACKEND=jax with a prepare.py folder: where compiled decoding steps are kept "
    "for the next run, as train.py's flag of this name: 'auto' ($JAX_COMPILATION_CACHE_DIR "
    "if set, else ~/.cache/transformer-pt-en/jax), 'off', or a folder.")
_VERBOSE = flags.DEFINE_bool("verbose", False, "Show TensorFlow's and absl's logs.")


class UsageError(ValueError):
  """Bad input found by evaluate.py itself, most of it before TensorFlow loads."""


def check_flags(data_dir: str) -> None:
  """Every check that needs neither TensorFlow nor JAX; raises UsageError."""
  prepared = shards.is_prepared(data_dir)
  if prepared:
    if runtime.keras_backend() != "jax":
      raise UsageError(f"--data={data_dir} is a prepare.py folder, scored under "
                       f"KERAS_BACKEND=jax (now {runtime.keras_backend()}); set it, or pass "
                       "the folder of the TED HRLR files")
    if not _MODEL_DIR.value or _TRANSLATOR.value or _EXPORT_DIR.value:
      raise UsageError("a prepare.py folder is scored with --model_dir (a run trained under "
                       "JAX), without --translator or --export_dir")
    if problem := run_folder.not_a_folder(_MODEL_DIR.value):
      raise UsageError(problem)
  elif _COMPILATION_CACHE.value != runtime.COMPILATION_CACHE_AUTO:
    raise UsageError("--compilation_cache is JAX's: it applies under KERAS_BACKEND=jax with a "
                     "prepare.py folder as --data")
  elif bool(_MODEL_DIR.value) == bool(_TRANSLATOR.value):
    raise UsageError("give exactly one of --model_dir and --translator")
  if _AVERAGE_LAST.value < 0 or _BATCH_SIZE.value < 1 or _MAX_SENTENCES.value < 0:
    raise UsageError("--average_last and --max_sentences must be >= 0 and --batch_size >= 1")
  if prepared:
    return
  if data_dir == sources.TFDS:  # without tensorflow-datasets: data_flag() said so
    missing = []
  else:
    data_dir = Path(data_dir)
    suffix = config_lib.SPLIT_FILE_SUFFIX[_SPLIT.value]
    missing = [f"{language}.{suffix}" for language in ("pt", "en")
               if not (data_dir / f"{language}.{suffix}").is_file()]
  if missing:
    raise UsageError(f"--data={data_dir}: not a folder with the TED HRLR files of the "
                     f"{_SPLIT.value} split (missing {', '.join(missing)})")
  for flag in (_OUTPUT_DIR, _EXPORT_DIR):
    if flag.value and Path(flag.value).exists() and not Path(flag.value).is_dir():
      raise UsageError(f"--{flag.name}={flag.value} exists and is not a folder")
  if _TRANSLATOR.value:
    if _AVERAGE_LAST.value or _EXPORT_DIR.value:
      raise UsageError("--average_last and --export_dir need --model_dir")
    if not (Path(_TRANSLATOR.value) / "saved_model.pb").is_file():
      raise UsageError(f"--translator={_TRANSLATOR.value}: not a SavedModel folder (no "
                       "saved_model.pb); pass an exported translator, e.g. "
                       "<model_dir>/export/translator")
    return
  model_dir = Path(_MODEL_DIR.value)
  if problem := run_folder.not_a_folder(model_dir):
    raise UsageError(problem)
  checkpoint_index = f"{run_folder.CHECKPOINT_SUBDIR}/checkpoint"
  missing = [name for name in (run_folder.CONFIG_FILE, run_folder.TOKENIZER_PATH_FILE,
                               checkpoint_index)
             if not (model_dir / name).is_file()]
  if checkpoint_index in missing and any(
      run_folder.checkpoint_dir(model_dir).glob("step-*/")):  # trained under JAX
    missing.remove(checkpoint_index)
  if missing:
    raise UsageError(f"--model_dir={model_dir}: not a train.py output folder (missing "
                     f"{', '.join(missing)})")


def data_flag() -> tuple:
  """``(data, message)``: --data, or the deprecated --data_dir with a warning
  that says so, with 'auto' made the local copy or 'tfds', and the line that
  says which (said once the flags are known good: bad input is one line)."""
  if _DATA_DIR.value is None:
    data_dir = _DATA.value if _DATA.present else recorded_data() or _DATA.value
  elif _DATA.present:
    raise UsageError("--data_dir is the deprecated name of --data; give only --data")
  else:
    say("evaluate.py: warning: --data_dir is deprecated; use --data")
    data_dir = _DATA_DIR.value
  try:
    return sources.data_source(data_dir)
  except sources.SourceError as e:
    raise UsageError(str(e)) from e


def recorded_data():
  """The --data the run of --model_dir trained on (its trained_with.json), where it
  is still there, said in one line; else None."""
  if not _MODEL_DIR.value or _TRANSLATOR.value:
    return None
  try:
    data = run_folder.trained_with(_MODEL_DIR.value).get("data")
  except run_folder.RunFolderError as e:
    raise UsageError(str(e)) from e
  if data is None or (data != sources.TFDS and not Path(data).exists()):
    return None
  say(f"evaluate.py: the data {data} the run trained on ({run_folder.TRAINED_WITH_FILE})")
  return data


def say(line: str) -> None:
  """A progress line on stderr: stdout holds only the JSON record."""
  print(line, file=sys.stderr, flush=True)


def check_writable(output_dir: Path) -> None:
  """UsageError unless ``output_dir`` can be written: said before translating,
  not after."""
  from transformer.run import files  # pylint: disable=g-import-not-at-top
  from transformer.run.errors import describe_error  # pylint: disable=g-import-not-at-top
  try:
    files.check_writable(output_dir)
  except OSError as e:
    raise UsageError(f"cannot write the results to {output_dir} ({describe_error(e)}); "
                     "give a writable --output_dir") from e


def evaluate(model_dir, split: str, method: str, average_last: int, data_dir,
             output_dir=None, batch_size: int = 64, export_dir=None,
             max_sentences: int = 0) -> dict:
  """Restores the run of ``model_dir`` and scores it on ``split`` of ``data_dir``
  (:func:`transformer.inference.evaluation.evaluate`; a prepare.py folder under
  JAX); returns the record, written to ``output_dir`` once the scoring is complete."""
  # Deferred: Keras and its backend load once the flags are known good.
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
  if shards.is_prepared(data_dir):
    # Deferred: JAX, which the TensorFlow path does not import.
    from transformer.inference import evaluation_jax  # pylint: disable=g-import-not-at-top
    data = evaluation_jax.PreparedData(data_dir, split, max_sentences)
  else:  # bad data fails at once, before the model is restored
    data = evaluation.TensorFlowData(data_dir, split, max_sentences)
  output_dir = Path(output_dir or run_folder.bleu_dir(model_dir))
  check_writable(output_dir)
  if export_dir:
    # Deferred: TensorFlow, which only an export needs.
    from transformer.inference import export as export_lib  # pylint: disable=g-import-not-at-top
    from transformer.run.checkpoint_files import checkpoint_step  # pylint: disable=g-import-not-at-top
    export_lib.check_export_target(export_dir, "give another --export_dir")
  start = time.monotonic()
  run = data.restore(model_dir, average_last)
  # Said after the fact: a checkpoint that cannot be read is one error line alone.
  names = ", ".join(run.names)
  restored = f"averaged the last {average_last} checkpoints ({names})" if average_last else (
      f"restored the checkpoint {names}")
  say(f"{restored} of {model_dir}: took {time.monotonic() - start:.1f} s")
  skipped = evaluation.newer_checkpoints(model_dir, run.names[-1])
  if skipped:
    say(f"evaluate.py: warning: skipped the newer {', '.join(skipped)}: cannot be read in full "
        "(truncated or corrupt)")
  if export_dir:  # swapped in whole: a kill or a full disk leaves the previous export
    with progress.announced(f"exporting the translator to {export_dir}", say):
      export_lib.export_model(run.model, data.tokenizers, run.config.decoding, export_dir,
                              checkpoint_step(run.checkpoints[-1]), checkpoints=run.names)
  # The JSON beside the hypotheses also says which checkpoints were scored.
  return evaluation.evaluate(data, run, method, output_dir, batch_size,
                             {"checkpoints": run.checkpoints, "export_dir": export_dir}, say)


def evaluate_translator(translator_dir, split: str, method: str, data_dir, output_dir=None,
                        batch_size: int = 64, max_sentences: int = 0) -> dict:
  """Scores an exported translator SavedModel on strings (it serves no function
  on ids); returns the record."""
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
  from transformer.data import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top
  pairs, split_size = evaluation.load_pairs(data_dir, split, max_sentences)
  output_dir = Path(output_dir or Path(translator_dir).parent / run_folder.BLEU_SUBDIR)
  check_writable(output_dir)
  translator = tokenizers_lib.load_saved_model(translator_dir, "translator")
  if not all(hasattr(translator, name) for name in ("translate", "translate_greedy",
                                                    "tokenizers")):
    raise UsageError(f"{translator_dir} is a SavedModel but not an exported translator (it "
                     "lacks translate, translate_greedy or tokenizers)")
  # The tokenizers' token tables come from assets/*.txt: the files saved?
  tokenizers_lib.check_vocabulary_files(translator.tokenizers)
  translate_batch = evaluation.translator_batch_fn(translator, method)
  with progress.announced(f"translating {len(pairs)} {split} sentences ({method})", say):
    return evaluation.evaluate_bleu(progress.counted(translate_batch, len(pairs)), pairs,
                                    output_dir, split, method, batch_size,
                                    translator.tokenizers.en, split_size,
                                    {"translator": str(translator_dir)})


def main(argv):
  if len(argv) > 1:
    raise UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  data_dir, message = data_flag()
  check_flags(data_dir)
  if not _VERBOSE.value:
    logging.set_verbosity(logging.ERROR)
  if shards.is_prepared(data_dir):  # scored under JAX, with no TensorFlow
    runtime.hide_jax_logs(_VERBOSE.value)
    # train.py's cache and default: a rerun loads the decoding steps compiled before.
    runtime.use_compilation_cache(_COMPILATION_CACHE.value,
                                  warn=lambda line: say(f"evaluate.py: warning: {line}"))
  else:
    if message:
      say(f"evaluate.py: {message}")
    runtime.keras_on_tensorflow(
        "evaluate.py", "the TED files and exported translators are scored on TensorFlow (a "
        "prepare.py folder as --data is scored under JAX)", say)
    runtime.import_tensorflow(_VERBOSE.value)
  if _TRANSLATOR.value:
    result = evaluate_translator(_TRANSLATOR.value, _SPLIT.value, _METHOD.value,
                                 data_dir, _OUTPUT_DIR.value, _BATCH_SIZE.value,
                                 _MAX_SENTENCES.value)
  else:
    result = evaluate(_MODEL_DIR.value, _SPLIT.value, _METHOD.value, _AVERAGE_LAST.value,
                      data_dir, _OUTPUT_DIR.value, _BATCH_SIZE.value, _EXPORT_DIR.value,
                      _MAX_SENTENCES.value)
  print(json.dumps(result, indent=2))


def say_stopped(interrupted: KeyboardInterrupt) -> str:
  return (f"{script_lib.stopped_by(interrupted)} before it finished (it leaves no file half "
          "written); rerun the same command to score")


def expected_errors():
  """The errors that are one line: bad input, data, checkpoints, and once
  TensorFlow is loaded, its data, tokenizers and exports."""
  errors = (UsageError, shards.ShardError, TrainingError)
  if "transformer.inference.evaluation" in sys.modules:
    from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
    errors += (evaluation.EvaluationError,)
  if "tensorflow" in sys.modules:
    from transformer.data import ted  # pylint: disable=g-import-not-at-top
    from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
    errors += (ted.DataError, tokenizers.TokenizerError)
  return errors


def run(argv):
  """main, with expected failures turned into one line and exit status 1, a
  full disk or an unreadable file into one line naming it, and SIGINT/SIGTERM
  into one line and 128 + the signal's number."""
  script_lib.run_main(main, argv, "evaluate.py", errors=expected_errors, described=(OSError,),
                      stopped_line=say_stopped)


if __name__ == "__main__":
  app.run(run, flags_parser=runtime.flags_parser("evaluate.py"))
