r"""Collects what a training run showed into ``lab/results/<name>/``.

  python lab/bench/run_report.py --model_dir=runs/cpu_2h --results_dir=lab/results/cpu_2h \
      --translator=runs/cpu_2h/export/averaged

Reads the ``train.py`` output folder and what ``evaluate.py`` wrote into its
``bleu/`` folder, and writes (small files only; no checkpoints or models):

* ``metrics.jsonl`` and ``config.json``, copied;
* ``train_steps.jsonl``: the training loss, accuracy, learning rate and tokens/s
  logged every ``--log_every_steps`` steps (from the TensorBoard events);
* ``training_curves.png`` (per epoch) and ``training_steps.png`` (per logged step,
  with the per-epoch validation points);
* ``bleu/<split>.<method>.json``, copied, and ``bleu.md``, their table;
* ``samples.md``: the first ``--samples`` test pairs (in TFDS order) with the
  reference and every decoding's output;
* ``attention_short.png`` and ``attention_long.png``: the last decoder layer's
  cross-attention for a short and a long test sentence, from ``--translator``;
* ``machine.json``: CPU, cores and library versions.
"""

import json
from pathlib import Path
import sys

from absl import flags

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from lab.bench import cli  # pylint: disable=g-import-not-at-top,wrong-import-position
from lab.bench import machine  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.data import ted  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.inference import plotting  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.run.files import write_text_atomically  # pylint: disable=g-import-not-at-top,wrong-import-position

SHARED_DATA = machine.SHARED_DATA

_MODEL_DIR = flags.DEFINE_string("model_dir", None, "train.py output folder.")
_RESULTS_DIR = flags.DEFINE_string("results_dir", None, "Where the report goes.")
_TRANSLATOR = flags.DEFINE_string("translator", None,
                                  "Exported translator SavedModel for the attention plots.")
_DATA_DIR = flags.DEFINE_string("data_dir", str(SHARED_DATA / "ted_hrlr_pt_to_en"),
                                "Folder with the TED HRLR files.")
_SAMPLES = flags.DEFINE_integer("samples", 20, "Test sentences shown in samples.md.")


def training_scalars(model_dir: Path):
  """[{step, loss, accuracy, learning_rate, tokens_per_second}] from logs/train."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.core.util import event_pb2  # pylint: disable=g-import-not-at-top
  by_step = {}
  for path in sorted((model_dir / "logs" / "train").glob("events.out.tfevents.*")):
    for record in tf.data.TFRecordDataset(str(path)):
      event = event_pb2.Event.FromString(record.numpy())
      for value in event.summary.value:
        scalar = float(tf.make_ndarray(value.tensor))
        by_step.setdefault(event.step, {"step": event.step})[value.tag] = scalar
  return [by_step[step] for step in sorted(by_step)]


def plot_steps(steps, epochs, path: Path):
  """Training loss per logged step, validation loss per epoch."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  figure, (loss_axes, accuracy_axes) = plt.subplots(1, 2, figsize=(11, 4),
                                                    layout="constrained")
  loss_axes.plot([s["step"] for s in steps], [s["loss"] for s in steps], label="training")
  accuracy_axes.plot([s["step"] for s in steps], [s["accuracy"] for s in steps],
                     label="training")
  validated = [e for e in epochs if "val_loss" in e]
  loss_axes.plot([e["step"] for e in validated], [e["val_loss"] for e in validated],
                 "o-", label="validation")
  accuracy_axes.plot([e["step"] for e in validated], [e["val_accuracy"] for e in validated],
                     "o-", label="validation")
  for axes, name in ((loss_axes, "loss (label-smoothed)"), (accuracy_axes, "masked accuracy")):
    axes.set_xlabel("step")
    axes.set_ylabel(name)
    axes.grid(alpha=0.3)
    axes.legend()
  figure.savefig(path, format="png", dpi=100)
  plt.close(figure)


def bleu_table(bleu_dir: Path) -> str:
  rows = ["| split | decoding | checkpoints | BLEU | teacher-forced accuracy | sentences "
          "| signature |", "|---|---|---|---|---|---|---|"]
  for path in sorted(bleu_dir.glob("*.json")):
    result = cli.read_json(path)
    steps = [Path(c).name.split("-")[-1] for c in result.get("checkpoints", [])]
    checkpoints = (f"average of {len(steps)} ({', '.join(steps)})" if len(steps) > 1
                   else f"step {steps[0]}" if steps else "exported translator")
    accuracy = result.get("teacher_forced", {}).get("accuracy")
    rows.append(f"| {result['split']} | {result['method']} | {checkpoints} | "
                f"{result['bleu']:.2f} | {'' if accuracy is None else f'{accuracy:.3f}'} | "
                f"{result['num_sentences']} | {result['signature'].replace('|', ' ')} |")
  return "\n".join(rows) + "\n"


def samples(model_bleu_dir: Path, data_dir, count: int) -> str:
  pairs = ted.local_split_pairs(data_dir, "test")[:count]
  outputs = {}
  for path in sorted(model_bleu_dir.glob("test.*.txt")):
    if ".partial" in path.name:  # evaluate.py --max_sentences: not the whole split
      continue
    method = path.name.split(".")[1]
    outputs[method] = path.read_text(encoding="utf-8").splitlines()[:count]
  lines = [f"# The first {count} test pairs (TFDS order)\n"]
  for i, (source, reference) in enumerate(pairs):
    lines.append(f"{i + 1}. **pt:** {source}  \n   **reference:** {reference}  ")
    for method, hypotheses in outputs.items():
      lines.append(f"   **{method}:** {hypotheses[i]}  ")
    lines.append("")
  return "\n".join(lines)


def attention_plots(translator_dir, data_dir, results_dir: Path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import  (tokenizer ops)
  translator = tf.saved_model.load(str(translator_dir))
  sources = [source for source, _ in ted.local_split_pairs(data_dir, "test")]
  by_length = sorted(sources[:200], key=lambda s: len(s.split()))
  for name, sentence in (("short", by_length[len(by_length) // 4]),
                         ("long", by_length[-len(by_length) // 10])):
    result = translator.translate_with_attention(tf.constant([sentence]))
    plotting.save_attention_plot(result["source_tokens"][0].numpy(),
                                    result["tokens"][0].numpy(),
                                    result["attention"][0].numpy(),
                                    results_dir / f"attention_{name}.png")


def main(argv):
  del argv
  model_dir, results_dir = Path(_MODEL_DIR.value), Path(_RESULTS_DIR.value)
  results_dir.mkdir(parents=True, exist_ok=True)
  for name in ("metrics.jsonl", "config.json"):
    write_text_atomically(results_dir / name, (model_dir / name).read_text(encoding="utf-8"))
  steps = training_scalars(model_dir)
  write_text_atomically(results_dir / "train_steps.jsonl",
                        "".join(json.dumps(s, sort_keys=True) + "\n" for s in steps))
  epochs = plotting.read_metrics(results_dir / "metrics.jsonl")
  plotting.plot_training_curves(results_dir / "metrics.jsonl",
                                results_dir / "training_curves.png")
  plot_steps(steps, [e for e in epochs if "epoch" in e], results_dir / "training_steps.png")
  bleu_dir = results_dir / "bleu"
  bleu_dir.mkdir(exist_ok=True)
  # bleu/ is evaluate.py's default; other bleu_* folders hold other settings
  # (e.g. --output_dir=<model_dir>/bleu_latest).
  for path in model_dir.glob("bleu*/*.json"):
    result = cli.read_json(path)
    result["hypotheses_file"] = Path(result["hypotheses_file"]).name
    name = path.name if path.parent.name == "bleu" else f"{path.parent.name}.{path.name}"
    write_text_atomically(bleu_dir / name, json.dumps(result, indent=2) + "\n")
  write_text_atomically(results_dir / "bleu.md", bleu_table(bleu_dir))
  write_text_atomically(results_dir / "samples.md",
                        samples(model_dir / "bleu", _DATA_DIR.value, _SAMPLES.value))
  if _TRANSLATOR.value:
    attention_plots(_TRANSLATOR.value, _DATA_DIR.value, results_dir)
  # The machine the report was made on; the run's own commit is in its README.
  write_text_atomically(results_dir / "machine.json",
                        json.dumps(machine.description(), indent=2) + "\n")
  print(f"wrote {results_dir}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["model_dir", "results_dir"])
  cli.run(main)
