"""The two scalings at initialisation, measured (issue #10; notebooks/scaling.ipynb).

  taskset -c 0 python lab/bench/scaling_stats.py --out_dir lab/results/scaling

No training and no data: writes ``stats.json`` and two figures,
``embedding_scale.png`` and ``attention_logits.png``, to ``--out_dir``.

1. §3.4, × √d_model: the per-position root mean square (over the d_model
   channels) of the token embedding, of the embedding × √d_model, and of the
   positional encoding, for the ``tutorial`` and ``base`` configurations and
   both ``model.embedding_initializer`` choices, read from a freshly built
   :class:`transformer.model.embedding.PositionalEmbedding`.
2. §3.2.1, 1/√d_k: for queries, keys and values with unit-variance entries
   (what the paper's footnote 4 assumes), the variance of the logits against d_k
   with and without 1/√d_k, the entropy of the softmax rows and their largest
   weight, and the gradient that passes the softmax (median norm per row) and
   reaches Q and K (root mean square), for an upstream gradient of norm about 1
   per output row; all through :mod:`transformer.model.attention`'s own functions.
   Then the same logit statistics in the first encoder self-attention of the
   freshly built ``tutorial`` and ``base`` models, with the switch on and off.
"""

import json
import math
from pathlib import Path

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from configs import base
from configs import tutorial
from transformer.model.attention import attention_logits, masked_softmax, padding_mask
from transformer.model.settings import EMBEDDING_INITIALIZERS
from transformer.model.embedding import PositionalEmbedding
from transformer.model import Transformer

CONFIGS = {"tutorial": tutorial.get_config, "base": base.get_config}
KEY_DIMS = (8, 16, 32, 64, 128, 256, 512)
KEYS = 32          # keys per softmax row: a typical sentence in tokens
QUERIES = 32
BATCH = 64
SEED = 0

_OUT_DIR = flags.DEFINE_string("out_dir", "lab/results/scaling", "Where the JSON and figures go.")


def rms(x, axis=-1):
  """Root mean square over ``axis``."""
  return np.sqrt(np.mean(np.square(x), axis=axis))


def embedding_stats(d_model: int, initializer: str, vocab_size: int, positions: int):
  """Per-position RMS (over channels) of embedding, embedding × √d_model and the
  positional encoding; the embedding rows are every token of the vocabulary."""
  tf.keras.utils.set_random_seed(SEED)
  layer = PositionalEmbedding(vocab_size, d_model, embedding_initializer=initializer,
                              max_position=positions)
  layer.build((None, None))
  token_rms = rms(layer.embeddings.numpy())                      # (vocab,)
  scaled_rms = token_rms * math.sqrt(d_model)
  position_rms = rms(layer.encoding.numpy())                     # (positions,)
  pe = float(position_rms.mean())
  stats = {"d_model": d_model, "initializer": initializer,
           "embedding_rms": float(token_rms.mean()),
           "scaled_embedding_rms": float(scaled_rms.mean()),
           "scaled_embedding_rms_p05_p95": [float(np.percentile(scaled_rms, 5)),
                                            float(np.percentile(scaled_rms, 95))],
           "positional_rms": pe,
           "positional_rms_min_max": [float(position_rms.min()), float(position_rms.max())]}
  stats["ratio_unscaled"] = stats["embedding_rms"] / pe
  stats["ratio_scaled"] = stats["scaled_embedding_rms"] / pe
  # Share of the summed input's mean square that tells which token it is.
  for name in ("unscaled", "scaled"):
    r = stats[f"ratio_{name}"]
    stats[f"token_share_{name}"] = r * r / (1 + r * r)
  return stats


def row_entropy(weights):
  """Entropy in nats of each softmax row ``(..., keys)``."""
  return -np.sum(np.where(weights > 0, weights * np.log(np.maximum(weights, 1e-30)), 0.0),
                 axis=-1)


def synthetic_attention_stats(d_k: int, scaled: bool):
  """Logit, softmax and gradient statistics for unit-variance Q, K, V.

  The upstream gradient on each output row is N(0, 1/d_k) per entry (a row of
  norm about 1), so that its dot product with a value vector has unit variance
  whatever d_k, and the gradients compare across d_k.
  """
  rng = np.random.default_rng(SEED + d_k)
  shape = (BATCH, 1, QUERIES, d_k)
  query = tf.constant(rng.standard_normal(shape), tf.float32)
  key = tf.constant(rng.standard_normal((BATCH, 1, KEYS, d_k)), tf.float32)
  value = tf.constant(rng.standard_normal((BATCH, 1, KEYS, d_k)), tf.float32)
  upstream = tf.constant(rng.standard_normal(shape) / math.sqrt(d_k), tf.float32)
  with tf.GradientTape() as tape:
    tape.watch([query, key])
    logits = attention_logits(query, key, scaled)      # what the softmax sees
    weights = masked_softmax(logits)
    loss = tf.reduce_sum(tf.matmul(weights, value) * upstream)
  grad_logits, grad_q, grad_k = tape.gradient(loss, [logits, query, key])
  weights = weights.numpy()
  return {"d_k": d_k, "scaled": scaled, "logit_variance": float(logits.numpy().var()),
          "entropy": float(row_entropy(weights).mean()),
          "max_weight": float(weights.max(axis=-1).mean()),
          "rows_over_0.99": float((weights.max(axis=-1) > 0.99).mean()),
          # Through the softmax's Jacobian: saturated rows pass almost nothing.
          "grad_logits_median_row_norm": float(np.median(
              np.linalg.norm(grad_logits.numpy(), axis=-1))),
          "grad_q_rms": float(rms(grad_q.numpy(), axis=None)),
          "grad_k_rms": float(rms(grad_k.numpy(), axis=None))}


def model_attention_stats(name: str, scaled: bool):
  """Logit statistics of the first encoder self-attention of a freshly built model,
  on random token ids (at initialisation every token's embedding is alike)."""
  config = CONFIGS[name]()
  config.model.scale_attention_logits = scaled
  vocab = config.data.vocab_size
  tf.keras.utils.set_random_seed(SEED)
  model = Transformer.from_model_config(config.model, vocab, vocab)
  rng = np.random.default_rng(SEED)
  ids = tf.constant(rng.integers(4, vocab, (16, KEYS)), tf.int32)
  x = model.encoder.embedding(ids, training=False)
  mha = model.encoder.layers[0].self_attention.mha
  mha.build(x.shape, x.shape)
  keys, _ = mha.project_key_value(x)
  queries = mha.split_heads(mha.query_dense(x))
  logits = tf.matmul(queries, keys, transpose_b=True).numpy()
  if scaled:
    logits = logits / math.sqrt(mha.key_dim)
  _, weights = mha(x, x, attention_mask=padding_mask(ids), training=False)
  weights = weights.numpy()
  return {"config": name, "scaled": scaled, "d_model": config.model.d_model,
          "d_k": mha.key_dim, "embedding_initializer": config.model.embedding_initializer,
          "query_variance": float(queries.numpy().var()),
          "key_variance": float(keys.numpy().var()),
          "logit_variance": float(logits.var()),
          "entropy": float(row_entropy(weights).mean()),
          "max_weight": float(weights.max(axis=-1).mean())}


def compute_stats():
  """Everything the JSON holds (see the module docstring)."""
  embedding = []
  for name, get_config in CONFIGS.items():
    config = get_config()
    for initializer in EMBEDDING_INITIALIZERS:
      stats = embedding_stats(config.model.d_model, initializer, config.data.vocab_size,
                              config.data.max_tokens)
      stats["config"] = name
      stats["config_uses_it"] = initializer == config.model.embedding_initializer
      embedding.append(stats)
  sweep = [embedding_stats(d, initializer, 1000, 128)
           for d in (32, 64, 128, 256, 512, 1024, 2048) for initializer in EMBEDDING_INITIALIZERS]
  synthetic = [synthetic_attention_stats(d_k, scaled)
               for d_k in KEY_DIMS for scaled in (True, False)]
  model = [model_attention_stats(name, scaled)
           for name in CONFIGS for scaled in (True, False)]
  return {"seed": SEED, "keys_per_row": KEYS, "uniform_entropy": math.log(KEYS),
          "embedding": embedding, "embedding_sweep": sweep,
          "attention_synthetic": synthetic, "attention_model": model}


def plot_embedding_scale(stats, path):
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6.4, 4.2))
  sweep = stats["embedding_sweep"]
  for initializer, colour in zip(EMBEDDING_INITIALIZERS, ("C0", "C1")):
    rows = [s for s in sweep if s["initializer"] == initializer]
    d = [s["d_model"] for s in rows]
    ax.plot(d, [s["scaled_embedding_rms"] for s in rows], "-o", color=colour,
            label=f"{initializer}: embedding × √d_model")
    ax.plot(d, [s["embedding_rms"] for s in rows], "--o", color=colour,
            label=f"{initializer}: embedding alone")
  ax.axhline(sweep[0]["positional_rms"], color="k", lw=1, label="positional encoding (1/√2)")
  for s in stats["embedding"]:
    if s["config_uses_it"]:
      ax.axvline(s["d_model"], color="grey", lw=0.5, ls=":")
      ax.text(s["d_model"], 0.018, f" {s['config']}", color="grey", fontsize=8)
  ax.set(xscale="log", yscale="log", xlabel="d_model", ylabel="per-position RMS",
         title="Embedding vs positional encoding at initialisation (§3.4)")
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def plot_attention_logits(stats, path):
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  rows = stats["attention_synthetic"]
  fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
  for scaled, style in ((True, "-o"), (False, "--s")):
    part = [r for r in rows if r["scaled"] is scaled]
    d_k = [r["d_k"] for r in part]
    label = "QKᵀ/√d_k" if scaled else "QKᵀ"
    axes[0].plot(d_k, [r["logit_variance"] for r in part], style, label=label)
    axes[1].plot(d_k, [r["entropy"] for r in part], style, label=f"{label}: entropy")
    axes[1].plot(d_k, [r["max_weight"] * stats["uniform_entropy"] for r in part], style,
                 alpha=0.5, label=f"{label}: largest weight × ln {stats['keys_per_row']}")
    axes[2].plot(d_k, [r["grad_logits_median_row_norm"] for r in part], style,
                 label=f"{label}: ∂/∂logits, median row norm")
    axes[2].plot(d_k, [r["grad_q_rms"] for r in part], style, alpha=0.5,
                 label=f"{label}: ∂/∂Q, RMS")
  axes[0].set(xscale="log", yscale="log", xlabel="d_k", ylabel="variance of the logits",
              title="Logit variance")
  axes[1].axhline(stats["uniform_entropy"], color="k", lw=0.8)
  axes[1].set(xscale="log", xlabel="d_k", ylabel="nats",
              title=f"Softmax rows over {stats['keys_per_row']} keys")
  axes[2].set(xscale="log", yscale="log", xlabel="d_k", ylabel="gradient",
              title="Gradient through the softmax")
  for ax in axes:
    ax.legend(fontsize=7)
  fig.suptitle("Unit-variance queries and keys at initialisation (§3.2.1)")
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def main(argv):
  del argv
  out_dir = Path(_OUT_DIR.value)
  out_dir.mkdir(parents=True, exist_ok=True)
  stats = compute_stats()
  (out_dir / "stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
  plot_embedding_scale(stats, out_dir / "embedding_scale.png")
  plot_attention_logits(stats, out_dir / "attention_logits.png")
  print(f"wrote {out_dir}/stats.json, embedding_scale.png, attention_logits.png")


if __name__ == "__main__":
  app.run(main)
