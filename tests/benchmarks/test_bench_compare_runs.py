"""lab/bench/compare_runs.py: whole runs side by side, per epoch."""

import json

import pytest

from lab.bench import compare_runs


def write_metrics(folder, records):
  folder.mkdir()
  (folder / "metrics.jsonl").write_text(
      "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
  return folder


def epoch(n, val_accuracy, seconds=60.0, complete=True):
  return {"epoch": n, "complete": complete, "seconds": seconds, "val_accuracy": val_accuracy,
          "val_loss": 5.0 - n, "train_accuracy": val_accuracy + 0.01}


def test_table_has_each_runs_accuracy_at_its_cumulative_minutes(tmp_path):
  first = write_metrics(tmp_path / "a", [epoch(1, 0.25, 120), epoch(2, 0.40, 60)])
  second = write_metrics(tmp_path / "b", [epoch(1, 0.20, 90), epoch(2, 0.35, 90),
                                          epoch(3, 0.50, 90)])
  runs = [(label, compare_runs.with_minutes(records)) for label, records in
          (compare_runs.parse_run(f"short:{first}"), compare_runs.parse_run(f"long:{second}"))]
  lines = compare_runs.table(runs).splitlines()
  assert lines[0] == "| epoch | short | long |"
  assert lines[2] == "| 1 | 0.250 (2 min) | 0.200 (2 min) |"
  assert lines[3] == "| 2 | 0.400 (3 min) | 0.350 (3 min) |"
  assert lines[4] == "| 3 |  | 0.500 (4 min) |"


def test_epochs_cut_short_are_left_out(tmp_path):
  folder = write_metrics(tmp_path / "a", [epoch(1, 0.3), epoch(2, 0.1, complete=False)])
  _, records = compare_runs.parse_run(f"run:{folder}")
  assert [r["epoch"] for r in records] == [1]


def test_plot_is_written(tmp_path):
  folder = write_metrics(tmp_path / "a", [epoch(1, 0.3), epoch(2, 0.4)])
  label, records = compare_runs.parse_run(f"run:{folder}")
  compare_runs.plot([(label, compare_runs.with_minutes(records))], tmp_path / "c.png")
  assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("spec, error", [("no-colon", ValueError), (":folder", ValueError),
                                         ("label:/nonexistent", FileNotFoundError)])
def test_bad_run_arguments_say_what_is_wrong(spec, error):
  with pytest.raises(error, match="--run"):
    compare_runs.parse_run(spec)
