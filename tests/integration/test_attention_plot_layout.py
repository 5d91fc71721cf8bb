"""Attention plots at the size of a long sentence (transformer/inference/plotting.py): the
labels laid out without overlaps. The plots' content: tests/unit/test_plotting.py."""

from matplotlib.backends.backend_agg import FigureCanvasAgg
import numpy as np
import pytest

from transformer.inference.plotting import save_attention_plot


def _overlaps(boxes):
  """Pairs of neighbouring label boxes (display pixels) that overlap."""
  return [(a, b) for a, b in zip(boxes, boxes[1:]) if a.overlaps(b)]


@pytest.mark.slow
@pytest.mark.parametrize("src_len,out_len", [(6, 5), (60, 70)])
def test_labels_do_not_overlap(tmp_path, src_len, out_len):
  source = ["[START]"] + [f"palavra{i}" for i in range(src_len - 2)] + ["[END]"]
  target = [f"word{i}" for i in range(out_len - 1)] + ["[END]"]
  weights = np.full((8, out_len, src_len), 1.0 / src_len)
  figure = save_attention_plot(source, target, weights, tmp_path / "a.png")
  canvas = FigureCanvasAgg(figure)  # the closed figure, laid out again to be measured
  canvas.draw()
  renderer = canvas.get_renderer()
  boxes = {name: [] for name in ("x", "y", "panels")}
  for axes in figure.axes:
    boxes["x"] = [t.get_window_extent(renderer) for t in axes.get_xticklabels()]
    boxes["y"] = [t.get_window_extent(renderer) for t in axes.get_yticklabels()]
    assert not _overlaps(boxes["x"]) and not _overlaps(boxes["y"])
    boxes["panels"].append(axes.get_tightbbox(renderer))  # the panel with its labels
  panels = boxes["panels"]
  assert not [(i, j) for i in range(len(panels)) for j in range(i)
              if panels[i].overlaps(panels[j])]
