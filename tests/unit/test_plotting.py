"""Attention plots (transformer/inference/plotting.py)."""

import numpy as np
import pytest

from transformer.inference.plotting import save_attention_plot

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _labels(tick_labels):
  return [t.get_text() for t in tick_labels]


@pytest.mark.parametrize("heads", [8, 3])
def test_writes_a_png_with_one_panel_per_head(tmp_path, heads):
  source = [b"[START]", b"este", "é", "um", "[END]"]
  target = ["this", "is", "one", "[END]"]
  weights = np.random.default_rng(0).dirichlet(np.ones(len(source)), (heads, len(target)))
  path = tmp_path / "attention.png"
  figure = save_attention_plot(source, target, weights, path)
  assert path.read_bytes().startswith(PNG_SIGNATURE)
  assert path.stat().st_size > 1000
  assert len(figure.axes) == heads
  first = figure.axes[0]
  assert _labels(first.get_xticklabels()) == ["[START]", "este", "é", "um", "[END]"]
  assert _labels(first.get_yticklabels()) == target
  np.testing.assert_allclose(first.images[0].get_array(), weights[0])


def test_draws_only_real_tokens(tmp_path):
  # A batch pads the source after [END] and the output after its [END].
  source = ["[START]", "olá", ".", "[END]", "[PAD]", "[PAD]"]
  target = ["hello", ".", "[END]", "[PAD]", "[PAD]", "[PAD]", "[PAD]"]
  weights = np.random.default_rng(1).random((2, len(target), len(source)))
  figure = save_attention_plot(source, target, weights, tmp_path / "a.png")
  axes = figure.axes[0]
  assert _labels(axes.get_xticklabels()) == source[:4]
  assert _labels(axes.get_yticklabels()) == target[:3]
  np.testing.assert_allclose(axes.images[0].get_array(), weights[0, :3, :4])


def test_rejects_tokens_that_do_not_match_the_weights(tmp_path):
  with pytest.raises(ValueError, match="does not match"):
    save_attention_plot(["a", "b"], ["x"], np.ones((2, 1, 3)), tmp_path / "a.png")


def test_training_curves_plot_every_epoch_record(tmp_path):
  from transformer.inference.plotting import plot_training_curves  # pylint: disable=g-import-not-at-top
  metrics = tmp_path / "metrics.jsonl"
  metrics.write_text(
      '{"epoch": 1, "step": 10, "complete": true, "steps_in_epoch": 10, "train_loss": 6.0, '
      '"val_loss": 5.5, "train_accuracy": 0.1, "val_accuracy": 0.2}\n'
      '{"epoch": 2, "step": 16, "complete": false, "steps_in_epoch": 6, "train_loss": 4.0, '
      '"val_loss": 4.5, "train_accuracy": 0.3, "val_accuracy": 0.25}\n'
      '{"final": true, "step": 16, "bleu": 3.0}\n')
  (tmp_path / "config.json").write_text('{"training": {"warmup_steps": 12}}')
  path = tmp_path / "curves.png"
  figure = plot_training_curves(metrics, path)
  assert path.read_bytes().startswith(PNG_SIGNATURE)
  loss_axes, accuracy_axes = [a for a in figure.axes if a.lines]
  train_loss, val_loss, warmup = loss_axes.lines
  assert list(train_loss.get_xdata()) == [10, 16]
  assert list(train_loss.get_ydata()) == [6.0, 4.0]
  assert list(val_loss.get_ydata()) == [5.5, 4.5]
  assert list(accuracy_axes.lines[1].get_ydata()) == [0.2, 0.25]
  # Warm-up ends at step 12: a vertical line there on both panels, named in the legend.
  for axes in (loss_axes, accuracy_axes):
    assert list(axes.lines[2].get_xdata()) == [12, 12]
    assert "warm-up ends (step 12)" in _labels(axes.get_legend().get_texts())
  # Epochs on the top axis, at each epoch's last step; the cut-short one says so.
  epoch_axes = [child for a in (loss_axes, accuracy_axes) for child in a.child_axes]
  assert len(epoch_axes) == 2
  for axes in epoch_axes:
    assert list(axes.get_xticks()) == [10, 16]
    assert _labels(axes.get_xticklabels()) == ["1", "2\n(6 steps)"]
    assert axes.get_xlabel() == "epoch"
  (tmp_path / "config.json").unlink()  # no config: no warm-up line
  assert len(plot_training_curves(metrics, path).axes[0].lines) == 2
  (tmp_path / "empty.jsonl").write_text('{"final": true}\n')
  with pytest.raises(ValueError, match="no epoch records"):
    plot_training_curves(tmp_path / "empty.jsonl", path)
