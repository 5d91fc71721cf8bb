"""Where the data comes from (``--data``; :data:`DATA_HELP`), decided before
TensorFlow is imported.

``auto``, the default, is the TED HRLR files in ``../shared/data`` where they
are, else TensorFlow Datasets' copy (``tfds``, :mod:`transformer.data.download`),
and one line says which. A path the user names is taken at its word: one that
does not exist, or an archive that fails the check, is an error, never a
download in its place (a typo would train on other data than asked).
"""

import importlib.util
from pathlib import Path
from typing import Optional, Tuple

from transformer.config import SHARED_DATA_DIR
from transformer.data import download

AUTO = "auto"
TFDS = "tfds"
BUILD = "build"
LOCAL_DATA = SHARED_DATA_DIR / "ted_hrlr_pt_to_en"
# The tutorial's ted_hrlr_translate_pt_en_converter, where the local copy has it.
TUTORIAL_TOKENIZER = SHARED_DATA_DIR / "tutorial_tokenizer"
DATA_HELP = (f"Where the data comes from: '{AUTO}' (the TED HRLR files in ../shared/data beside "
             f"this repository when they are there, else '{TFDS}'), '{TFDS}' (TensorFlow "
             "Datasets' ted_hrlr_translate/pt_to_en, prepared once into "
             "~/tensorflow_datasets or $TFDS_DATA_DIR from the archive, downloaded from "
             "TFDS's host or else a mirror, and checked), the archive "
             f"{download.ARCHIVE_NAME} itself (checked, then extracted once into "
             "~/.cache/transformer-pt-en), or a folder with pt.train en.train pt.dev en.dev "
             "pt.test en.test (the original files, read in TFDS order). Where no source "
             "gives the archive: docs/data.md.")


class SourceError(ValueError):
  """A named --data or --tokenizer is not there, or tfds cannot stand in."""


def tfds_installed() -> bool:
  return importlib.util.find_spec("tensorflow_datasets") is not None


def resolve_data(data: str) -> Tuple[str, Optional[str]]:
  """``(source, message)``: ``data`` (--data) with ``auto`` made the local folder
  or ``tfds`` and an archive made its extracted folder, and the line saying so
  (None for a folder or ``tfds`` the user named). SourceError for a missing
  path, a file that is not the archive, or tfds needed and not installed."""
  message = None
  if data == AUTO:
    if LOCAL_DATA.is_dir():
      return str(LOCAL_DATA), f"data: {LOCAL_DATA}"
    data = TFDS
    message = (f"data: TensorFlow Datasets' ted_hrlr_translate/pt_to_en, downloaded on first "
               f"use (no local copy at {LOCAL_DATA})")
  elif data != TFDS and not Path(data).exists():
    raise SourceError(f"--data={data}: no such folder; pass a folder with pt.train en.train "
                      f"pt.dev en.dev pt.test en.test, the archive {download.ARCHIVE_NAME}, "
                      f"or --data={TFDS} to download the data")
  elif Path(data).is_file():
    return _extracted(data)
  if data == TFDS and not tfds_installed():
    raise SourceError("the data is not in ../shared/data and tensorflow-datasets, which "
                      "downloads it, is not installed: pip install -e '.[tensorflow]', or "
                      f"pass --data=path/to/{download.ARCHIVE_NAME}")
  return data, message


def _extracted(archive: str) -> Tuple[str, str]:
  """``(folder, message)`` of a named archive, checked and extracted once."""
  try:
    folder = download.extract_archive(Path(archive))
  except download.DownloadError as e:
    raise SourceError(f"--data={e}") from e  # the message starts with the path
  return str(folder), f"data: {archive} (checked), its pt->en files extracted to {folder}"


def data_source(data: str) -> Tuple[str, Optional[str]]:
  """:func:`resolve_data`, and for ``tfds`` the data fetched at once (before
  TensorFlow loads), so that a machine without a network hears it in seconds;
  SourceError when it is neither prepared nor downloadable."""
  data, message = resolve_data(data)
  if data == TFDS:
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
