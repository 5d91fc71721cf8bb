"""What train.py does around the training itself: the run folder's files, BLEU,
the export, and the exit after a signal. TensorFlow is imported only by the
functions that need it (the JAX path uses the others).
"""

import json
from pathlib import Path
import signal
import sys

from absl import logging

from transformer.run import files
from transformer.run import progress
from transformer.run import run_folder
from transformer.run.errors import TrainingError


def exit_if_stopped(result, model_dir: Path) -> None:
  """Exits with 128 + N and one line when signal N stopped the training (which
  saved a checkpoint first)."""
  if result.interrupted_by is None:
    return
  name = signal.Signals(result.interrupted_by).name
  print(f"train.py: stopped by {name} at step {result.step}; checkpoint saved in "
        f"{run_folder.checkpoint_dir(model_dir)}; rerun the same command to resume",
        file=sys.stderr)
  sys.exit(128 + result.interrupted_by)


def record_run_files(model_dir: Path, config, tokenizer_path: Path, vocabulary_hash: str, *,
                     trainer: str, data: str) -> None:
  """Writes config.json, tokenizer_path.txt, the vocabularies' hash and
  trained_with.json (``trainer``, "tensorflow" or "jax", and the ``data`` read), each atomically."""
  data = data if data == "tfds" else str(Path(data).resolve())
  for name, text in ((run_folder.CONFIG_FILE, config.to_json_best_effort(indent=2)),
                     (run_folder.TOKENIZER_PATH_FILE, str(tokenizer_path)),
                     (run_folder.VOCABULARY_HASH_FILE, vocabulary_hash),
                     (run_folder.TRAINED_WITH_FILE,
                      json.dumps({"trainer": trainer, "data": data}, indent=2))):
    files.write_text_atomically(model_dir / name, text + "\n")


class Bleu:
  """Validation BLEU through the translator, when there are pairs to score."""

  def __init__(self, model, tokenizers, config, model_dir, pairs, chief, summaries, method):
    self.model, self.tokenizers, self.config = model, tokenizers, config
    self.model_dir, self.pairs, self.method = model_dir, pairs, method
    self.available = bool(pairs) and chief
    self.summaries = summaries
    self._in_memory_translator = None  # one for every epoch: traced once

  def recorded(self, step) -> bool:
    """Whether a final record at ``step`` holds the BLEU of these pairs and method."""
    metrics, scores = (self.model_dir / run_folder.METRICS_FILE,
                       run_folder.bleu_dir(self.model_dir) / f"validation.{self.method}.json")
    if not (metrics.is_file() and scores.is_file()):
      return False
    finals = [r for r in run_folder.read_metrics(metrics)
              if r.get("final") and r["step"] == step and "bleu" in r]
    try:
      scored = json.loads(scores.read_text(encoding="utf-8"))["num_sentences"]
    except (ValueError, KeyError):
      return False
    return bool(finals) and scored == len(self.pairs)

  def __call__(self, split_name, step, translator=None):
    """BLEU of `translator` (default: an in-memory one over the current model) on
    the validation pairs; writes <model_dir>/bleu/<split_name>.<method>.{txt,json}
    and the score at `step` to TensorBoard's logs/validation, beside the losses."""
    # Deferred: evaluation and export import TensorFlow, kept out of the JAX process.
    from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
    from transformer.inference import export as export_lib  # pylint: disable=g-import-not-at-top
    if translator is None:
      if self._in_memory_translator is None:
        self._in_memory_translator = export_lib.Translator(self.tokenizers, self.model,
                                                           self.config.decoding)
      translator = self._in_memory_translator
    method = self.method
    with progress.announced(f"translating {len(self.pairs)} validation sentences "
                            f"({method}) for BLEU"):
      # A live count on a terminal, as evaluate.py shows: the pass takes minutes.
      translate_batch = progress.counted(evaluation.translator_batch_fn(translator, method),
                                         len(self.pairs), sys.stdout)
      result = evaluation.evaluate_bleu(translate_batch, self.pairs,
                                        run_folder.bleu_dir(self.model_dir), split_name, method,
                                        reference_tokenizer=self.tokenizers.en)
    logging.info("%s BLEU (%s, %d sentences): %.2f", split_name, method,
                 result["num_sentences"], result["bleu"])
    self.summaries.write_scalars("validation", step, {"bleu": result["bleu"]})
    return result["bleu"]


def export(trainer, tokenizers, config, model_dir):
  """Exports the translator SavedModel and the .keras model into export/, swapped
  in whole (a failed write keeps the old export); returns the in-memory
  translator and the paths."""
  # Deferred: export imports TensorFlow, kept out of the JAX process.
  from transformer.inference import export as export_lib  # pylint: disable=g-import-not-at-top
  export_dir = run_folder.export_dir(model_dir)
  try:  # files of the user's in export/ are never replaced
    export_lib.check_export_target(
        export_dir, "move them, then rerun the same command to export (the trained model is in "
        f"{trainer.latest_checkpoint()})")
  except export_lib.ExportError as e:
    raise TrainingError(str(e)) from e
  try:
    with progress.announced(f"exporting the .keras model and the translator to {export_dir}"):
      translator = export_lib.export_model(
          trainer.model, tokenizers, config.decoding, export_dir, trainer.step,
          translator_subdir=run_folder.EXPORT_TRANSLATOR, keras_model=True)
  except export_lib.ExportError as e:
    raise TrainingError(f"{e}, and the trained model is in {trainer.latest_checkpoint()}. Free "
                   "space and rerun the same command to export") from e
  translator_dir = export_dir / run_folder.EXPORT_TRANSLATOR
  keras_path = export_dir / run_folder.EXPORT_KERAS_MODEL
  logging.info("exported %s and %s (step %d)", translator_dir, keras_path, trainer.step)
  return translator, {"export": str(translator_dir), "keras_model": str(keras_path)}


def stopped_during_export(signum: int, step: int, model_dir: Path) -> None:
  """Exits 128 + ``signum`` after a signal that came during a finished export."""
  print(f"train.py: stopped by {signal.Signals(signum).name} during the export, which was "
        f"finished first: {run_folder.export_dir(model_dir)} holds step {step}; BLEU was not "
        "computed",
        file=sys.stderr)
  sys.exit(128 + signum)
