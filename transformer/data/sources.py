"""Where the data comes from: the local copy beside this repository, or TensorFlow Datasets.

``--data`` defaults to ``auto``: the TED HRLR files in ``../shared/data`` beside
this repository where they are (this repository's own checkouts), else
TensorFlow Datasets' copy of the same data (``tfds``, downloaded once; the
local reader gives the same pairs in the same order, :mod:`transformer.data.ted`),
and one line says which. A path the user names is taken at its word: one that
does not exist is an error, never a download in its place (a typo would
otherwise cost a download and train on other data than asked).

Needs no TensorFlow: the scripts decide this before they import it.
"""

import importlib.util
from pathlib import Path
from typing import Optional, Tuple

from transformer.config import SHARED_DATA_DIR

AUTO = "auto"
TFDS = "tfds"
BUILD = "build"
LOCAL_DATA = SHARED_DATA_DIR / "ted_hrlr_pt_to_en"
# The tutorial's ted_hrlr_translate_pt_en_converter, where the local copy has it.
TUTORIAL_TOKENIZER = SHARED_DATA_DIR / "tutorial_tokenizer"
DATA_HELP = (f"Where the data comes from: '{AUTO}' (the TED HRLR files in ../shared/data beside "
             f"this repository when they are there, else '{TFDS}'), '{TFDS}' (TensorFlow "
             "Datasets' ted_hrlr_translate/pt_to_en, downloaded once into "
             "~/tensorflow_datasets or $TFDS_DATA_DIR), or a folder with pt.train en.train "
             "pt.dev en.dev pt.test en.test (the original files, read in TFDS order).")


class SourceError(ValueError):
  """A named --data or --tokenizer is not there, or tfds cannot stand in."""


def tfds_installed() -> bool:
  return importlib.util.find_spec("tensorflow_datasets") is not None


def resolve_data(data: str) -> Tuple[str, Optional[str]]:
  """``(source, message)``: ``data`` (a script's --data) with ``auto`` made the
  local folder or ``tfds``, and the line that says where the data comes from
  (None for a source the user named).

  Raises:
    SourceError: a named folder does not exist, or tfds is needed and not installed.
  """
  message = None
  if data == AUTO:
    if LOCAL_DATA.is_dir():
      return str(LOCAL_DATA), f"data: {LOCAL_DATA}"
    data = TFDS
    message = (f"data: TensorFlow Datasets' ted_hrlr_translate/pt_to_en, downloaded on first "
               f"use (no local copy at {LOCAL_DATA})")
  elif data != TFDS and not Path(data).exists():
    raise SourceError(f"--data={data}: no such folder; pass a folder with pt.train en.train "
                      f"pt.dev en.dev pt.test en.test, or --data={TFDS} to download the data")
  if data == TFDS and not tfds_installed():
    raise SourceError("the data is not in ../shared/data and tensorflow-datasets, which "
                      "downloads it, is not installed: pip install -e '.[tensorflow]'")
  return data, message


def data_source(data: str) -> Tuple[str, Optional[str]]:
  """:func:`resolve_data`, and where that gives ``tfds``, whether the data is
  there or can be downloaded, asked at once (before TensorFlow loads), so that
  a machine without a network hears it in seconds (:mod:`transformer.data.download`).

  Raises:
    SourceError: as resolve_data, or the data is neither prepared nor downloadable.
  """
  data, message = resolve_data(data)
  if data == TFDS:
    # Deferred: it imports TensorFlow at its start (through tensorflow-datasets); only tfds needs it.
    from transformer.data import download  # pylint: disable=g-import-not-at-top
    try:
      download.check_available()
    except download.DownloadError as e:
      raise SourceError(f"no local copy of the data at {LOCAL_DATA}, and {e}" if message
                        else str(e)) from e
  return data, message


def check_tokenizer(tokenizer: str) -> None:
  """Raises SourceError where --tokenizer names a path that does not exist."""
  if tokenizer != BUILD and not Path(tokenizer).exists():
    raise SourceError(f"--tokenizer={tokenizer}: no such folder; pass a tokenizer SavedModel, "
                      f"or --tokenizer={BUILD} to learn one from the training pairs")
