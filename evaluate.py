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
See :mod:`transformer.evaluation` for what the score does and does not compare with.
"""

import json
from pathlib import Path

from absl import app
from absl import flags

from transformer import data
from transformer import evaluation
from transformer.export import Translator, export_translator

DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "shared" / "data" / "ted_hrlr_pt_to_en"

_MODEL_DIR = flags.DEFINE_string("model_dir", None,
                                 "train.py output folder (or give --translator).")
_TRANSLATOR = flags.DEFINE_string(
    "translator", None, "An exported translator SavedModel to score instead of --model_dir.")
_SPLIT = flags.DEFINE_enum("split", "validation", ["validation", "test"], "Split to score.")
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


def evaluate(model_dir, split: str, method: str, average_last: int, data_dir,
             output_dir=None, batch_size: int = 64, export_dir=None) -> dict:
  """Restores the model of ``model_dir`` and scores it; returns the BLEU record."""
  config, tokenizers, model, checkpoints = evaluation.restore_model_dir(model_dir,
                                                                        average_last)
  if export_dir:
    translator = export_translator(model, tokenizers, export_dir, config.decoding)
  else:
    translator = Translator(tokenizers, model, config.decoding)
  translate_batch = evaluation.translator_batch_fn(translator, method)
  result = evaluation.evaluate_bleu(
      translate_batch, data.local_split_pairs(data_dir, split),
      output_dir or Path(model_dir) / "bleu", split, method, batch_size,
      reference_tokenizer=tokenizers.en)
  return {**result, "checkpoints": checkpoints, "export_dir": export_dir}


def evaluate_translator(translator_dir, split: str, method: str, data_dir, output_dir=None,
                        batch_size: int = 64) -> dict:
  """Scores an exported translator SavedModel; returns the BLEU record."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  (tokenizer ops)
  translator = tf.saved_model.load(str(translator_dir))
  result = evaluation.evaluate_bleu(
      evaluation.translator_batch_fn(translator, method),
      data.local_split_pairs(data_dir, split),
      output_dir or Path(translator_dir).parent / "bleu", split, method, batch_size,
      reference_tokenizer=translator.tokenizers.en)
  return {**result, "translator": str(translator_dir)}


def main(argv):
  del argv
  if bool(_MODEL_DIR.value) == bool(_TRANSLATOR.value):
    raise app.UsageError("give exactly one of --model_dir and --translator")
  if _TRANSLATOR.value:
    if _AVERAGE_LAST.value or _EXPORT_DIR.value:
      raise app.UsageError("--average_last and --export_dir need --model_dir")
    result = evaluate_translator(_TRANSLATOR.value, _SPLIT.value, _METHOD.value,
                                 _DATA_DIR.value, _OUTPUT_DIR.value, _BATCH_SIZE.value)
  else:
    result = evaluate(_MODEL_DIR.value, _SPLIT.value, _METHOD.value, _AVERAGE_LAST.value,
                      _DATA_DIR.value, _OUTPUT_DIR.value, _BATCH_SIZE.value, _EXPORT_DIR.value)
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  app.run(main)
