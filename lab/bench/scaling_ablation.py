"""Ablation of the two scalings on the real data (issue #10; notebooks/scaling.ipynb).

  PYTHONPATH=. taskset -c 0 python lab/bench/scaling_ablation.py --out_dir lab/results/scaling --steps 1500 --seeds 0,1

Four arms: ``baseline`` (both scalings), ``no_embedding_scale``
(``model.scale_embeddings=False``, §3.4), ``no_logit_scale``
(``model.scale_attention_logits=False``, §3.2.1) and ``both_off``, each trained
for ``--steps`` optimizer steps from ``--seeds`` (model initialisation and
dropout). Every arm and seed sees the SAME batches in the same order
(:mod:`bench.fixed_batches`, with the tutorial's tokenizer); their SHA-256 is
recorded with each result.

The model is a small paper-style one (``--num_layers``, ``--d_model``,
``--num_heads``; by default d_k = 64 as in the paper): paper choices
everywhere else (interleaved positions, tied output weights, label smoothing
0.1, residual dropout 0.1), the §5.3 schedule with ``--warmup_steps``.

Per arm and seed, ``<out_dir>/ablation/<arm>.seed<k>.jsonl`` gets one line per
evaluation (every ``--eval_every`` steps: validation loss and accuracy over the
whole validation split, and the mean training loss since the last line) and a
last line with greedy BLEU on the first ``--bleu_sentences`` validation pairs.
A non-finite training loss ends the arm there and is recorded (``diverged``):
it is a result, not something to tune away. Arms whose file already has its
last line are skipped, so the run can be done in pieces (e.g. ``--arms`` one
at a time). ``ablation_summary.json`` and ``ablation_curves.png`` are remade
from whatever results exist (``--plot_only`` does only that).
"""

import json
import math
from pathlib import Path
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from lab.bench.fixed_batches import fingerprint, make_batches
from transformer.inference import evaluation
from transformer.config import SHARED_DATA_DIR, default_config, validate_config
from transformer.inference.export import Translator
from transformer.data.tokenizers import load_tokenizers, vocab_sizes
from transformer.training.tf_engine import TensorFlowTrainer

ARMS = {
    "baseline": {},
    "no_embedding_scale": {"scale_embeddings": False},
    "no_logit_scale": {"scale_attention_logits": False},
    "both_off": {"scale_embeddings": False, "scale_attention_logits": False},
}
ABLATION_SUBDIR = "ablation"

_OUT_DIR = flags.DEFINE_string("out_dir", "lab/results/scaling", "Results folder.")
_STEPS = flags.DEFINE_integer("steps", 1500, "Optimizer steps per arm and seed.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1"], "Model seeds.")
_ARMS = flags.DEFINE_list("arms", list(ARMS), "Arms to run.")
_EVAL_EVERY = flags.DEFINE_integer("eval_every", 100, "Steps between validation passes.")
_BLEU_SENTENCES = flags.DEFINE_integer("bleu_sentences", 300,
                                       "Validation pairs decoded for the final BLEU.")
_TOKENS_PER_BATCH = flags.DEFINE_integer("tokens_per_batch", 4096,
                                         "Token budget per batch and side.")
_NUM_LAYERS = flags.DEFINE_integer("num_layers", 2, "Encoder and decoder layers.")
_D_MODEL = flags.DEFINE_integer("d_model", 256, "Model width.")
_NUM_HEADS = flags.DEFINE_integer("num_heads", 4, "Heads (d_k = d_model / num_heads).")
_WARMUP = flags.DEFINE_integer("warmup_steps", 500, "§5.3 warm-up steps.")
_DATA_DIR = flags.DEFINE_string("data_dir", str(SHARED_DATA_DIR / "ted_hrlr_pt_to_en"),
                                "Folder with pt.train en.train pt.dev en.dev.")
_TOKENIZER = flags.DEFINE_string("tokenizer", str(SHARED_DATA_DIR / "tutorial_tokenizer"),
                                 "Tokenizer SavedModel.")
_PLOT_ONLY = flags.DEFINE_bool("plot_only", False, "Only remake the summary and figure.")


def ablation_config(arm: str, seed: int):
  """The small paper-style configuration with the arm's switches."""
  config = default_config()
  config.model.num_layers = _NUM_LAYERS.value
  config.model.d_model = _D_MODEL.value
  config.model.num_heads = _NUM_HEADS.value
  config.model.dff = 4 * _D_MODEL.value
  config.model.update(ARMS[arm])
  config.training.warmup_steps = _WARMUP.value
  config.training.seed = seed
  return validate_config(config)


def result_path(out_dir: Path, arm: str, seed: int) -> Path:
  return out_dir / ABLATION_SUBDIR / f"{arm}.seed{seed}.jsonl"


def read_result(path: Path):
  """The lines of one arm's file, or None when it is missing or unfinished."""
  if not path.exists():
    return None
  lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
  return lines if lines and lines[-1].get("final") else None


def run_arm(arm, seed, tokenizers, train, validation, validation_pairs, out_dir: Path):
  """Trains one arm from one seed; writes its JSON lines (atomically at the end)."""
  config = ablation_config(arm, seed)
  input_vocab, target_vocab = vocab_sizes(tokenizers)
  trainer = TensorFlowTrainer(config, input_vocab_size=input_vocab, target_vocab_size=target_vocab,
                    progress=False)
  common = {"arm": arm, "seed": seed, "batches_sha256": fingerprint(train)}
  lines, diverged_at, seconds, cpu_seconds = [], None, 0.0, 0.0
  for start in range(0, _STEPS.value, _EVAL_EVERY.value):
    chunk = train.skip(start).take(_EVAL_EVERY.value)
    began, began_cpu = time.perf_counter(), time.process_time()
    records = trainer.engine.train_on_batches(chunk)
    seconds += time.perf_counter() - began
    cpu_seconds += time.process_time() - began_cpu
    bad = [i for i, r in enumerate(records) if not math.isfinite(r["loss"])]
    if bad:
      diverged_at = start + bad[0] + 1
    tokens = sum(r["tokens"] for r in records[:bad[0] if bad else None])
    train_loss = (sum(r["loss"] * r["tokens"] for r in records[:bad[0] if bad else None])
                  / tokens if tokens else None)
    if diverged_at is not None:
      lines.append({**common, "step": diverged_at, "train_loss": train_loss,
                    "diverged": True})
      break
    metrics = trainer.evaluate(validation)
    lines.append({**common, "step": trainer.step, "train_loss": train_loss,
                  "val_loss": metrics["loss"], "val_accuracy": metrics["accuracy"],
                  "learning_rate": trainer.learning_rate})
    print(f"{arm} seed {seed} step {trainer.step}: val loss {metrics['loss']:.3f} "
          f"accuracy {metrics['accuracy']:.3f} ({seconds / trainer.step:.2f} s/step, "
          f"{cpu_seconds / trainer.step:.2f} CPU s/step)",
          flush=True)
  final = {**common, "final": True, "steps": trainer.step, "diverged_at": diverged_at,
           "seconds_per_step": seconds / max(trainer.step, 1),
           # CPU time of all threads: the cost on a shared machine.
           "cpu_seconds_per_step": cpu_seconds / max(trainer.step, 1),
           "model": config.model.to_dict(), "warmup_steps": config.training.warmup_steps,
           "tokens_per_batch": _TOKENS_PER_BATCH.value}
  if diverged_at is None:
    translator = Translator(tokenizers, trainer.model, config.decoding)

    def translate(sentences):
      return [s.decode("utf-8")
              for s in translator.translate_greedy(tf.constant(list(sentences))).numpy()]

    with tempfile.TemporaryDirectory() as scratch:
      bleu = evaluation.evaluate_bleu(
          translate, validation_pairs[:_BLEU_SENTENCES.value], scratch, "validation",
          "greedy", reference_tokenizer=tokenizers.en)
    final.update(bleu=bleu["bleu"], bleu_sentences=bleu["num_sentences"],
                 bleu_signature=bleu["signature"])
  lines.append(final)
  path = result_path(out_dir, arm, seed)
  path.parent.mkdir(parents=True, exist_ok=True)
  scratch_path = path.with_suffix(".tmp")
  scratch_path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
  scratch_path.replace(path)
  return lines


def summarize(out_dir: Path):
  """Per arm: final validation loss, accuracy and BLEU per seed, mean and spread."""
  summary = {}
  for arm in ARMS:
    runs = [r for r in (read_result(p) for p in sorted(
        (out_dir / ABLATION_SUBDIR).glob(f"{arm}.seed*.jsonl"))) if r is not None]
    if not runs:
      continue
    per_seed = []
    for lines in runs:
      final = lines[-1]
      evals = [line for line in lines[:-1] if "val_loss" in line]
      per_seed.append({"seed": final["seed"], "steps": final["steps"],
                       "diverged_at": final["diverged_at"], "bleu": final.get("bleu"),
                       "val_loss": evals[-1]["val_loss"] if evals else None,
                       "val_accuracy": evals[-1]["val_accuracy"] if evals else None,
                       "seconds_per_step": final["seconds_per_step"]})
    entry = {"seeds": per_seed}
    for key in ("val_loss", "val_accuracy", "bleu"):
      values = [s[key] for s in per_seed if s[key] is not None]
      if values:
        entry[key] = {"mean": float(np.mean(values)), "min": float(np.min(values)),
                      "max": float(np.max(values))}
    summary[arm] = entry
  return summary


def plot_ablation(out_dir: Path, path: Path):
  """Validation loss and accuracy against step: mean over seeds, band = min to max."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
  for arm, colour in zip(ARMS, ("C0", "C1", "C2", "C3")):
    runs = [r for r in (read_result(p) for p in sorted(
        (out_dir / ABLATION_SUBDIR).glob(f"{arm}.seed*.jsonl"))) if r is not None]
    if not runs:
      continue
    for ax, key in zip(axes, ("val_loss", "val_accuracy")):
      curves = [{line["step"]: line[key] for line in r if key in line} for r in runs]
      steps = sorted(set.intersection(*(set(c) for c in curves)))
      values = np.array([[c[s] for s in steps] for c in curves])
      ax.plot(steps, values.mean(0), color=colour, label=f"{arm} ({len(runs)} seeds)")
      ax.fill_between(steps, values.min(0), values.max(0), color=colour, alpha=0.2)
      for r in runs:
        if r[-1]["diverged_at"] is not None:
          ax.axvline(r[-1]["diverged_at"], color=colour, ls=":", lw=1)
  axes[0].set(xlabel="step", ylabel="validation loss (label-smoothed)",
              title="Validation loss")
  axes[1].set(xlabel="step", ylabel="validation token accuracy", title="Validation accuracy")
  for ax in axes:
    ax.legend(fontsize=8)
  fig.suptitle("Ablation of √d_model (§3.4) and 1/√d_k (§3.2.1): mean over seeds, "
               "band = min–max")
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def write_summary(out_dir: Path):
  summary = summarize(out_dir)
  (out_dir / "ablation_summary.json").write_text(json.dumps(summary, indent=1) + "\n",
                                                 encoding="utf-8")
  if summary:
    plot_ablation(out_dir, out_dir / "ablation_curves.png")
  return summary


def main(argv):
  del argv
  out_dir = Path(_OUT_DIR.value)
  unknown = [arm for arm in _ARMS.value if arm not in ARMS]
  if unknown:
    raise SystemExit(f"unknown arm(s) {', '.join(unknown)}; choose from {', '.join(ARMS)}")
  if not _PLOT_ONLY.value:
    todo = [(arm, int(seed)) for arm in _ARMS.value for seed in _SEEDS.value
            if read_result(result_path(out_dir, arm, int(seed))) is None]
    if todo:
      tokenizers = load_tokenizers(_TOKENIZER.value)
      max_tokens = default_config().data.max_tokens
      train, validation, validation_pairs = make_batches(
          _DATA_DIR.value, tokenizers, _STEPS.value, _TOKENS_PER_BATCH.value, max_tokens)
      print(f"{_STEPS.value} training batches, sha256 {fingerprint(train)}", flush=True)
      for arm, seed in todo:
        run_arm(arm, seed, tokenizers, train, validation, validation_pairs, out_dir)
  print(json.dumps(write_summary(out_dir), indent=1))


if __name__ == "__main__":
  app.run(main)
