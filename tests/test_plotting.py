"""Attention plots (transformer/plotting.py)."""

import numpy as np
import pytest

from transformer.plotting import plot_attention_weights

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("heads", [8, 3])
def test_writes_a_png_with_one_panel_per_head(tmp_path, heads):
  source = [b"[START]", b"este", "é", "um", "[END]"]
  target = ["this", "is", "one", "[END]"]
  weights = np.random.default_rng(0).dirichlet(np.ones(len(source)), (heads, len(target)))
  path = tmp_path / "attention.png"
  figure = plot_attention_weights(source, target, weights, path)
  assert path.read_bytes().startswith(PNG_SIGNATURE)
  assert path.stat().st_size > 1000
  assert len(figure.axes) == heads
  first = figure.axes[0]
  assert [t.get_text() for t in first.get_xticklabels()] == ["[START]", "este", "é", "um",
                                                            "[END]"]
  assert [t.get_text() for t in first.get_yticklabels()] == target
  np.testing.assert_allclose(first.images[0].get_array(), weights[0])


def test_rejects_tokens_that_do_not_match_the_weights(tmp_path):
  with pytest.raises(ValueError, match="does not match"):
    plot_attention_weights(["a", "b"], ["x"], np.ones((2, 1, 3)), tmp_path / "a.png")


def test_training_curves_plot_every_epoch_record(tmp_path):
  from transformer.plotting import plot_training_curves  # pylint: disable=g-import-not-at-top
  metrics = tmp_path / "metrics.jsonl"
  metrics.write_text(
      '{"epoch": 1, "step": 10, "train_loss": 6.0, "val_loss": 5.5, '
      '"train_accuracy": 0.1, "val_accuracy": 0.2}\n'
      '{"epoch": 2, "step": 20, "train_loss": 4.0, "val_loss": 4.5, '
      '"train_accuracy": 0.3, "val_accuracy": 0.25}\n'
      '{"final": true, "step": 20, "bleu": 3.0}\n')
  path = tmp_path / "curves.png"
  figure = plot_training_curves(metrics, path)
  assert path.read_bytes().startswith(PNG_SIGNATURE)
  loss_axes, accuracy_axes = figure.axes
  train_loss, val_loss = loss_axes.lines
  assert list(train_loss.get_xdata()) == [10, 20]
  assert list(train_loss.get_ydata()) == [6.0, 4.0]
  assert list(val_loss.get_ydata()) == [5.5, 4.5]
  assert list(accuracy_axes.lines[1].get_ydata()) == [0.2, 0.25]
  (tmp_path / "empty.jsonl").write_text('{"final": true}\n')
  with pytest.raises(ValueError, match="no epoch records"):
    plot_training_curves(tmp_path / "empty.jsonl", path)
