r"""The paper's Table 3 and the √d_model hypotheses on Portuguese→English (issue #34).

  taskset -c 0 nice python lab/bench/table3.py --shard=0/2
  taskset -c 1 nice python lab/bench/table3.py --shard=1/2
  python lab/bench/table3.py --report        # lab/results/table3/table.md, curves.png

Successor of ``lab/bench/scaling_ablation.py``: one row per arm, every arm a small
paper-style base with one change, trained from the same seed on the SAME
batches in the same order (:mod:`bench.fixed_batches`, the tutorial's
tokenizer) for the same ``--steps``. The base runs from 3 seeds, which
measures the seed-to-seed spread each arm's difference is read against.

The base: 2 + 2 layers, d_model 256, 4 heads (d_k = d_v = 64, the paper's),
d_ff 1024 (4 d_model, the paper's ratio), the model of ``configs/cpu_2h.py``,
chosen there as the best one to train in 2 hours on 2 cores; otherwise the
paper's choices: residual dropout 0.1, label smoothing 0.1, tied target
embedding and output, Keras' uniform embedding initializer (the project's
default), the §5.3 schedule (``--warmup_steps``), here with the rate falling
linearly to zero over the last ``--cooldown_fraction`` of the steps (a fixed
budget, as ``configs/cpu_2h.py``). Batches of 2,048 tokens a side (about 650
steps an epoch) as ``configs/cpu_2h.py``'s; the default 2,000 steps (about 3
epochs) and 500 warm-up steps take the base past the plateau near 0.26
validation accuracy where 1,000 steps leave every arm
(lab/results/table3/README.md, "Budget"). ``model.max_position`` is 256: the learned
table of row E then holds every position a 128-token sentence and its output
(+50) can reach, not 2,048 mostly untrained rows.

Table 3's rows mapped to the small base in proportion (paper base: N 6,
d_model 512, h 8, d_k 64, d_ff 2048, P_drop 0.1, ε_ls 0.1):

======  ============================  ==============================  ====================
row     paper                         ours                            arm
======  ============================  ==============================  ====================
base    as above, 3 seeds here        2, 256, 4, 64, 1024, 0.1, 0.1    base_s0/s1/s2
A       h 1, d_k = d_v 512            h 1, d_k 256                    A_h1
A       h 4, d_k 128                  h 2, d_k 128                    A_h2
A       h 16, d_k 32                  h 8, d_k 32                     A_h8
A       h 32, d_k 16                  h 16, d_k 16                    A_h16
B       d_k 16 (d_v 64)               d_k = d_v 16 (*)                B_dk16
B       d_k 32 (d_v 64)               d_k = d_v 32 (*)                B_dk32
C       N 2 (of 6)                    N 1 (of 2)                      C_n1
C       N 4, N 8                      N 3 (4 and 8 lie either side)   C_n3
C       d_model 256, d_k 32           d_model 128, d_k 32             C_d128
C       d_model 1024, d_k 128         d_model 512, d_k 128            C_d512
C       d_ff 1024                     d_ff 512                        C_ff512
C       d_ff 4096                     d_ff 2048                       C_ff2048
D       P_drop 0.0, 0.2               0.0, 0.2                        D_drop0, D_drop02
D       ε_ls 0.0, 0.2                 0.0, 0.2                        D_ls0, D_ls02
E       learned positional embedding  learned (max_position × d_model) E_learned
======  ============================  ==============================  ====================

(*) ``model.key_dim`` sets the query, key and value width together: the
paper's row B keeps d_v = 64, ours shrinks d_v with d_k, so the attention's
output is narrower too (a stronger change than the paper's).

The √d_model arms (notebooks/scaling.ipynb; no paper row): initializer
{``uniform`` (Keras' U(±0.05)), ``normal`` (N(0, d_model^-0.5))} × {scaled,
unscaled} × {tied, untied output}, named ``sqrt_<init>_<scaled|unscaled>_<tied|untied>``;
uniform, scaled, tied is the base itself and is not run again. Answer (3)
("× √d_model keeps the positional encoding from drowning the word") is
isolated by ``sqrt_ratio``: no × √d_model, and the sinusoids × d_model^-0.5
instead (``model.positional_scale``), so that token and position stand in the
scaled base's ratio at the unscaled magnitude.

Per arm, ``<out_dir>/arms/<arm>.json``: validation perplexity per wordpiece
(exp of the cross-entropy without label smoothing, teacher-forced), validation
accuracy, BLEU with beam 4 and α 0.6 (both scorings of
:func:`transformer.inference.evaluation.evaluate_bleu`) on the first ``--bleu_sentences``
validation pairs (0: all 1,193), training accuracy at the end (no dropout, on
the first ``--train_eval_pairs`` training pairs of the fixed order), trainable
parameters, steps, training seconds, seed, the curve (every ``--eval_every``
steps: validation loss and accuracy, training loss and accuracy with dropout
since the last point), the batches' SHA-256 and the machine's load.

Resumable: an arm whose JSON exists is skipped; an interrupted arm resumes
from its checkpoint in ``<work_dir>/<arm>/`` (written every ``--eval_every``
steps; its dropout masks after the resume differ from an uninterrupted run's).
A non-finite training loss ends the arm and is recorded (``diverged_at``).
``--arms`` runs the arms named, ``--shard=k/n`` every n-th arm from the k-th, so
that one process per core splits them. A process holds the lock of the arm it
trains (``<work_dir>/<arm>/train.lock``, as ``train.py`` does) and passes over
an arm another process holds, so processes started on the same ``--arms`` share
them as a queue: each takes the next arm nobody has.
"""

import json
import math
from pathlib import Path
import shutil
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from lab.bench import machine  # pylint: disable=g-import-not-at-top,wrong-import-position

PAPER_CSV = machine.SHARED_DATA.parent / "paper" / "table3.csv"
BASE_SEEDS = (0, 1, 2)


def _arms():
  """{name: (paper row, paper column, paper value, config overrides)}; the paper's
  column and value find the row of table3.csv (None: no paper row)."""
  arms = {f"base_s{seed}": ("base", None, None, {"training.seed": seed})
          for seed in BASE_SEEDS}
  for heads, paper in ((1, 1), (2, 4), (8, 16), (16, 32)):
    arms[f"A_h{heads}"] = ("A", "h", paper, {"model.num_heads": heads})
  for d_k in (16, 32):
    arms[f"B_dk{d_k}"] = ("B", "d_k", d_k, {"model.key_dim": d_k})
  arms["C_n1"] = ("C", "N", 2, {"model.num_layers": 1})
  arms["C_n3"] = ("C", "N", 8, {"model.num_layers": 3})
  arms["C_d512"] = ("C", "d_model", 1024, {"model.d_model": 512})
  arms["C_d128"] = ("C", "d_model", 256, {"model.d_model": 128})
  arms["C_ff512"] = ("C", "d_ff", 1024, {"model.dff": 512})
  arms["C_ff2048"] = ("C", "d_ff", 4096, {"model.dff": 2048})
  for name, value in (("0", 0.0), ("02", 0.2)):
    arms[f"D_drop{name}"] = ("D", "P_drop", value, {"model.dropout_rate": value})
    arms[f"D_ls{name}"] = ("D", "eps_ls", value, {"training.label_smoothing": value})
  arms["E_learned"] = ("E", None, None, {"model.positional_encoding": "learned"})
  for init in ("uniform", "normal"):
    for scaled in (True, False):
      for output in ("tied", "untied"):
        if (init, scaled, output) != ("uniform", True, "tied"):  # the base
          name = f"sqrt_{init}_{'scaled' if scaled else 'unscaled'}_{output}"
          arms[name] = ("sqrt", None, None, {"model.embedding_initializer": init,
                                             "model.scale_embeddings": scaled,
                                             "model.output_weights": output})
  arms["sqrt_ratio"] = ("sqrt", None, None, {"model.scale_embeddings": False,
                                             "model.positional_scale": 256 ** -0.5})
  return arms


ARMS = _arms()
# The base seeds and an arm of every row first, so that a run cut short
# already covers each row; then the rest. A_h16 and A_h8 come early: they tell
# whether B_dk16's lead over the base (lab/results/table3/README.md) comes from
# the heads' width or from fewer parameters. The untied √d_model arms before
# the rest of the rows: answer (1), tying, needs them.
FIRST_ARMS = ("base_s0", "base_s1", "base_s2", "A_h1", "B_dk16", "C_n1", "D_drop0", "E_learned",
              "A_h16", "sqrt_uniform_unscaled_tied", "A_h8", "sqrt_normal_scaled_tied",
              "D_ls0", "sqrt_normal_unscaled_tied", "sqrt_ratio", "sqrt_uniform_unscaled_untied",
              "sqrt_uniform_scaled_untied", "sqrt_normal_unscaled_untied",
              "sqrt_normal_scaled_untied")
RUN_ORDER = FIRST_ARMS + tuple(name for name in ARMS if name not in FIRST_ARMS)

_OUT_DIR = flags.DEFINE_string("out_dir", "lab/results/table3", "Per-arm JSON and the table.")
_WORK_DIR = flags.DEFINE_string("work_dir", "runs/table3",
                                "Checkpoints and partial curves of unfinished arms.")
_ARMS = flags.DEFINE_list("arms", list(RUN_ORDER), "Arms to run, in this order.")
_SHARD = flags.DEFINE_string("shard", "0/1", "k/n: run every n-th of --arms from the k-th.")
_STEPS = flags.DEFINE_integer("steps", 2000, "Optimizer steps per arm.")
_WARMUP = flags.DEFINE_integer("warmup_steps", 500, "§5.3 warm-up steps.")
_COOLDOWN = flags.DEFINE_float("cooldown_fraction", 1 / 3,
                               "Share of the steps over which the rate falls to zero.")
_TOKENS_PER_BATCH = flags.DEFINE_integer("tokens_per_batch", 2048,
                                         "Token budget per batch and side (§5.1).")
_EVAL_EVERY = flags.DEFINE_integer("eval_every", 250, "Steps between curve points and "
                                   "checkpoints.")
_BLEU_SENTENCES = flags.DEFINE_integer("bleu_sentences", 0,
                                       "Validation pairs translated for BLEU; 0: all.")
_TRAIN_EVAL_PAIRS = flags.DEFINE_integer("train_eval_pairs", 1193,
                                         "Training pairs the final training accuracy reads.")
_THREADS = flags.DEFINE_integer("threads", 1, "TensorFlow threads (1: one core per process; "
                                 "0: TensorFlow's own choice).")
_KEEP_CHECKPOINTS = flags.DEFINE_bool("keep_checkpoints", False,
                                      "Keep an arm's checkpoint once its JSON is written.")
_DATA_DIR = flags.DEFINE_string("ted_data_dir", str(machine.SHARED_DATA / "ted_hrlr_pt_to_en"),
                                "Folder with the TED HRLR files.")
_TOKENIZER = flags.DEFINE_string("tokenizer", str(machine.SHARED_DATA / "tutorial_tokenizer"),
                                 "Tokenizer SavedModel.")
_REPORT = flags.DEFINE_bool("report", False, "Only write <out_dir>/table.md and curves.png "
                            "from the JSONs.")
_PAPER_CSV = flags.DEFINE_string("paper_csv", str(PAPER_CSV), "The paper's Table 3.")


def base_config(steps: int, warmup_steps: int, cooldown_fraction: float,
                tokens_per_batch: int):
  """The small paper-style base (module docstring)."""
  from transformer.config import default_config  # pylint: disable=g-import-not-at-top
  config = default_config()
  config.model.update(num_layers=2, d_model=256, num_heads=4, dff=1024, max_position=256)
  config.data.tokens_per_batch = tokens_per_batch
  config.training.update(warmup_steps=warmup_steps, train_steps=steps, keep_checkpoints=1,
                         cooldown_steps=int(steps * cooldown_fraction),
                         cooldown_end_step=steps if cooldown_fraction else 0)
  return config


def arm_config(name: str, base):
  """``base`` with the arm's overrides, validated."""
  from transformer.config import validate_config  # pylint: disable=g-import-not-at-top
  config = base.copy_and_resolve_references()
  for field, value in ARMS[name][3].items():
    section, key = field.split(".")
    config[section][key] = value
  return validate_config(config)


def select_arms(names, shard: str):
  """The arms of ``names`` this process runs (``shard`` "k/n")."""
  unknown = [name for name in names if name not in ARMS]
  if unknown:
    raise SystemExit(f"unknown arm(s) {', '.join(unknown)}; choose from {', '.join(ARMS)}")
  k, n = (int(part) for part in shard.split("/"))
  if not 0 <= k < n:
    raise SystemExit(f"--shard={shard}: need k/n with 0 <= k < n")
  return list(names)[k::n]


def result_path(out_dir: Path, name: str) -> Path:
  return out_dir / "arms" / f"{name}.json"


def write_json(path: Path, record) -> None:
  """Atomically: a reader never sees half a file, and a file is a finished arm."""
  path.parent.mkdir(parents=True, exist_ok=True)
  scratch = path.with_suffix(".tmp")
  scratch.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
  scratch.replace(path)


def read_curve(path: Path, up_to_step: int):
  """The curve points an interrupted arm wrote, up to its checkpoint's step."""
  if not path.exists():
    return []
  points = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
  return [p for p in points if p["step"] <= up_to_step]


def chunk_point(records, step: int, seconds: float, cpu_seconds: float):
  """Training loss and accuracy (dropout on) over one chunk's step records."""
  tokens = sum(r["tokens"] for r in records)
  return {"step": step, "seconds": seconds, "cpu_seconds": cpu_seconds,
          "train_loss": sum(r["loss"] * r["tokens"] for r in records) / tokens,
          "train_accuracy": sum(r["correct"] for r in records) / tokens}


def train_arm(trainer, train, validation, steps: int, eval_every: int, curve_path: Path):
  """Trains to ``steps`` from the trainer's checkpoint; returns (curve, seconds,
  CPU seconds, diverged_at). Each curve point is written before the checkpoint
  of its step. CPU seconds (all threads) are the cost on a shared machine."""
  start = trainer.restore()
  curve = read_curve(curve_path, start)
  seconds, cpu_seconds = (curve[-1]["seconds"], curve[-1]["cpu_seconds"]) if curve else (0, 0)
  curve_path.write_text("".join(json.dumps(p) + "\n" for p in curve), encoding="utf-8")
  for chunk_start in range(start, steps, eval_every):
    began, began_cpu = time.perf_counter(), time.process_time()
    records = trainer.engine.train_on_batches(train.skip(chunk_start).take(eval_every))
    seconds += time.perf_counter() - began
    cpu_seconds += time.process_time() - began_cpu
    bad = [i for i, r in enumerate(records) if not math.isfinite(r["loss"])]
    if bad:
      return curve, seconds, cpu_seconds, chunk_start + bad[0] + 1
    point = {**chunk_point(records, trainer.step, seconds, cpu_seconds),
             **{f"val_{k}": v for k, v in trainer.evaluate(validation).items() if k != "tokens"},
             "learning_rate": trainer.learning_rate}
    curve.append(point)
    with open(curve_path, "a", encoding="utf-8") as f:
      f.write(json.dumps(point) + "\n")
    trainer.save_checkpoint()
    print(f"step {point['step']}: val accuracy {point['val_accuracy']:.3f}, train accuracy "
          f"{point['train_accuracy']:.3f} ({seconds / point['step']:.2f} s/step, "
          f"{cpu_seconds / point['step']:.2f} CPU s/step)", flush=True)
  return curve, seconds, cpu_seconds, None


def final_metrics(trainer, config, tokenizers, pairs, bleu_dir: Path):
  """Perplexity and accuracy without label smoothing, training accuracy, beam BLEU;
  ``pairs``: {"validation", "train" (for the accuracy), "bleu"}."""
  from transformer.inference import evaluation  # pylint: disable=g-import-not-at-top
  from transformer.inference.export import Translator  # pylint: disable=g-import-not-at-top
  unsmoothed = config.copy_and_resolve_references()
  unsmoothed.training.label_smoothing = 0.0
  val, train = (evaluation.teacher_forced_metrics(
                    trainer.model, evaluation.tokenized(tokenizers, pairs[split]), unsmoothed)
                for split in ("validation", "train"))
  translator = Translator(tokenizers, trainer.model, config.decoding)
  began = time.perf_counter()
  bleu = evaluation.evaluate_bleu(
      evaluation.translator_batch_fn(translator, "beam"), pairs["bleu"], bleu_dir,
      "validation", "beam", reference_tokenizer=tokenizers.en)
  return {"val_perplexity": math.exp(val["loss"]), "val_accuracy": val["accuracy"],
          "train_accuracy": train["accuracy"], "train_perplexity": math.exp(train["loss"]),
          "bleu": bleu["bleu"], "bleu_whole_word": bleu["whole_word"]["bleu"],
          "bleu_signature": bleu["signature"],
          "bleu_whole_word_signature": bleu["whole_word"]["signature"],
          "bleu_sentences": bleu["num_sentences"], "bleu_beam_size": config.decoding.beam_size,
          "bleu_length_penalty": config.decoding.length_penalty,
          "bleu_seconds": time.perf_counter() - began}


def run_arm(name, base, tokenizers, batches, out_dir: Path, work_dir: Path):
  """Trains and scores one arm; writes its JSON."""
  from transformer.data.tokenizers import vocab_sizes  # pylint: disable=g-import-not-at-top
  from transformer.training.tf_engine import TensorFlowTrainer  # pylint: disable=g-import-not-at-top
  train, validation, pairs, sha256 = batches
  config = arm_config(name, base)
  arm_dir = work_dir / name  # made by claim_arm
  input_vocab, target_vocab = vocab_sizes(tokenizers)
  trainer = TensorFlowTrainer(config, input_vocab_size=input_vocab, target_vocab_size=target_vocab,
                    model_dir=arm_dir, progress=False)
  activity_before = machine.other_activity()
  curve, seconds, cpu_seconds, diverged_at = train_arm(
      trainer, train, validation, config.training.train_steps, _EVAL_EVERY.value,
      arm_dir / "curve.jsonl")
  row, column, value, overrides = ARMS[name]
  record = {"arm": name, "paper_row": row, "paper_column": column, "paper_value": value,
            "overrides": overrides, "seed": config.training.seed, "steps": trainer.step,
            "train_seconds": seconds, "train_cpu_seconds": cpu_seconds,
            "diverged_at": diverged_at,
            "parameters": sum(int(v.shape.num_elements())
                              for v in trainer.model.trainable_variables),
            "batches_sha256": sha256, "config": config.to_dict(), "curve": curve,
            "machine": machine.description(), "activity_before": activity_before}
  if diverged_at is None:
    record.update(final_metrics(trainer, config, tokenizers, pairs, arm_dir / "bleu"))
  record["activity_after"] = machine.other_activity()
  write_json(result_path(out_dir, name), record)
  if not _KEEP_CHECKPOINTS.value:
    shutil.rmtree(arm_dir / "checkpoints", ignore_errors=True)
  return record


def claim_arm(name: str, out_dir: Path, work_dir: Path):
  """The arm's held :class:`RunLock`, or None when another process trains the arm
  or finished it after this one listed its arms."""
  from transformer.run import files  # pylint: disable=g-import-not-at-top
  arm_dir = work_dir / name
  arm_dir.mkdir(parents=True, exist_ok=True)
  lock = files.RunLock(arm_dir)
  try:
    lock.acquire()
  except files.RunLockedError as e:
    print(f"--- {name}: passed over, PID {e.holder} is training it", flush=True)
    return None
  if result_path(out_dir, name).exists():
    lock.release()
    return None
  return lock


def prepare(base, steps: int):
  """Tokenizers and every arm's data: (training batches, validation batches,
  the pairs :func:`final_metrics` reads, the training batches' SHA-256)."""
  # Here, not at the top: they import TensorFlow, which --report does without.
  from lab.bench.fixed_batches import fingerprint, make_batches, shuffled_train_pairs  # pylint: disable=g-import-not-at-top
  from transformer.data.tokenizers import load_tokenizers  # pylint: disable=g-import-not-at-top
  tokenizers = load_tokenizers(_TOKENIZER.value)
  train, validation, validation_pairs = make_batches(
      _DATA_DIR.value, tokenizers, steps, base.data.tokens_per_batch, base.data.max_tokens)
  pairs = {"validation": validation_pairs,
           "train": shuffled_train_pairs(_DATA_DIR.value)[:_TRAIN_EVAL_PAIRS.value],
           "bleu": validation_pairs[:_BLEU_SENTENCES.value or None]}
  return tokenizers, (train, validation, pairs, fingerprint(train))


def main(argv):
  del argv
  out_dir = Path(_OUT_DIR.value)
  if _REPORT.value:
    from lab.bench import table3_report  # pylint: disable=g-import-not-at-top
    paths = table3_report.write_report(out_dir, Path(_PAPER_CSV.value), ARMS)
    print(f"wrote {' and '.join(str(path) for path in paths)}")
    return
  todo = [name for name in select_arms(_ARMS.value, _SHARD.value)
          if not result_path(out_dir, name).exists()]
  print(f"arms to run: {', '.join(todo) or 'none'}", flush=True)
  if not todo:
    return
  if _THREADS.value:
    machine.set_threads(_THREADS.value)
  base = base_config(_STEPS.value, _WARMUP.value, _COOLDOWN.value, _TOKENS_PER_BATCH.value)
  tokenizers, batches = prepare(base, _STEPS.value)
  for name in todo:
    lock = claim_arm(name, out_dir, Path(_WORK_DIR.value))
    if lock is None:
      continue
    print(f"--- {name}", flush=True)
    try:
      run_arm(name, base, tokenizers, batches, out_dir, Path(_WORK_DIR.value))
    finally:
      lock.release()


if __name__ == "__main__":
  app.run(main)
