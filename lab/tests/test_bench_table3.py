"""lab/bench/table3.py on a tiny base: per-arm JSON, skipping finished arms, resuming
an interrupted one, and the side-by-side table (lab/bench/table3_report.py)."""

import json
import os
from pathlib import Path
import subprocess
import sys

from absl import flags
from absl.testing import flagsaver
import keras
import numpy as np
import pytest

from lab.bench import table3
from lab.bench import table3_report
from configs import tiny
from transformer.training.tf_engine import TensorFlowEngine, TensorFlowTrainer
from transformer.run.files import RunLock

STEPS, EVAL_EVERY = 4, 2
FIELDS = ("val_perplexity", "val_accuracy", "bleu", "bleu_whole_word", "train_accuracy",
          "parameters", "steps", "train_seconds", "seed", "curve", "batches_sha256")


PAPER_SMALL_BASE = table3.base_config


def tiny_base(steps, warmup_steps, cooldown_fraction, tokens_per_batch):
  """The bench's base with configs/tiny.py's sizes, 1 + 1 layers."""
  config = PAPER_SMALL_BASE(steps, warmup_steps, cooldown_fraction, tokens_per_batch)
  sizes = tiny.get_config().model
  config.model.update(num_layers=1, d_model=sizes.d_model, dff=sizes.dff)
  return config


def small_data_dir(ted_data_dir, folder):
  """The first pairs of the TED files: the bench's steps need few, and the
  validation and BLEU passes read every validation pair."""
  folder.mkdir()
  for split, count in (("train", 400), ("dev", 24)):
    for language in ("pt", "en"):
      lines = (ted_data_dir / f"{language}.{split}").read_text(encoding="utf-8").splitlines()
      (folder / f"{language}.{split}").write_text("\n".join(lines[:count]) + "\n",
                                                 encoding="utf-8")
  return folder


@pytest.fixture
def bench(tmp_path, monkeypatch, ted_data_dir, tutorial_tokenizer_path):
  """Runs table3.main with tiny settings; returns (run(**flags), out_dir, steps run)."""
  monkeypatch.setattr(table3, "base_config", tiny_base)
  steps_run = []
  train_on_batches = TensorFlowEngine.train_on_batches

  def counting(self, dataset, max_steps=None):
    records = train_on_batches(self, dataset, max_steps)
    steps_run.append(len(records))
    return records

  monkeypatch.setattr(TensorFlowEngine, "train_on_batches", counting)
  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()
  out_dir = tmp_path / "results"
  common = dict(out_dir=str(out_dir), work_dir=str(tmp_path / "work"), steps=STEPS,
                eval_every=EVAL_EVERY, warmup_steps=2, bleu_sentences=6, train_eval_pairs=20,
                tokens_per_batch=512, threads=0,
                ted_data_dir=str(small_data_dir(ted_data_dir, tmp_path / "data")),
                tokenizer=str(tutorial_tokenizer_path))

  def run(**overrides):
    with flagsaver.flagsaver(**{**common, **overrides}):
      table3.main([])

  return run, out_dir, steps_run


def interrupt_after_first_checkpoint(monkeypatch):
  """TensorFlowTrainer.evaluate raises as a killed process would stop, after step EVAL_EVERY's
  checkpoint; returns the function that undoes it."""
  real_evaluate = TensorFlowTrainer.evaluate

  def evaluate_then_stop(self, dataset):
    if self.step > EVAL_EVERY:
      raise KeyboardInterrupt
    return real_evaluate(self, dataset)

  monkeypatch.setattr(TensorFlowTrainer, "evaluate", evaluate_then_stop)
  return lambda: monkeypatch.setattr(TensorFlowTrainer, "evaluate", real_evaluate)


@pytest.mark.slow
def test_arms_write_their_json_resume_and_are_skipped_once_done(bench, monkeypatch):
  """E_learned is interrupted after its first checkpoint; the next run trains
  base_s0 and only the remaining steps of E_learned; a third run trains nothing."""
  run, out_dir, steps_run = bench
  undo = interrupt_after_first_checkpoint(monkeypatch)
  with pytest.raises(KeyboardInterrupt):
    run(arms=["E_learned"])
  undo()
  assert not table3.result_path(out_dir, "E_learned").exists()
  first_point = json.loads((out_dir.parent / "work" / "E_learned" / "curve.jsonl")
                           .read_text().splitlines()[0])
  steps_run.clear()
  run(arms=["base_s0", "E_learned"])
  assert steps_run == [EVAL_EVERY, EVAL_EVERY, EVAL_EVERY]  # base 2 chunks, E_learned 1
  records = {name: json.loads(table3.result_path(out_dir, name).read_text())
             for name in ("base_s0", "E_learned")}
  for record in records.values():
    assert all(field in record for field in FIELDS)
    assert record["steps"] == STEPS and [p["step"] for p in record["curve"]] == [2, 4]
    assert 1 < record["val_perplexity"] < 10_000 and 0 <= record["bleu"] <= 100
    assert record["bleu_sentences"] == 6
  assert records["E_learned"]["curve"][0] == first_point  # kept from before the interruption
  assert records["E_learned"]["config"]["model"]["positional_encoding"] == "learned"
  assert records["E_learned"]["parameters"] > records["base_s0"]["parameters"]
  # Identical batches for every arm.
  assert records["E_learned"]["batches_sha256"] == records["base_s0"]["batches_sha256"]
  mtime = table3.result_path(out_dir, "base_s0").stat().st_mtime_ns
  run(arms=["base_s0", "E_learned"])
  assert len(steps_run) == 3  # nothing trained again
  assert table3.result_path(out_dir, "base_s0").stat().st_mtime_ns == mtime


def test_an_arm_another_process_holds_or_finished_is_passed_over(bench, tmp_path, capsys):
  """Processes on the same --arms share them: an arm whose lock is held is left
  to its holder, one finished meanwhile is not trained again."""
  run, out_dir, steps_run = bench
  work_dir = tmp_path / "work"
  (work_dir / "E_learned").mkdir(parents=True)
  holder = RunLock(work_dir / "E_learned")
  holder.acquire()
  run(arms=["E_learned"])
  assert steps_run == [] and not table3.result_path(out_dir, "E_learned").exists()
  assert f"E_learned: passed over, PID {os.getpid()} is training it" in capsys.readouterr().out
  holder.release()
  table3.write_json(table3.result_path(out_dir, "E_learned"), {"arm": "E_learned"})
  assert table3.claim_arm("E_learned", out_dir, work_dir) is None
  table3.result_path(out_dir, "E_learned").unlink()
  lock = table3.claim_arm("E_learned", out_dir, work_dir)
  assert lock is not None
  lock.release()


def test_shards_split_the_arms_without_overlap():
  names = list(table3.ARMS)
  shards = [table3.select_arms(names, f"{k}/2") for k in range(2)]
  assert sorted(shards[0] + shards[1]) == sorted(names) and not set(shards[0]) & set(shards[1])
  with pytest.raises(SystemExit, match="unknown arm"):
    table3.select_arms(["Z_nothing"], "0/1")


def test_the_run_order_runs_every_arm_once_and_covers_each_row_first():
  assert sorted(table3.RUN_ORDER) == sorted(table3.ARMS)
  first = table3.RUN_ORDER[:len(table3.FIRST_ARMS)]
  rows = [table3.ARMS[name][0] for name in first]
  assert rows.count("base") == len(table3.BASE_SEEDS)
  assert set(rows) == {"base", "A", "B", "C", "D", "E", "sqrt"}


@pytest.fixture
def paper_csv():
  if not table3.PAPER_CSV.exists():
    pytest.skip(f"the paper's table is not at {table3.PAPER_CSV}")
  return table3.PAPER_CSV


def test_every_paper_row_is_found_and_the_verdict_reads_the_spread(paper_csv):
  paper = table3_report.read_paper(paper_csv)
  found = {table3_report.paper_row(paper, row, column, value)["BLEU_dev"]
           for row, column, value, _ in table3.ARMS.values() if row != "sqrt"}
  assert len(found) > 5  # distinct rows, not the base every time
  assert table3_report.paper_row(paper, "A", "h", 1)["BLEU_dev"] == "24.9"
  assert table3_report.verdict(-0.9, -0.5, 0.2) == "same direction"
  assert table3_report.verdict(-0.9, -0.1, 0.2) == "differs: within our spread"
  assert table3_report.verdict(0.0, 0.1, 0.2) == "same direction"
  assert table3_report.verdict(0.0, 0.3, 0.2) == "differs: paper no change"
  assert table3_report.verdict(-0.9, 0.3, 0.2) == "differs: opposite"


def test_report_marks_arms_not_run(tmp_path, paper_csv):
  record = {"val_perplexity": 20.0, "bleu": 10.0, "val_accuracy": 0.5, "bleu_whole_word": 9.0,
            "train_accuracy": 0.6, "parameters": 1000}
  table3.write_json(table3.result_path(tmp_path, "base_s0"), record)
  table3.write_json(table3.result_path(tmp_path, "A_h1"),
                    {**record, "bleu": 8.0, "val_perplexity": 25.0})
  path, _ = table3_report.write_report(tmp_path, paper_csv, table3.ARMS)
  text = path.read_text()
  a_h1 = next(line for line in text.splitlines() if "`A_h1`" in line)
  # Paper: PPL 5.29 vs 4.92, BLEU 24.9 vs 25.8; ours: up 5 and down 2 (spread 0, one seed).
  assert "25.00 (+5.00)" in a_h1 and "8.00 (-2.00)" in a_h1
  assert a_h1.count("same direction") == 2
  assert "not yet run" in next(line for line in text.splitlines() if "`A_h2`" in line)


def test_the_report_command_says_one_line_and_leaves_tensorflow_out(tmp_path, paper_csv):
  """TensorFlow's start-up lines would be on stderr: the report does not load it.
  Run as the Commands section runs it, without PYTHONPATH."""
  repo = Path(__file__).resolve().parents[2]
  table3.write_json(table3.result_path(tmp_path, "base_s0"), {
      "val_perplexity": 20.0, "bleu": 10.0, "val_accuracy": 0.5, "bleu_whole_word": 9.0,
      "train_accuracy": 0.6, "parameters": 1000})
  result = subprocess.run(
      [sys.executable, "lab/bench/table3.py", "--report", f"--out_dir={tmp_path}",
       f"--paper_csv={paper_csv}"],
      cwd=repo, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
      capture_output=True, text=True,
      timeout=120, check=False)
  assert (result.returncode, result.stderr) == (0, "")
  assert result.stdout == f"wrote {tmp_path / 'table.md'} and {tmp_path / 'curves.png'}\n"
  assert (tmp_path / "table.md").read_text().startswith("Base: 1 of 3 seeds run.")
  assert (tmp_path / "curves.png").read_bytes().startswith(b"\x89PNG")


def test_each_panel_draws_the_base_seeds_under_its_rows_arms(tmp_path):
  def curve(*accuracies):
    return [{"step": 250 * (i + 1), "val_accuracy": a} for i, a in enumerate(accuracies)]

  results = {"base_s0": {"curve": curve(0.2, 0.4)}, "base_s2": {"curve": curve(0.3, 0.5)},
             "C_n1": {"curve": curve(0.25, 0.55)}, "C_n3": {"curve": curve(0.1, 0.3)},
             "sqrt_ratio": {"curve": curve(0.05)}}
  panels = table3_report.curve_panels(results, table3.ARMS)
  assert list(panels) == ["A", "B", "C", "D", "E", "sqrt"]
  seeds = [("base_s0", [250, 500], [0.2, 0.4]), ("base_s2", [250, 500], [0.3, 0.5])]
  assert panels["A"] == seeds  # no A arm has finished
  assert panels["C"] == seeds + [("C_n1", [250, 500], [0.25, 0.55]),
                                 ("C_n3", [250, 500], [0.1, 0.3])]
  assert panels["sqrt"] == seeds + [("sqrt_ratio", [250], [0.05])]
  path = table3_report.write_curves(tmp_path, results, table3.ARMS)
  assert path == tmp_path / "curves.png" and path.read_bytes().startswith(b"\x89PNG")


def test_every_arm_changes_only_its_fields_of_the_base():
  base = table3.base_config(100, 10, 1 / 3, 2048)
  flat_base = flatten(base.to_dict())
  for name, (_, _, _, overrides) in table3.ARMS.items():
    changed = {field for field, value in flatten(table3.arm_config(name, base).to_dict()).items()
               if value != flat_base[field]}
    assert changed <= set(overrides), name
    assert changed or overrides == {"training.seed": 0}, name  # base_s0 is the base


def flatten(config_dict):
  return {f"{section}.{field}": value for section, fields in config_dict.items()
          for field, value in fields.items()}


def test_sqrt_ratio_keeps_the_scaled_bases_ratio_of_token_to_position():
  """RMS of the token part over RMS of the position part, at initialisation:
  the same in the base (× √d_model) and in sqrt_ratio (positions × d_model^-0.5),
  16 times smaller in the plain unscaled arm."""
  from transformer.model.embedding import PositionalEmbedding  # pylint: disable=g-import-not-at-top
  base = table3.base_config(100, 10, 1 / 3, 2048)

  def ratio(name):
    model = table3.arm_config(name, base).model
    keras.utils.set_random_seed(0)  # the same token embeddings in every arm
    layer = PositionalEmbedding(1000, model.d_model, max_position=model.max_position,
                                scale_embeddings=model.scale_embeddings,
                                positional_scale=model.positional_scale, dropout_rate=0.0)
    ids = np.arange(1, 129)[np.newaxis]
    total = layer(ids).numpy()[0]
    positions = layer.encode_positions(0, 128).numpy()
    return np.sqrt(np.mean((total - positions) ** 2) / np.mean(positions ** 2))

  assert ratio("sqrt_ratio") == pytest.approx(ratio("base_s0"), rel=1e-5)
  assert ratio("sqrt_uniform_unscaled_tied") == pytest.approx(ratio("base_s0") / 16, rel=1e-5)
