"""BLEU of a trained model on the validation or test split (paper §6.1).

  python evaluate.py --model_dir runs/tutorial --split test --method beam --average_last 5

Reads ``config.json``, ``tokenizer_path.txt`` and ``checkpoints/`` from the
``train.py`` output folder, optionally averages the last N checkpoints (the
paper's base model averages 5), translates the split and writes the hypotheses
and a JSON with the score to ``--output_dir`` (default ``<model_dir>/bleu``).
With ``--export_dir`` the evaluated (e.g. averaged) model is also exported there
as a translator SavedModel. ``--translator`` scores an exported translator
SavedModel instead of a ``train.py`` folder:

  python evaluate.py --translator runs/tutorial/export/translator --method greedy

Prints the JSON record; TensorFlow's own logs are hidden unless ``--verbose``
(or ``TF_CPP_MIN_LOG_LEVEL`` is set). Exit status: 0 on success, 1 with one
``evaluate.py: error: ...`` line on bad input (flags, data, a folder that is
not a train.py output or translator, a missing or corrupt checkpoint).
See :mod:`transformer.evaluation` for what the score does and does not compare with.
"""

import json
from pathlib import Path
import sys

from absl import app
from absl import flags
from absl import logging

from transformer import console

DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "shared" / "data" / "ted_hrlr_pt_to_en"
# File suffix of each split in the TED HRLR folder (as transformer.data reads it).
SPLIT_FILE_SUFFIX = {"validation": "dev", "test": "test"}

_MODEL_DIR = flags.DEFINE_string("model_dir", None,
                                 "train.py output folder (or give --translator).")
_TRANSLATOR = flags.DEFINE_string(
    "translator", None, "An exported translator SavedModel to score instead of --model_dir.")
_SPLIT = flags.DEFINE_enum("split", "validation", list(SPLIT_FILE_SUFFIX), "Split to score.")
_METHOD = flags.DEFINE_enum("method", "beam", ["beam", "greedy"],
                            "beam: config.decoding's beam search (§6.1); greedy: faster.")
_AVERAGE_LAST = flags.DEFINE_integer(
    "average_last", 0, "Average the last N checkpoints (§6.1 uses 5); 0 uses the latest.")
_DATA_DIR = flags.DEFINE_string("data_dir", str(DEFAULT_DATA_DIR),
                                "Folder with pt.dev en.dev pt.test en.test.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Default: <model_dir>/bleu.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Sentences translated together.")
_EXPORT_DIR = flags.DEFINE_string(
    "export_dir", None, "If set, also export the evaluated model as a translator SavedModel.")
_VERBOSE = flags.DEFINE_bool("verbose", False, "Show TensorFlow's and absl's logs.")


class UsageError(ValueError):
  """Bad input found by evaluate.py itself, most of it before TensorFlow loads."""


def check_flags() -> None:
  """Every check that needs no TensorFlow; raises UsageError."""
  if bool(_MODEL_DIR.value) == bool(_TRANSLATOR.value):
    raise UsageError("give exactly one of --model_dir and --translator")
  if _AVERAGE_LAST.value < 0 or _BATCH_SIZE.value < 1:
    raise UsageError("--average_last must be >= 0 and --batch_size >= 1")
  data_dir = Path(_DATA_DIR.value)
  suffix = SPLIT_FILE_SUFFIX[_SPLIT.value]
  missing = [f"{language}.{suffix}" for language in ("pt", "en")
             if not (data_dir / f"{language}.{suffix}").is_file()]
  if missing:
    raise UsageError(f"--data_dir={data_dir}: not a folder with the TED HRLR files of the "
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
  missing = [name for name in ("config.json", "tokenizer_path.txt", "checkpoints/checkpoint")
             if not (model_dir / name).is_file()]
  if missing:
    raise UsageError(f"--model_dir={model_dir}: not a train.py output folder (missing "
                     f"{', '.join(missing)})")


def evaluate(model_dir, split: str, method: str, average_last: int, data_dir,
             output_dir=None, batch_size: int = 64, export_dir=None) -> dict:
  """Restores the model of ``model_dir`` and scores it; returns the BLEU record."""
  from transformer import data  # pylint: disable=g-import-not-at-top
  from transformer import evaluation  # pylint: disable=g-import-not-at-top
  from transformer.export import Translator, export_translator  # pylint: disable=g-import-not-at-top
  pairs = data.local_split_pairs(data_dir, split)  # before the model: bad data fails at once
  config, tokenizers, model, checkpoints = evaluation.restore_model_dir(model_dir,
                                                                        average_last)
  if export_dir:
    translator = export_translator(model, tokenizers, export_dir, config.decoding)
  else:
    translator = Translator(tokenizers, model, config.decoding)
  output_dir = Path(output_dir or Path(model_dir) / "bleu")
  result = evaluation.evaluate_bleu(
      evaluation.translator_batch_fn(translator, method), pairs, output_dir, split, method,
      batch_size, reference_tokenizer=tokenizers.en)
  result = {**result, "checkpoints": checkpoints, "export_dir": export_dir,
            "teacher_forced": evaluation.teacher_forced_metrics(model, tokenizers, pairs,
                                                                config)}
  # The JSON beside the hypotheses also says which checkpoints were scored.
  (output_dir / f"{split}.{method}.json").write_text(json.dumps(result, indent=2) + "\n",
                                                     encoding="utf-8")
  return result


def evaluate_translator(translator_dir, split: str, method: str, data_dir, output_dir=None,
                        batch_size: int = 64) -> dict:
  """Scores an exported translator SavedModel; returns the BLEU record."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  (tokenizer ops)
  from transformer import data  # pylint: disable=g-import-not-at-top
  from transformer import evaluation  # pylint: disable=g-import-not-at-top
  pairs = data.local_split_pairs(data_dir, split)
  try:
    translator = tf.saved_model.load(str(translator_dir))
  except Exception as e:  # pylint: disable=broad-except  (OSError, DecodeError, OpError...)
    raise UsageError(f"cannot load the SavedModel {translator_dir}: "
                     f"{evaluation.describe_error(e)}") from e
  if not all(hasattr(translator, name) for name in ("translate", "translate_greedy",
                                                    "tokenizers")):
    raise UsageError(f"{translator_dir} is a SavedModel but not an exported translator (it "
                     "lacks translate, translate_greedy or tokenizers)")
  result = evaluation.evaluate_bleu(
      evaluation.translator_batch_fn(translator, method), pairs,
      output_dir or Path(translator_dir).parent / "bleu", split, method, batch_size,
      reference_tokenizer=translator.tokenizers.en)
  return {**result, "translator": str(translator_dir)}


def main(argv):
  if len(argv) > 1:
    raise UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  check_flags()
  if not _VERBOSE.value:
    logging.set_verbosity(logging.ERROR)
  console.import_tensorflow(_VERBOSE.value)
  if _TRANSLATOR.value:
    result = evaluate_translator(_TRANSLATOR.value, _SPLIT.value, _METHOD.value,
                                 _DATA_DIR.value, _OUTPUT_DIR.value, _BATCH_SIZE.value)
  else:
    result = evaluate(_MODEL_DIR.value, _SPLIT.value, _METHOD.value, _AVERAGE_LAST.value,
                      _DATA_DIR.value, _OUTPUT_DIR.value, _BATCH_SIZE.value, _EXPORT_DIR.value)
  print(json.dumps(result, indent=2))


def run(argv):
  """main, with expected failures turned into one line and exit status 1."""
  try:
    main(argv)
  except UsageError as e:
    sys.exit(f"evaluate.py: error: {e}")
  except Exception as e:  # pylint: disable=broad-except
    # TensorFlow is loaded by now: the library raised.
    from transformer import data, tokenizers, training  # pylint: disable=g-import-not-at-top
    if isinstance(e, (data.DataError, tokenizers.TokenizerError, training.TrainingError)):
      sys.exit(f"evaluate.py: error: {e}")
    raise


if __name__ == "__main__":
  app.run(run)
