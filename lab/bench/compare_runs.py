r"""Full-length training runs side by side, per epoch (issue #8).

  python lab/bench/compare_runs.py --run=dropout0.1:lab/results/cpu_2h_2c \
      --run=dropout0.2:lab/results/cpu_2h_dropout --output=lab/results/cpu_2h_dropout/comparison

A short sweep (``lab/bench/sweep.py``) ranks arms after minutes; a change that
starts slower and ends higher (more regularisation, a longer warm-up) only
shows over a whole run. Each ``--run`` is ``label:folder`` with the
``metrics.jsonl`` that ``train.py`` writes (or that ``lab/bench/run_report.py``
copies into ``lab/results/``). Writes ``<output>.png`` (validation accuracy and
loss against cumulative training minutes, the training accuracy dashed) and
``<output>.md`` (validation accuracy per epoch, one column per run).
"""

from pathlib import Path
import sys

from absl import flags

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from lab.bench import cli  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.inference import plotting  # pylint: disable=g-import-not-at-top,wrong-import-position
from transformer.run.files import write_text_atomically  # pylint: disable=g-import-not-at-top,wrong-import-position
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position  (after plotting's Agg backend)

_RUNS = flags.DEFINE_multi_string("run", None, "label:folder holding metrics.jsonl.")
_OUTPUT = flags.DEFINE_string("output", None, "Output path without extension.")


def parse_run(spec: str):
  """``label:folder`` → ``(label, [epoch records])``, complete epochs only."""
  label, sep, folder = spec.partition(":")
  if not sep or not label or not folder:
    raise ValueError(f"--run must be label:folder, got {spec!r}")
  path = Path(folder) / "metrics.jsonl"
  if not path.is_file():
    raise FileNotFoundError(f"--run {spec!r}: no metrics.jsonl in {folder}")
  return label, [r for r in plotting.read_metrics(path)
                 if r.get("complete") and "val_accuracy" in r]


def with_minutes(records):
  """The records with ``minutes``: training minutes up to the end of each epoch."""
  total, out = 0.0, []
  for record in records:
    total += record["seconds"] / 60
    out.append({**record, "minutes": total})
  return out


def table(runs) -> str:
  """Validation accuracy per epoch (minutes in brackets), one column per run."""
  labels = [label for label, _ in runs]
  lines = ["| epoch | " + " | ".join(labels) + " |", "|---" * (len(runs) + 1) + "|"]
  epochs = max(len(records) for _, records in runs)
  for i in range(epochs):
    cells = [f"{records[i]['val_accuracy']:.3f} ({records[i]['minutes']:.0f} min)"
             if i < len(records) else "" for _, records in runs]
    lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def plot(runs, path: Path):
  figure, (accuracy_axes, loss_axes) = plt.subplots(1, 2, figsize=(11, 4),
                                                    layout="constrained")
  for label, records in runs:
    minutes = [r["minutes"] for r in records]
    line, = accuracy_axes.plot(minutes, [r["val_accuracy"] for r in records], "o-",
                               label=f"{label}, validation")
    accuracy_axes.plot(minutes, [r["train_accuracy"] for r in records], "--",
                       color=line.get_color(), alpha=0.6, label=f"{label}, training")
    loss_axes.plot(minutes, [r["val_loss"] for r in records], "o-", color=line.get_color(),
                   label=label)
  for axes, name in ((accuracy_axes, "masked accuracy"),
                     (loss_axes, "validation loss (label-smoothed)")):
    axes.set_xlabel("training minutes")
    axes.set_ylabel(name)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
  figure.savefig(path, format="png", dpi=100)
  plt.close(figure)


def main(argv):
  del argv
  runs = [(label, with_minutes(records)) for label, records in map(parse_run, _RUNS.value)]
  output = Path(_OUTPUT.value)
  output.parent.mkdir(parents=True, exist_ok=True)
  plot(runs, output.with_suffix(".png"))
  write_text_atomically(output.with_suffix(".md"), table(runs))
  print(table(runs))


if __name__ == "__main__":
  flags.mark_flags_as_required(["run", "output"])
  cli.run(main)
