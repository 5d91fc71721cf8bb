"""Attention plots (tutorial: "Create attention plots").

One panel per head of the last decoder layer's cross-attention: which source
tokens each output token looked at while it was predicted. The inputs come
from the exported translator's ``translate_with_attention`` (see
:mod:`transformer.export`).

Also the training curves of a ``train.py`` run, from its ``metrics.jsonl``.
"""

import json
import math
import os
from typing import Sequence, Union

import matplotlib

matplotlib.use("Agg")  # Files only: no display on servers.
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

PathLike = Union[str, os.PathLike]
PANELS_PER_ROW = 4


def _text(token) -> str:
  return token.decode("utf-8") if isinstance(token, bytes) else str(token)


def plot_attention_weights(sentence_tokens: Sequence, translation_tokens: Sequence,
                           attention_heads, path: PathLike):
  """Draws every head's attention and saves the figure as a PNG at ``path``.

  Args:
    sentence_tokens: the ``src_len`` source tokens (str or bytes), on the x axis.
    translation_tokens: the ``out_len`` output tokens, on the y axis; row t of
      the attention is the one used to predict token t.
    attention_heads: ``(heads, out_len, src_len)`` weights of one sentence.
    path: the PNG file to write.
  Returns:
    The matplotlib figure (closed, so it holds no display resources).
  """
  attention_heads = np.asarray(attention_heads)
  heads, out_len, src_len = attention_heads.shape
  if (out_len, src_len) != (len(translation_tokens), len(sentence_tokens)):
    raise ValueError(f"attention of shape {attention_heads.shape} does not match "
                     f"{len(translation_tokens)} translation and {len(sentence_tokens)} "
                     "sentence tokens")
  columns = min(heads, PANELS_PER_ROW)
  rows = math.ceil(heads / columns)
  figure = plt.figure(figsize=(4 * columns + 2, 4 * rows + 1))
  source_labels = [_text(t) for t in sentence_tokens]
  target_labels = [_text(t) for t in translation_tokens]
  for head in range(heads):
    axes = figure.add_subplot(rows, columns, head + 1)
    axes.matshow(attention_heads[head], cmap="viridis", vmin=0.0)
    axes.set_xticks(range(src_len), source_labels, rotation=90)
    axes.set_yticks(range(out_len), target_labels)
    axes.set_xlabel(f"Head {head + 1}")
  figure.tight_layout()
  figure.savefig(path, format="png")
  plt.close(figure)
  return figure


def plot_training_curves(metrics_path: PathLike, path: PathLike):
  """Loss and accuracy per epoch, training and validation, from ``train.py``'s
  ``metrics.jsonl``, saved as a PNG at ``path``. Returns the (closed) figure."""
  with open(metrics_path, encoding="utf-8") as f:
    records = [json.loads(line) for line in f if line.strip()]
  epochs = [r for r in records if "train_loss" in r]
  if not epochs:
    raise ValueError(f"{metrics_path} holds no epoch records")
  figure, (loss_axes, accuracy_axes) = plt.subplots(1, 2, figsize=(10, 4))
  steps = [r["step"] for r in epochs]
  for split in ("train", "val"):
    loss_axes.plot(steps, [r[f"{split}_loss"] for r in epochs], marker="o", label=split)
    accuracy_axes.plot(steps, [r[f"{split}_accuracy"] for r in epochs], marker="o",
                       label=split)
  loss_axes.set(xlabel="step", ylabel="masked cross-entropy", title="loss")
  accuracy_axes.set(xlabel="step", ylabel="masked token accuracy", title="accuracy")
  for axes in (loss_axes, accuracy_axes):
    axes.legend()
  figure.tight_layout()
  figure.savefig(path, format="png")
  plt.close(figure)
  return figure
