"""Attention plots (tutorial: "Create attention plots"), and training curves.

One panel per head of the last decoder layer's cross-attention: which source
tokens each output token looked at while it was predicted. The tutorial's
``plot_attention_head`` and ``plot_attention_weights`` draw a translator
call's on the current figure; :func:`save_attention_plot` writes one
sentence's of ``translate_with_attention`` to a PNG, sized so that every label
reads. matplotlib's backend is left alone, so plots still show in a notebook.
"""

import inspect
import math
from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

from transformer.run import run_folder
from transformer.run.run_folder import PathLike

PANELS_PER_ROW = 4
END, PAD = "[END]", "[PAD]"
FONT_SIZE = 9  # points, tick labels
CELL = 0.25  # inches per token: a 9-point label fits beside its neighbours
MAX_FIGURE_WIDTH = 24  # inches; longer sentences get fewer panels per row
CHAR_WIDTH = 0.6 * FONT_SIZE / 72  # inches, an average character


def _text(token) -> str:
  return token.decode("utf-8") if isinstance(token, bytes) else str(token)


def _real_length(labels, through_end: bool) -> int:
  """How many leading tokens are not padding: through the first [END] when
  ``through_end`` (decoding pads after it), else up to the first [PAD]."""
  if through_end and END in labels:
    return labels.index(END) + 1
  return labels.index(PAD) if PAD in labels else len(labels)


def _labels(tokens) -> list:
  """Token strings from a tensor, an array or a list of str or bytes."""
  tokens = tokens.numpy() if hasattr(tokens, "numpy") else tokens
  return [_text(t) for t in tokens]


def plot_attention_head(in_tokens, translated_tokens, attention):
  """The tutorial's: one head's ``(out_len, src_len)`` attention on the current
  axes, ``in_tokens`` on x, ``translated_tokens`` (from [START], which is
  left off: it is not predicted) on y."""
  axes = plt.gca()
  axes.matshow(np.asarray(attention))
  source_labels = _labels(in_tokens)
  target_labels = _labels(translated_tokens)[1:]
  axes.set_xticks(range(len(source_labels)), source_labels, rotation=90)
  axes.set_yticks(range(len(target_labels)), target_labels)


def plot_attention_weights(sentence, translated_tokens, attention_heads, tokenizers=None):
  """The tutorial's: every head of ``attention_heads`` ``(heads, out_len, src_len)``
  in 2 rows of panels, shown. ``sentence`` is tokenized with ``tokenizers``,
  by default the caller's variable of that name, as in the tutorial."""
  if tokenizers is None:
    caller = inspect.currentframe().f_back
    tokenizers = caller.f_locals.get("tokenizers", caller.f_globals.get("tokenizers"))
  if tokenizers is None:
    raise ValueError("plot_attention_weights needs tokenizers: pass tokenizers=, or call it "
                     "where a variable `tokenizers` holds them, as the tutorial does")
  in_tokens = tokenizers.pt.lookup(tokenizers.pt.tokenize(tf.constant([sentence])).to_tensor())[0]
  figure = plt.figure(figsize=(16, 8))
  for head, attention in enumerate(np.asarray(attention_heads)):
    axes = figure.add_subplot(2, math.ceil(len(attention_heads) / 2), head + 1)
    plot_attention_head(in_tokens, translated_tokens, attention)
    axes.set_xlabel(f"Head {head + 1}")
  plt.tight_layout()
  plt.show()


def save_attention_plot(sentence_tokens: Sequence, translation_tokens: Sequence,
                        attention_heads, path: PathLike):
  """Draws every head's ``(heads, out_len, src_len)`` attention to the PNG
  ``path`` and returns the closed figure: the real tokens only (sources up to
  the first [PAD], outputs through the first [END]), a fixed size per token."""
  attention_heads = np.asarray(attention_heads)
  heads, out_len, src_len = attention_heads.shape
  if (out_len, src_len) != (len(translation_tokens), len(sentence_tokens)):
    raise ValueError(f"attention of shape {attention_heads.shape} does not match "
                     f"{len(translation_tokens)} translation and {len(sentence_tokens)} "
                     "sentence tokens")
  source_labels, target_labels = _labels(sentence_tokens), _labels(translation_tokens)
  src_len = _real_length(source_labels, through_end=False)
  out_len = _real_length(target_labels, through_end=True)
  source_labels, target_labels = source_labels[:src_len], target_labels[:out_len]
  attention_heads = attention_heads[:, :out_len, :src_len]

  # Each panel: its cells, room for the labels (x above, y left) and the head's name below.
  label_room = CHAR_WIDTH * max(map(len, source_labels + target_labels)) + 0.2
  panel_width = CELL * src_len + label_room
  panel_height = CELL * out_len + label_room + 0.4
  columns = max(1, min(heads, PANELS_PER_ROW, int(MAX_FIGURE_WIDTH // panel_width)))
  rows = math.ceil(heads / columns)
  figure, axes_grid = plt.subplots(
      rows, columns, figsize=(columns * panel_width, rows * panel_height),
      squeeze=False, layout="constrained")
  for head, axes in enumerate(axes_grid.flat):
    if head >= heads:
      axes.remove()
      continue
    axes.matshow(attention_heads[head], cmap="viridis", vmin=0.0)
    axes.set_xticks(range(src_len), source_labels, rotation=90, fontsize=FONT_SIZE)
    axes.set_yticks(range(out_len), target_labels, fontsize=FONT_SIZE)
    axes.set_xlabel(f"Head {head + 1}")
  figure.savefig(path, format="png")
  plt.close(figure)
  return figure


# The records of train.py's metrics.jsonl (a cut line skipped, saying so).
read_metrics = run_folder.read_metrics


def plot_training_curves(metrics_path: PathLike, path: PathLike):
  """Loss and accuracy per epoch (steps below, epochs above) from ``train.py``'s
  ``metrics.jsonl``, with the end of warm-up (§5.3) from the ``config.json``
  beside it, saved as a PNG at ``path``. Returns the closed figure."""
  epochs = [r for r in read_metrics(metrics_path) if "train_loss" in r]
  if not epochs:
    raise ValueError(f"{metrics_path} holds no epoch records")
  config_path = Path(metrics_path).parent / run_folder.CONFIG_FILE
  warmup_steps = (run_folder.read_run_config(config_path)["training"]["warmup_steps"]
                  if config_path.is_file() else None)
  figure, (loss_axes, accuracy_axes) = plt.subplots(1, 2, figsize=(11, 4.5),
                                                    layout="constrained")
  steps = [r["step"] for r in epochs]
  # An epoch cut short (train_steps reached) is marked with its batch count.
  epoch_labels = [str(r["epoch"]) if r.get("complete", True)
                  else f"{r['epoch']}\n({r['steps_in_epoch']} steps)" for r in epochs]
  for split in ("train", "val"):
    loss_axes.plot(steps, [r[f"{split}_loss"] for r in epochs], marker="o", label=split)
    accuracy_axes.plot(steps, [r[f"{split}_accuracy"] for r in epochs], marker="o",
                       label=split)
  loss_axes.set(ylabel="masked cross-entropy", title="loss")
  accuracy_axes.set(ylabel="masked token accuracy", title="accuracy")
  for axes in (loss_axes, accuracy_axes):
    axes.set_xlabel("step")
    epoch_axis = axes.secondary_xaxis("top")
    epoch_axis.set_xticks(steps, epoch_labels)
    epoch_axis.set_xlabel("epoch")
    if warmup_steps:
      axes.axvline(warmup_steps, color="gray", linestyle="--",
                   label=f"warm-up ends (step {warmup_steps:,})")
    axes.legend()
  figure.savefig(path, format="png")
  plt.close(figure)
  return figure
