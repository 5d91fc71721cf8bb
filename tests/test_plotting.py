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
