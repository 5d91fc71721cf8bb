"""Fixtures of the fault tests."""

import pytest


@pytest.fixture(scope="module")
def small_data(tmp_path_factory, ted_data_dir):
  """The first 96 training and 16 validation pairs of the real data: 6 batches an epoch."""
  folder = tmp_path_factory.mktemp("data")
  for split, count in (("train", 96), ("dev", 16)):
    for language in ("pt", "en"):
      lines = (ted_data_dir / f"{language}.{split}").read_text(encoding="utf-8").splitlines()
      (folder / f"{language}.{split}").write_text("".join(l + "\n" for l in lines[:count]),
                                                 encoding="utf-8")
  return folder
