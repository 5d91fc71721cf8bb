"""The TED HRLR archive from more than one place, each copy checked before use.

TensorFlow Datasets' ``ted_hrlr_translate`` builder downloads one archive
(:data:`ARCHIVE_URL`) from one host, which has gone dark at times. Here it is
taken from, in order: TFDS's folder for hand-downloaded files
(``<data dir>/downloads/manual``, where ``tfds.load`` looks first), TFDS's
host, then each of :data:`MIRRORS`. Every copy must have the size and SHA-256
TFDS registers (:data:`ARCHIVE_SIZE`, :data:`ARCHIVE_SHA256`); a wrong one is
removed and the next source tried; when none gives it, one line names every
source, what it answered, and the manual steps (docs/data.md). The checked
archive stays in the manual folder, so a later ``tfds.load`` needs no network.

A local archive (``--data=path/to/qi18naacl-dataset.tar.gz``) is checked the
same way and its pt->en files extracted (:func:`extract_archive`).
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
from transformer.run.runtime import user_cache
from transformer.run.errors import DataError

TFDS_NAME = "ted_hrlr_translate/pt_to_en"
ARCHIVE_NAME = "qi18naacl-dataset.tar.gz"
# TFDS's _DATA_URL and checksums.tsv entry (tests/scripts/test_data_download.py checks them).
ARCHIVE_URL = "http://www.phontron.com/data/" + ARCHIVE_NAME
ARCHIVE_SIZE = 131_005_909
ARCHIVE_SHA256 = "216a86c3df4d4f522856fe9b920ff5be6b394d769cc88974ae8f9f5546953bbc"
# Tried after ARCHIVE_URL: the Wayback Machine's capture ("id_": the bytes unrewritten).
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


class Digest(NamedTuple):
  """The size and SHA-256 an archive must have."""
  size: int
  sha256: str


def pinned() -> Digest:
  """The archive TFDS registers (read at call time, so a test can pin its own)."""
  return Digest(ARCHIVE_SIZE, ARCHIVE_SHA256)


def _drop_unprepared_warning(record) -> bool:
  # TFDS's warning at every run before the first download: news to nobody.
  return "has no dataset_info.json" not in record.getMessage()


def import_tfds():
  """tensorflow_datasets, or a DataError naming the install that brings it."""
  try:
    # Deferred: tensorflow-datasets imports TensorFlow; only --data=tfds needs it, at its start.
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise DataError(f"--data=tfds: tensorflow-datasets cannot be imported ({e}); "
                        "pip install -e '.[tensorflow]' installs it and what it needs") from e
  std_logging.getLogger("absl").addFilter(_drop_unprepared_warning)  # once however often called
  return tfds


def manual_archive(builder) -> Path:
  """``<data dir>/downloads/manual/<archive>``, where TFDS looks first
  (``builder.data_dir`` is ``<data dir>/ted_hrlr_translate/pt_to_en/<version>``)."""
  return Path(builder.data_dir).parents[2] / "downloads" / "manual" / ARCHIVE_NAME


def check_available() -> None:
  """Fetches the archive (checked) unless TFDS's data set is prepared, or raises
  :func:`fetch_archive`'s DataError. Imports tensorflow_datasets, not TensorFlow."""
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
  """Makes ``dest`` a checked copy of the archive: the copy already there, else
  the first of ``urls`` (default: :data:`ARCHIVE_URL`, then :data:`MIRRORS`)
  whose download passes (:func:`pinned` unless ``expected``). Returns ``dest``
  or the URL; ``say`` (default: stderr) hears each download start. When no
  source gives it, a one-line DataError names each source and its answer,
  and the folders this call created are removed."""
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
  raise DataError(f"cannot download the TED HRLR data ({ARCHIVE_NAME}), tried {tried}. "
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
  """None where ``chunks`` are the archive, else what they are instead (read no
  further than past the expected size)."""
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


def extract_archive(archive: Path, dest: Optional[Path] = None,
                    expected: Optional[Digest] = None) -> Path:
  """The folder of a local archive's pt->en files, checked, then extracted once
  into ``dest`` (default: the user's cache folder): only the six regular files of
  ``datasets/pt_to_en/``, under their own names. DataError when the file
  is not the archive."""
  expected = expected or pinned()
  dest = dest or user_cache("ted_hrlr_pt_to_en")
  answer = check_archive(archive, expected)
  if answer is not None:
    raise DataError(f"{archive}: {answer}, not the TED HRLR archive {ARCHIVE_NAME} "
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
    raise DataError(f"{archive}: no {', '.join(missing)} under {ARCHIVE_FOLDER}/, "
                        f"not the TED HRLR archive; see {MANUAL_STEPS}")


def _download_and_prepare(builder, archive: Optional[Path] = None) -> None:
  """Prepares the data set from ``archive`` (else TFDS downloads it); on any
  failure, removes the data folders this call created."""
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
      raise DataError(f"downloading the TED HRLR data failed ({type(e).__name__}: "
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
