"""The README's commands in order, as a user runs them, on the tiny configuration:
train.py, then evaluate.py averaging its last checkpoints into an export, then
translate.py on that export, then lab/bench/run_report.py gathering it all into a
results folder. Each step reads the previous one's real output."""

import json
import os
from pathlib import Path
import re
import subprocess
import sys

import pytest

# Trains, exports, translates and evaluates with the scripts.
pytestmark = pytest.mark.slow

REPO_DIR = Path(__file__).resolve().parents[2]
TEST_PAIRS = 12  # test sentences evaluated and translated


def run(script, *args, stdin=None):
  # Without TF_CPP_MIN_LOG_LEVEL, as a user's shell: importing TensorFlow in
  # this process (transformer.data.ted below) sets it to 1 in os.environ, which
  # would let TensorFlow's C++ ERROR lines through the scripts' default of 3.
  env = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  result = subprocess.run([sys.executable, script, *args], cwd=REPO_DIR, env=env, input=stdin,
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, f"{script} failed:\n{result.stderr[-3000:]}"
  return result


def test_train_then_evaluate_averaged_then_translate(tmp_path, ted_data_dir,
                                                     tutorial_tokenizer_path):
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "run"
  # 30 steps on 160 pairs (10 batches of 16 per epoch); a checkpoint and the
  # TensorBoard training scalars every 10.
  run("train.py", "--config=configs/tiny.py", f"--model_dir={model_dir}",
      f"--data={ted_data_dir}", f"--tokenizer={tutorial_tokenizer_path}",
      "--train_examples=160", "--validation_examples=16", "--bleu_examples=4",
      "--bleu_method=greedy", "--config.training.train_steps=30",
      "--config.training.checkpoint_every_steps=10", "--log_every_steps=10")
  state = (model_dir / "checkpoints" / "checkpoint").read_text()
  assert all(f'"ckpt-{step}"' in state for step in (10, 20, 30)), state

  # A few test pairs in a data folder of their own (the split's first lines).
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  for language in ("pt", "en"):
    lines = (ted_data_dir / f"{language}.test").read_text(encoding="utf-8").splitlines()
    (data_dir / f"{language}.test").write_text(
        "".join(line + "\n" for line in lines[:TEST_PAIRS]), encoding="utf-8")
  averaged = tmp_path / "averaged"
  # Batches of one sentence: no padding, so the export and the in-memory model
  # compute exactly the same thing below.
  evaluated = run("evaluate.py", f"--model_dir={model_dir}", "--split=test", "--method=greedy",
                  "--average_last=3", f"--export_dir={averaged}", f"--data={data_dir}",
                  "--batch_size=1")
  # TensorFlow's logs stay hidden without --verbose: stderr is evaluate.py's progress.
  assert all(line.endswith(" ...") or re.search(r": took \d+\.\d s$", line)
             for line in evaluated.stderr.splitlines()), evaluated.stderr
  record = json.loads(evaluated.stdout)
  assert [Path(p).name for p in record["checkpoints"]] == ["ckpt-10", "ckpt-20", "ckpt-30"]
  assert record["num_sentences"] == TEST_PAIRS and record["split"] == "test"
  hypotheses = Path(record["hypotheses_file"]).read_text(encoding="utf-8").splitlines()
  assert len(hypotheses) == TEST_PAIRS and all(h.strip() for h in hypotheses)

  # translate.py on the averaged export gives the hypotheses evaluate.py scored
  # (which are in the split's TFDS order).
  sources = [source for source, _ in ted.local_split_pairs(data_dir, "test")]
  translated = run("translate.py", f"--export_dir={averaged}", "--method=greedy",
                   "--batch_size=1", "-", stdin="".join(s + "\n" for s in sources))
  assert translated.stdout.splitlines() == hypotheses

  # lab/bench/run_report.py gathers the run into a results folder: what it copies
  # is the run's own output, and what it derives (tables, samples, plots)
  # comes from it.
  results = tmp_path / "results"
  run("lab/bench/run_report.py", f"--model_dir={model_dir}", f"--results_dir={results}",
      f"--translator={averaged}", f"--data_dir={data_dir}", f"--samples={TEST_PAIRS}")
  assert (results / "metrics.jsonl").read_bytes() == (model_dir / "metrics.jsonl").read_bytes()
  logged = [json.loads(line) for line in
            (results / "train_steps.jsonl").read_text(encoding="utf-8").splitlines()]
  assert [entry["step"] for entry in logged] == [10, 20, 30]
  assert all({"loss", "accuracy"} <= entry.keys() for entry in logged), logged[0]
  copied = json.loads((results / "bleu" / "test.greedy.json").read_text(encoding="utf-8"))
  assert copied["bleu"] == record["bleu"]
  assert copied["hypotheses_file"] == Path(record["hypotheses_file"]).name
  table = (results / "bleu.md").read_text(encoding="utf-8")
  assert f"| test | greedy | average of 3 (10, 20, 30) | {record['bleu']:.2f} |" in table
  shown = (results / "samples.md").read_text(encoding="utf-8")
  references = [reference for _, reference in ted.local_split_pairs(data_dir, "test")]
  for i, (reference, hypothesis) in enumerate(zip(references, hypotheses)):
    assert f"{i + 1}. **pt:** {sources[i]}" in shown
    assert f"**reference:** {reference}" in shown and f"**greedy:** {hypothesis}" in shown
  for name in ("training_curves", "training_steps", "attention_short", "attention_long"):
    assert (results / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
  assert "cpu" in json.loads((results / "machine.json").read_text(encoding="utf-8"))

  # lab/bench/averaged_curve.py: one checkpoint "averaged" is the epoch's own
  # weights, so it gives the validation accuracy train.py logged for the epoch;
  # three are the last epoch's window of the average evaluate.py scored.
  epochs = [record for record in map(json.loads, (model_dir / "metrics.jsonl").read_text(
      encoding="utf-8").splitlines()) if "train_loss" in record]  # not the final BLEU line
  assert len(epochs) == 3
  for average in (1, 3):
    curve_file = tmp_path / f"curve{average}.jsonl"
    run("lab/bench/averaged_curve.py", f"--model_dir={model_dir}", f"--output={curve_file}",
        f"--average={average}", f"--data_dir={ted_data_dir}", "--validation_pairs=16",
        f"--plot={tmp_path / 'curve.png'}", "--target=0.5", "--budget_minutes=1")
    curve = [json.loads(line) for line in
             curve_file.read_text(encoding="utf-8").splitlines()]
    if average == 1:
      assert [point["step"] for point in curve] == [epoch["step"] for epoch in epochs]
      for point, epoch in zip(curve, epochs):
        assert abs(point["val_accuracy"] - epoch["val_accuracy"]) < 1e-6, (point, epoch)
    else:
      assert [(point["epoch"], point["checkpoints"]) for point in curve] == [
          (3, ["ckpt-10", "ckpt-20", "ckpt-30"])]
      assert curve[0]["training_minutes"] == pytest.approx(
          sum(epoch["seconds"] for epoch in epochs) / 60)
  assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  # --epochs keeps only the epochs asked for.
  run("lab/bench/averaged_curve.py", f"--model_dir={model_dir}", f"--output={tmp_path / 'only2.jsonl'}",
      "--average=2", "--epochs=2", f"--data_dir={ted_data_dir}", "--validation_pairs=16")
  only = [json.loads(line) for line in
          (tmp_path / "only2.jsonl").read_text(encoding="utf-8").splitlines()]
  assert [(point["epoch"], point["checkpoints"]) for point in only] == [(2, ["ckpt-10", "ckpt-20"])]
