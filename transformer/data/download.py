"""TensorFlow Datasets' copy of the TED HRLR data, downloaded once or said in one line why not.

``tfds.load`` retries a download it cannot make for minutes (ten attempts on a
machine without a network) and leaves a partial ``~/tensorflow_datasets``
behind. Here the archive's host is tried once, with a short timeout, before
anything is written, and a download that fails part way removes the folders
it created. Tested offline with the real builder (a socket blocker in a child
process): tests/scripts/test_data_download.py.
"""

import shutil
import socket
import tempfile
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse

TFDS_NAME = "ted_hrlr_translate/pt_to_en"
# The archive TFDS's ted_hrlr_translate builder downloads (its _DATA_URL;
# tests/scripts/test_data_download.py checks it against the installed builder).
ARCHIVE_URL = "http://www.phontron.com/data/qi18naacl-dataset.tar.gz"
CONNECT_TIMEOUT_S = 10


class DownloadError(Exception):
  """The data cannot be downloaded; the message says what to do instead."""


def import_tfds():
  """tensorflow_datasets, or a DownloadError naming the install that brings it."""
  try:
    # Deferred: tensorflow-datasets imports TensorFlow; only --data=tfds needs it, at its start.
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise DownloadError(f"--data=tfds: tensorflow-datasets cannot be imported ({e}); "
                        "pip install -e '.[tensorflow]' installs it and what it needs") from e
  return tfds


def check_available() -> None:
  """Raises DownloadError, within seconds, where the data is neither prepared
  nor downloadable; imports tensorflow_datasets, not TensorFlow."""
  if not import_tfds().builder(TFDS_NAME).is_prepared():
    _check_reachable(ARCHIVE_URL)


def prepared_builder():
  """The TFDS builder of the pt->en data, downloaded and prepared if it was not."""
  tfds = import_tfds()
  builder = tfds.builder(TFDS_NAME)
  if not builder.is_prepared():
    _check_reachable(ARCHIVE_URL)
    _download_and_prepare(builder)
  return builder


def _check_reachable(url: str) -> None:
  """Raises DownloadError, within seconds, when ``url``'s host cannot be reached."""
  parsed = urlparse(url)
  try:
    socket.create_connection((parsed.hostname, parsed.port or 80), CONNECT_TIMEOUT_S).close()
  except OSError as e:
    raise DownloadError(
        f"cannot download the TED HRLR data: {parsed.hostname} cannot be reached "
        f"({e.strerror or e}). Connect to the internet, or pass --data=FOLDER with the files "
        "pt.train en.train pt.dev en.dev pt.test en.test") from e


def _download_and_prepare(builder) -> None:
  """Downloads into a temporary folder (removed afterwards) and prepares the
  data set; on any failure, removes the data folders this call created."""
  created = _first_missing(Path(builder.data_dir))
  try:
    with tempfile.TemporaryDirectory(prefix="ted_hrlr_download_") as download_dir:
      builder.download_and_prepare(download_dir=download_dir)
  except BaseException as e:  # Ctrl-C too: nothing half downloaded stays.
    if created is not None:
      shutil.rmtree(created, ignore_errors=True)
    if isinstance(e, Exception):
      raise DownloadError(f"downloading the TED HRLR data failed ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); nothing was kept, "
                          "rerun to try again") from e
    raise


def _first_missing(path: Path) -> Optional[Path]:
  """The outermost of ``path`` and its parents that does not exist yet."""
  missing = None
  for folder in (path, *path.parents):
    if folder.exists():
      break
    missing = folder
  return missing
