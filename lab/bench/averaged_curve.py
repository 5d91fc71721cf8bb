r"""Validation accuracy of the checkpoint average (§6.1) at every epoch of a run.

  python lab/bench/averaged_curve.py --model_dir=runs/cpu_2h_2k_long \
      --output=lab/results/cpu_2h_2k_long/averaged_curve.jsonl \
      --plot=lab/results/cpu_2h_2k_long/averaged_curve.png --target=0.66 --budget_minutes=120

``train.py`` reports each epoch's validation loss and accuracy for the weights
it has at that moment; the paper evaluates the mean of the last 5 checkpoints.
For every epoch in the run's ``metrics.jsonl`` whose last step has a checkpoint
with ``--average - 1`` checkpoints before it (keep enough of them:
``config.training.keep_checkpoints``), this averages those checkpoints and
computes the teacher-forced validation loss and masked accuracy
(``evaluation.teacher_forced_metrics``, what ``evaluate.py`` reports as
``teacher_forced``). Epochs without a full window are skipped, and so are
epochs not in ``--epochs`` when it is given (``--epochs=17 --average=10``:
one wider window at the end of the 2-hour budget).

One JSON line per epoch: epoch, step, training minutes up to that epoch (the
sum of the epochs' ``seconds``), the checkpoints averaged, the averaged model's
``val_loss`` and ``val_accuracy``, and the epoch's own ``val_accuracy`` from
``metrics.jsonl`` as ``last_checkpoint_val_accuracy``. ``--plot`` draws both
against training minutes, every epoch's own accuracy included.
"""

import json
from pathlib import Path
import sys

from absl import flags
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from lab.bench import cli  # pylint: disable=g-import-not-at-top,wrong-import-position
from lab.bench import machine  # pylint: disable=g-import-not-at-top,wrong-import-position

_MODEL_DIR = flags.DEFINE_string("model_dir", None, "train.py output folder.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON lines output.")
_AVERAGE = flags.DEFINE_integer("average", 5, "Checkpoints averaged, the epoch's last included.")
_EPOCHS = flags.DEFINE_list("epochs", [], "Only these epochs (default: every epoch).")
_DATA_DIR = flags.DEFINE_string("data_dir", str(machine.SHARED_DATA / "ted_hrlr_pt_to_en"),
                                "Folder with the TED HRLR files.")
_VALIDATION_PAIRS = flags.DEFINE_integer("validation_pairs", 0,
                                         "Validation pairs used (0: the whole split).")
_PLOT = flags.DEFINE_string("plot", None, "PNG of both accuracies per training minute.")
_TARGET = flags.DEFINE_float("target", None, "An accuracy drawn as a horizontal line.")
_BUDGET = flags.DEFINE_float("budget_minutes", None, "Training minutes drawn as a vertical line.")


def checkpoint_steps(checkpoint_dir: Path) -> dict:
  """{step: path} of every checkpoint the ``checkpoint`` index lists, oldest first."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  state = tf.train.get_checkpoint_state(str(checkpoint_dir))
  paths = list(state.all_model_checkpoint_paths) if state else []
  return {int(path.rsplit("-", 1)[1]): path for path in paths}


def epoch_records(model_dir: Path) -> list:
  """The run's per-epoch records (``metrics.jsonl`` may also hold train.py's
  final BLEU line)."""
  from transformer.inference import plotting  # pylint: disable=g-import-not-at-top
  return [r for r in plotting.read_metrics(model_dir / "metrics.jsonl") if "train_loss" in r]


def averaged_curve(model_dir: Path, pairs, average: int, only_epochs=()):
  """Yields one record per epoch with a full window of ``average`` checkpoints
  (per epoch in ``only_epochs``, when given)."""
  from transformer.inference import averaging  # pylint: disable=g-import-not-at-top
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
  from transformer.run import run_folder  # pylint: disable=g-import-not-at-top
  config, tokenizers, model, _ = evaluation.restore_model_dir(model_dir)
  ids = evaluation.tokenized(tokenizers, pairs)
  by_step = checkpoint_steps(run_folder.checkpoint_dir(model_dir))
  steps = list(by_step)
  minutes = 0.0
  for epoch in epoch_records(model_dir):
    minutes += epoch["seconds"] / 60
    if (only_epochs and epoch["epoch"] not in only_epochs) or epoch["step"] not in by_step:
      continue
    end = steps.index(epoch["step"]) + 1
    if end < average:
      continue
    paths = [by_step[step] for step in steps[end - average:end]]
    averaging.average_checkpoints(model, paths)
    metrics = evaluation.teacher_forced_metrics(model, ids, config)
    yield {"epoch": epoch["epoch"], "step": epoch["step"], "training_minutes": minutes,
           "checkpoints": [Path(path).name for path in paths],
           "val_loss": metrics["loss"], "val_accuracy": metrics["accuracy"],
           "last_checkpoint_val_accuracy": epoch.get("val_accuracy")}


def plot(epochs, curve, path, average, target=None, budget_minutes=None):
  """Validation accuracy per training minute: each epoch's weights (``epochs``,
  the run's ``metrics.jsonl`` records) and the averages (``curve``)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  figure, axis = plt.subplots(figsize=(8, 4.5))
  minutes = np.cumsum([epoch["seconds"] / 60 for epoch in epochs])
  axis.plot(minutes, [epoch["val_accuracy"] for epoch in epochs], "o-", markersize=3,
            label="the epoch's last checkpoint")
  axis.plot([point["training_minutes"] for point in curve],
            [point["val_accuracy"] for point in curve], "s-", markersize=4,
            label=f"average of the last {average} checkpoints")
  if target is not None:
    axis.axhline(target, color="gray", linestyle="--", linewidth=1, label=f"target {target}")
  if budget_minutes is not None:
    axis.axvline(budget_minutes, color="gray", linestyle=":", linewidth=1,
                 label=f"{budget_minutes:g} minutes")
  axis.set_xlabel("training minutes")
  axis.set_ylabel("validation masked accuracy")
  axis.grid(alpha=0.3)
  axis.legend()
  figure.tight_layout()
  figure.savefig(path, dpi=100)


def main(argv):
  del argv
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  if not _MODEL_DIR.value or not _OUTPUT.value:
    sys.exit("--model_dir and --output are required")
  if _AVERAGE.value < 1:
    sys.exit(f"--average must be >= 1, got {_AVERAGE.value}")
  try:
    only_epochs = {int(epoch) for epoch in _EPOCHS.value}
  except ValueError:
    sys.exit(f"--epochs must be epoch numbers, got {','.join(_EPOCHS.value)}")
  pairs = ted.local_split_pairs(_DATA_DIR.value, "validation")
  if _VALIDATION_PAIRS.value:
    pairs = pairs[:_VALIDATION_PAIRS.value]
  output = Path(_OUTPUT.value)
  output.parent.mkdir(parents=True, exist_ok=True)
  curve = []
  with output.open("w", encoding="utf-8") as out:
    for record in averaged_curve(Path(_MODEL_DIR.value), pairs, _AVERAGE.value,
                                 only_epochs):
      curve.append(record)
      out.write(json.dumps(record) + "\n")
      out.flush()
      print(json.dumps(record), flush=True)
  if _PLOT.value:
    plot(epoch_records(Path(_MODEL_DIR.value)), curve, _PLOT.value, _AVERAGE.value, _TARGET.value, _BUDGET.value)


if __name__ == "__main__":
  cli.run(main)
