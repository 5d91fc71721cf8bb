"""The TED HRLR archive from more than one place, each copy checked before use.

TensorFlow Datasets' ``ted_hrlr_translate`` builder downloads one archive,
``qi18naacl-dataset.tar.gz``, from one host (:data:`ARCHIVE_URL`), which has
gone dark at times. Here the archive is taken from, in order: a copy already in TFDS's
folder for hand-downloaded files (``<data dir>/downloads/manual``, where
``tfds.load`` itself looks first), TFDS's host, then each of :data:`MIRRORS`.
Every copy must have the size and SHA-256 that TFDS registers for that URL
(:data:`ARCHIVE_SIZE`, :data:`ARCHIVE_SHA256`); a wrong, empty or truncated one
is removed and the next source tried, and when none gives it, one line names
every source and what it answered, and points to the manual steps
(docs/data.md). The checked archive stays in the manual folder and TFDS
prepares its data set from it, so a later ``tfds.load`` needs no network.

A local archive (``--data=path/to/qi18naacl-dataset.tar.gz``) is checked the
same way and its six pt->en files are extracted by name into a cache folder,
never by a path a tar member gives (:func:`extract_archive`).

Tested offline in tests/unit/test_data_sources.py (the sources against a
local HTTP server, the extraction, the real builder preparing from a small
checked archive) and tests/scripts/test_data_download.py (the scripts without
a network, and training from a local archive).
"""

import hashlib
import http.client
import logging as std_logging
import os
from pathlib import Path
import shutil
import sys
import tarfile
import tempfile
from typing import Callable, Iterable, Iterator, NamedTuple, Optional, Sequence
import urllib.error
import urllib.request

from transformer.config import SPLIT_FILE_SUFFIX

TFDS_NAME = "ted_hrlr_translate/pt_to_en"
ARCHIVE_NAME = "qi18naacl-dataset.tar.gz"
# The archive TFDS's ted_hrlr_translate builder downloads (its _DATA_URL), and
# what its checksums.tsv registers for it (both checked against the installed
# package by tests/scripts/test_data_download.py).
ARCHIVE_URL = "http://www.phontron.com/data/" + ARCHIVE_NAME
ARCHIVE_SIZE = 131_005_909
ARCHIVE_SHA256 = "216a86c3df4d4f522856fe9b920ff5be6b394d769cc88974ae8f9f5546953bbc"
# Tried in order after ARCHIVE_URL. The Wayback Machine's capture of that URL;
# "id_" after the timestamp serves the captured bytes as they were, unrewritten.
MIRRORS = ("https://web.archive.org/web/20240301220426id_/" + ARCHIVE_URL,)
# The paragraph of docs/data.md with the steps to take by hand.
MANUAL_STEPS = 'docs/data.md, "When no source gives the archive"'
# Seconds a connection or a read may stall before the source counts as silent.
TIMEOUT_S = 30
# The pt->en files inside the archive (TFDS's builder reads the same names).
ARCHIVE_FOLDER = "datasets/pt_to_en"
PAIR_FILES = tuple(f"{language}.{suffix}" for suffix in SPLIT_FILE_SUFFIX.values()
                   for language in ("pt", "en"))
_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_STAMP = ".archive_sha256"


class DownloadError(Exception):
  """The data cannot be had; the message says from where it was tried and what to do."""


class Digest(NamedTuple):
  """The size and SHA-256 an archive must have."""
  size: int
  sha256: str


def pinned() -> Digest:
  """The archive TFDS registers (read at call time, so a test can pin its own)."""
  return Digest(ARCHIVE_SIZE, ARCHIVE_SHA256)


class _DropUnpreparedVariant(std_logging.Filter):
  """Drops TFDS's warning that a version folder has no dataset_info.json."""

  def filter(self, record):
    return "has no dataset_info.json" not in record.getMessage()


# TFDS gives that warning at each look at a data set it has not prepared yet,
# which is every run before the first download: news to nobody, so not shown.
_QUIET_UNPREPARED = _DropUnpreparedVariant()


def import_tfds():
  """tensorflow_datasets, or a DownloadError naming the install that brings it."""
  try:
    # Deferred: tensorflow-datasets imports TensorFlow; only --data=tfds needs it, at its start.
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise DownloadError(f"--data=tfds: tensorflow-datasets cannot be imported ({e}); "
                        "pip install -e '.[tensorflow]' installs it and what it needs") from e
  std_logging.getLogger("absl").addFilter(_QUIET_UNPREPARED)  # added once however often called
  return tfds


def manual_archive(builder) -> Path:
  """Where TFDS looks for a hand-downloaded archive: ``<data dir>/downloads/manual``."""
  # builder.data_dir is <data dir>/ted_hrlr_translate/pt_to_en/<version>.
  return Path(builder.data_dir).parents[2] / "downloads" / "manual" / ARCHIVE_NAME


def check_available() -> None:
  """Fetches the archive (checked) unless TFDS's data set is prepared; a
  DownloadError naming every source tried when no source gives it. Imports
  tensorflow_datasets, not TensorFlow."""
  builder = import_tfds().builder(TFDS_NAME)
  if not builder.is_prepared():
    fetch_archive(manual_archive(builder))


def prepared_builder():
  """The TFDS builder of the pt->en data, prepared from the checked archive if it was not."""
  builder = import_tfds().builder(TFDS_NAME)
  if not builder.is_prepared():
    archive = manual_archive(builder)
    fetch_archive(archive)
    _download_and_prepare(builder, archive)
  return builder


def fetch_archive(dest: Path, urls: Optional[Sequence[str]] = None,
                  expected: Optional[Digest] = None,
                  say: Optional[Callable[[str], None]] = None) -> str:
  """Makes ``dest`` a checked copy of the archive and returns where it came from.

  A copy already at ``dest`` is checked first; then each of ``urls`` (default:
  :data:`ARCHIVE_URL`, then :data:`MIRRORS`) is downloaded beside ``dest`` and
  checked. A copy that fails the check is removed and the next source tried.

  Args:
    dest: where the archive goes.
    urls: the sources, in order.
    expected: the size and SHA-256 a copy must have (default: :func:`pinned`).
    say: called with a line as each download starts (default: printed to
      stderr); a source that does not answer gives no line.

  Returns:
    ``dest`` (as a string) where the copy already there passed, else the URL that gave it.

  Raises:
    DownloadError: no source gave it. One line: every source tried, what each
      answered, and where the manual steps are. Folders this call created are removed.
  """
  urls = (ARCHIVE_URL, *MIRRORS) if urls is None else tuple(urls)
  expected = expected or pinned()
  say = say or _say
  answers = []
  if dest.exists():
    answer = check_archive(dest, expected)
    if answer is None:
      return str(dest)
    dest.unlink()
    answers.append((str(dest), f"{answer}, removed"))
  created = _first_missing(dest.parent)
  dest.parent.mkdir(parents=True, exist_ok=True)
  part = dest.with_name(dest.name + ".part")
  try:
    for url in urls:
      answer = _download(url, part, expected, say)
      if answer is None:
        os.replace(part, dest)
        return url
      part.unlink(missing_ok=True)
      answers.append((url, answer))
  except BaseException:  # Ctrl-C too: no partial file stays.
    part.unlink(missing_ok=True)
    _remove(created)
    raise
  _remove(created)
  tried = "; ".join(f"{source}: {answer}" for source, answer in answers)
  raise DownloadError(f"cannot download the TED HRLR data ({ARCHIVE_NAME}), tried {tried}. "
                      f"Get it by hand as {MANUAL_STEPS} says, then pass "
                      f"--data=path/to/{ARCHIVE_NAME}")


def check_archive(path: Path, expected: Optional[Digest] = None) -> Optional[str]:
  """None where the file at ``path`` is the archive, else what it is instead."""
  with open(path, "rb") as f:
    return _take(iter(lambda: f.read(_CHUNK), b""), expected or pinned())


def _download(url: str, part: Path, expected: Digest,
              say: Callable[[str], None]) -> Optional[str]:
  """Downloads ``url`` into ``part``: None where it is the archive, else what
  the source answered."""
  request = urllib.request.Request(url, headers={"User-Agent": "transformer-pt-en"})
  try:
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, \
        open(part, "wb") as out:
      say(f"data: downloading {url} ({expected.size / 1e6:.0f} MB)")
      return _take(_copied(response, out), expected)
  except urllib.error.HTTPError as e:
    return f"HTTP {e.code} {e.reason}"
  except urllib.error.URLError as e:  # no connection was made
    return f"cannot be reached ({getattr(e.reason, 'strerror', None) or e.reason})"
  except (http.client.HTTPException, OSError) as e:  # a connection that broke or stalled
    received = part.stat().st_size if part.exists() else 0
    return f"broke off after {received:,} bytes ({type(e).__name__})"


def _copied(source, out) -> Iterator[bytes]:
  """The chunks of ``source``, each written to ``out`` as it is read."""
  for chunk in iter(lambda: source.read(_CHUNK), b""):
    out.write(chunk)
    yield chunk


def _take(chunks: Iterable[bytes], expected: Digest) -> Optional[str]:
  """Reads ``chunks`` (no further than one byte past the expected size):
  None where they are the archive, else what they are instead."""
  digest = hashlib.sha256()
  size = 0
  head = b""
  for chunk in chunks:
    size += len(chunk)
    if size > expected.size:
      return f"a file of more than {expected.size:,} bytes"
    digest.update(chunk)
    head = (head + chunk[:2])[:2]
  if size == 0:
    return "an empty file"
  if size < expected.size:
    # A dark host's page of HTML is no archive cut short.
    if head == _GZIP_MAGIC:
      return f"a truncated file ({size:,} of {expected.size:,} bytes)"
    return f"a wrong file ({size:,} bytes, not gzip)"
  if digest.hexdigest() != expected.sha256:
    return (f"a wrong file (SHA-256 {digest.hexdigest()[:8]}..., "
            f"not {expected.sha256[:8]}...)")
  return None


def cache_folder() -> Path:
  """Where a local archive's pt->en files are extracted (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
  root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
  return Path(root) / "transformer-pt-en" / "ted_hrlr_pt_to_en"


def extract_archive(archive: Path, dest: Optional[Path] = None,
                    expected: Optional[Digest] = None) -> Path:
  """The folder of the pt->en files of a local archive, checked, then extracted
  once into ``dest`` (default: :func:`cache_folder`).

  Only the six files of ``datasets/pt_to_en/`` are read, as regular files, and
  written under their own names: no path a member gives is ever written.

  Raises:
    DownloadError: the file is not the archive, or lacks one of the six files.
  """
  expected = expected or pinned()
  dest = dest or cache_folder()
  answer = check_archive(archive, expected)
  if answer is not None:
    raise DownloadError(f"{archive}: {answer}, not the TED HRLR archive {ARCHIVE_NAME} "
                        f"({expected.size:,} bytes, SHA-256 {expected.sha256[:8]}...); "
                        f"see {MANUAL_STEPS}")
  stamp = dest / _STAMP
  if stamp.is_file() and stamp.read_text(encoding="utf-8") == expected.sha256:
    return dest  # extracted before
  dest.parent.mkdir(parents=True, exist_ok=True)
  staging = Path(tempfile.mkdtemp(prefix=".extracting_", dir=dest.parent))
  try:
    _extract_pair_files(archive, staging)
    (staging / _STAMP).write_text(expected.sha256, encoding="utf-8")
    shutil.rmtree(dest, ignore_errors=True)  # an older or broken extraction
    os.replace(staging, dest)
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  return dest


def _extract_pair_files(archive: Path, folder: Path) -> None:
  """Writes the six pt->en files of ``archive`` into ``folder``, by name."""
  wanted = {f"{ARCHIVE_FOLDER}/{name}": name for name in PAIR_FILES}
  found = set()
  with tarfile.open(archive, "r:*") as tar:
    for member in tar:
      name = wanted.get(member.name.removeprefix("./"))
      if name is None or name in found or not member.isfile():
        continue  # other language pairs, links, devices: never written
      with tar.extractfile(member) as source, open(folder / name, "wb") as out:
        shutil.copyfileobj(source, out)
      found.add(name)
  missing = [name for name in PAIR_FILES if name not in found]
  if missing:
    raise DownloadError(f"{archive}: no {', '.join(missing)} under {ARCHIVE_FOLDER}/, "
                        f"not the TED HRLR archive; see {MANUAL_STEPS}")


def _download_and_prepare(builder, archive: Optional[Path] = None) -> None:
  """Prepares the data set, from ``archive`` where given (else TFDS downloads
  it), in a temporary download folder (removed afterwards); on any failure,
  removes the data folders this call created."""
  created = _first_missing(Path(builder.data_dir))
  try:
    with tempfile.TemporaryDirectory(prefix="ted_hrlr_download_") as download_dir:
      if archive is not None:
        # TFDS takes <download_dir>/manual/<its file name> before any download.
        (Path(download_dir) / "manual").mkdir()
        (Path(download_dir) / "manual" / ARCHIVE_NAME).symlink_to(archive.resolve())
      builder.download_and_prepare(download_dir=download_dir)
  except BaseException as e:  # Ctrl-C too: nothing half prepared stays.
    _remove(created)
    if isinstance(e, Exception):
      raise DownloadError(f"downloading the TED HRLR data failed ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); nothing was kept, "
                          "rerun to try again") from e
    raise


def _say(line: str) -> None:
  print(line, file=sys.stderr, flush=True)


def _remove(folder: Optional[Path]) -> None:
  if folder is not None:
    shutil.rmtree(folder, ignore_errors=True)


def _first_missing(path: Path) -> Optional[Path]:
  """The outermost of ``path`` and its parents that does not exist yet."""
  missing = None
  for folder in (path, *path.parents):
    if folder.exists():
      break
    missing = folder
  return missing
