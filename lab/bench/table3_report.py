"""The side-by-side table of lab/bench/table3.py's arms and the paper's Table 3.

  python lab/bench/table3.py --report     # <out_dir>/table.md, curves.png

Reads ``<out_dir>/arms/*.json`` and the paper's ``table3.csv`` where it lies
(``../shared/paper``); ``arms`` is lab/bench/table3.py's ``ARMS``, {name: (paper
row, paper column, paper value, overrides)}. For each Table 3 row: the paper's perplexity and BLEU
and their difference from its base, ours and our difference from the mean of
the base seeds, and per metric "same direction" or "differs" (and how). Our difference
counts as no change when it is within the base seeds' spread (largest minus
smallest); the paper's only when it is exactly 0 (it reports one run). Arms
not run yet are listed as such. The √d_model arms, which have no paper row,
get a table of their own. ``curves.png`` draws each row's validation accuracy
against the step, over the base seeds' curves.
"""

import csv
import json
from pathlib import Path

from matplotlib.figure import Figure
import numpy as np

METRICS = ("val_perplexity", "bleu")
PAPER_METRICS = {"val_perplexity": "PPL_dev", "bleu": "BLEU_dev"}


def read_paper(path: Path):
  """The rows of table3.csv as dicts (its '#' lines are comments)."""
  lines = [line for line in path.read_text(encoding="utf-8").splitlines()
           if line and not line.startswith("#")]
  return list(csv.DictReader(lines))


def paper_row(rows, row: str, column, value):
  """The csv row of Table 3 row ``row`` whose ``column`` is ``value``."""
  for entry in rows:
    if entry["row"] == row and (column is None or float(entry[column] or "nan") == value):
      return entry
  raise KeyError(f"no row {row} with {column} = {value} in the paper's table")


def read_results(out_dir: Path):
  """{arm: record} of every finished arm."""
  return {path.stem: json.loads(path.read_text(encoding="utf-8"))
          for path in sorted((out_dir / "arms").glob("*.json"))}


def base_summary(results, arms):
  """Mean and spread (max − min) of each metric over the base seeds run so far."""
  runs = [r for name, r in results.items() if arms.get(name, ("",))[0] == "base"
          and r.get("diverged_at") is None]
  summary = {"seeds": len(runs)}
  for key in METRICS + ("val_accuracy", "bleu_whole_word"):
    values = [r[key] for r in runs]
    if values:
      summary[key] = {"mean": float(np.mean(values)), "spread": float(np.ptp(values))}
  return summary


def direction(delta: float, tolerance: float) -> int:
  """-1, 0 or 1: the sign of ``delta``, 0 within ``tolerance``."""
  return 0 if abs(delta) <= tolerance else int(np.sign(delta))


def verdict(paper_delta: float, our_delta: float, spread: float) -> str:
  """Either "same direction" or "differs" and how: a reader must tell an
  effect that reverses from one too small for our seeds to show."""
  paper, ours = direction(paper_delta, 0.0), direction(our_delta, spread)
  if paper == ours:
    return "same direction"
  if ours == 0:
    return "differs: within our spread"
  if paper == 0:
    return "differs: paper no change"
  return "differs: opposite"


def _ours(record, key, base):
  """'value (Δ)' of one of our metrics, and Δ (None when not available)."""
  if record is None or key not in record or key not in base:
    return "not yet run" if record is None else "—", None
  delta = record[key] - base[key]["mean"]
  return f"{record[key]:.2f} ({delta:+.2f})", delta


def table3_rows(results, paper, base, arms):
  """Markdown lines of the rows that have a paper row."""
  paper_base = paper_row(paper, "base", None, None)
  lines = ["| row | paper's change | paper PPL (Δ) | paper BLEU (Δ) | our arm | our PPL (Δ) "
           "| our BLEU (Δ) | PPL | BLEU | train − val acc. | parameters |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for name, (row, column, value, overrides) in arms.items():
    if row in ("base", "sqrt"):
      continue
    entry = paper_row(paper, row, column, value)
    record = results.get(name)
    cells = [row, entry["note"] or f"{column} = {entry[column]}"]
    verdicts = []
    for key in METRICS:
      theirs = float(entry[PAPER_METRICS[key]])
      paper_delta = theirs - float(paper_base[PAPER_METRICS[key]])
      cells.append(f"{theirs:.2f} ({paper_delta:+.2f})")
      verdicts.append(paper_delta)
    cells.append(f"`{name}` ({', '.join(f'{k}={v}' for k, v in overrides.items())})")
    for i, key in enumerate(METRICS):
      text, delta = _ours(record, key, base)
      cells.append(text)
      verdicts[i] = (verdict(verdicts[i], delta, base[key]["spread"])
                     if delta is not None else "")
    cells += verdicts
    cells.append(f"{record['train_accuracy'] - record['val_accuracy']:+.3f}"
                 if record and "train_accuracy" in record else "")
    cells.append(f"{record['parameters']:,}" if record else "")
    lines.append("| " + " | ".join(cells) + " |")
  return lines


def sqrt_rows(results, base, arms):
  """Markdown lines of the √d_model arms (ours only)."""
  lines = ["| arm | overrides | PPL (Δ) | BLEU (Δ) | whole-word BLEU | val. acc. |",
           "|---|---|---|---|---|---|"]
  for name, (row, _, _, overrides) in arms.items():
    if row != "sqrt":
      continue
    record = results.get(name)
    cells = [f"`{name}`", ", ".join(f"{k}={v}" for k, v in overrides.items())]
    cells += [_ours(record, key, base)[0] for key in METRICS]
    cells += [f"{record[key]:.2f}" if record and key in record else ""
              for key in ("bleu_whole_word", "val_accuracy")]
    lines.append("| " + " | ".join(cells) + " |")
  return lines


def markdown(results, paper, arms):
  """The whole table page: base, Table 3 rows, √d_model arms."""
  base = base_summary(results, arms)
  lines = [f"Base: {base['seeds']} of {sum(1 for a in arms.values() if a[0] == 'base')} "
           "seeds run."]
  for key in METRICS + ("val_accuracy", "bleu_whole_word"):
    if key in base:
      lines.append(f"- {key}: mean {base[key]['mean']:.3f}, spread (max − min) "
                   f"{base[key]['spread']:.3f}")
  if not base["seeds"]:
    return "\n".join(lines + ["", "No arm has run yet: the base is needed for every Δ."]) + "\n"
  lines += ["", "Δ: against the paper's base (paper) or the mean of our base seeds (ours). "
            "A Δ of ours within the base seeds' spread counts as no change.", ""]
  lines += table3_rows(results, paper, base, arms)
  lines += ["", "√d_model arms (no paper row):", ""]
  lines += sqrt_rows(results, base, arms)
  return "\n".join(lines) + "\n"


PANELS = {"A": "A: heads at equal computation", "B": "B: key and value width",
          "C": "C: depth and width", "D": "D: dropout and label smoothing",
          "E": "E: learned positions", "sqrt": "√d_model arms"}


def curve_panels(results, arms):
  """{panel: [(arm, steps, validation accuracies)]}: every panel the base seeds'
  curves first, then its row's finished arms, in ``arms``' order."""
  def curve(name):
    points = results[name].get("curve", [])
    return name, [p["step"] for p in points], [p["val_accuracy"] for p in points]

  seeds = [curve(name) for name, arm in arms.items() if arm[0] == "base" and name in results]
  return {row: seeds + [curve(name) for name, arm in arms.items()
                        if arm[0] == row and name in results]
          for row in PANELS}


def write_curves(out_dir: Path, results, arms) -> Path:
  """curves.png: one panel per row, the base seeds in grey beneath the arms."""
  figure = Figure(figsize=(15, 8.5), layout="constrained")
  axes = figure.subplots(2, 3, sharex=True, sharey=True).ravel()
  for ax, (row, series) in zip(axes, curve_panels(results, arms).items()):
    for i, (name, steps, accuracy) in enumerate(series):
      if arms[name][0] == "base":  # one legend entry for all seeds
        ax.plot(steps, accuracy, color="0.6", linestyle="--",
                label="base seeds" if i == 0 else "_nolegend_")
      else:
        ax.plot(steps, accuracy, marker=".", label=name)
    ax.set_title(PANELS[row])
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
  for ax in axes[3:]:
    ax.set_xlabel("step")
  for ax in axes[::3]:
    ax.set_ylabel("validation accuracy")
  path = out_dir / "curves.png"
  figure.savefig(path, dpi=80)
  return path


def write_report(out_dir: Path, paper_csv: Path, arms):
  """table.md and curves.png in ``out_dir``; returns their paths."""
  out_dir.mkdir(parents=True, exist_ok=True)
  results = read_results(out_dir)
  table = out_dir / "table.md"
  table.write_text(markdown(results, read_paper(paper_csv), arms), encoding="utf-8")
  return table, write_curves(out_dir, results, arms)
