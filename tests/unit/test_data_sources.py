"""The archive from more than one place, checked: sources tried in order
against a real HTTP server on 127.0.0.1 (a 404, an empty file, a truncated
file, a wrong file, a broken transfer, a good small archive with its own
digest), what stays on disk, the one-line error; a local archive as --data
(checked, extracted by name only); TFDS's warning about an unprepared folder.
The real builder preparing from a checked archive, and a machine without a
network: tests/scripts/test_data_download.py. The code: transformer/data/download.py.
"""

import hashlib
import http.server
import io
import logging
from pathlib import Path
import socket
import tarfile
import threading

import pytest

from transformer.data import download
from transformer.data import sources
from transformer.data import ted
from transformer.run.errors import DataError

# What a dark host may serve with a 200 in place of the archive.
PAGE = b"<html><body>This domain has expired.</body></html>"
# A few pairs per split, in the archive's layout (datasets/<pair>/<language>.<suffix>).
PAIRS = {suffix: [(f"frase {suffix} {i} .", f"sentence {suffix} {i} .") for i in range(7)]
         for suffix in ("train", "dev", "test")}


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
  member = tarfile.TarInfo(name)
  member.size = len(data)
  tar.addfile(member, io.BytesIO(data))


def ted_archive(path: Path, extra=()) -> download.Digest:
  """Writes a small archive with the TED files' layout at ``path`` (and
  ``extra``, members added first); returns its size and SHA-256."""
  with tarfile.open(path, "w:gz") as tar:
    for member, data in extra:
      tar.addfile(member, io.BytesIO(data) if data is not None else None)
    for suffix, pairs in PAIRS.items():
      for index, language in enumerate(("pt", "en")):
        text = "".join(pair[index] + "\n" for pair in pairs).encode()
        _add(tar, f"datasets/pt_to_en/{language}.{suffix}", text)
        _add(tar, f"datasets/az_to_en/{language}.{suffix}", b"another pair\n")
  data = path.read_bytes()
  return download.Digest(len(data), hashlib.sha256(data).hexdigest())


@pytest.fixture
def archive(tmp_path):
  path = tmp_path / "made" / download.ARCHIVE_NAME
  path.parent.mkdir()
  return path, ted_archive(path)


class _Server(http.server.ThreadingHTTPServer):
  """Serves ``routes`` ({path: (status, body, declared length)}) and notes each path asked."""

  def __init__(self, routes):
    super().__init__(("127.0.0.1", 0), _Handler)
    self.routes = routes
    self.asked = []

  def url(self, path):
    return f"http://127.0.0.1:{self.server_address[1]}{path}"


class _Handler(http.server.BaseHTTPRequestHandler):

  def do_GET(self):  # pylint: disable=invalid-name
    self.server.asked.append(self.path)
    status, body, length = self.server.routes.get(self.path, (404, b"", 0))
    self.send_response(status)
    self.send_header("Content-Length", str(length))
    self.end_headers()
    self.wfile.write(body)  # fewer bytes than declared: the connection closes early

  def log_message(self, *args):  # pylint: disable=arguments-differ
    pass


@pytest.fixture
def server(archive, monkeypatch):
  """A server on 127.0.0.1 with a good archive, a 404, an empty 200, a
  truncated copy, a wrong file of the right size, a page of HTML, a file
  longer than the archive and a transfer that breaks off."""
  monkeypatch.setenv("no_proxy", "127.0.0.1")  # a user's proxy settings never see it
  good = archive[0].read_bytes()
  half = good[:len(good) // 2]
  wrong = bytes(reversed(good))
  routes = {"/good.tar.gz": (200, good, len(good)),
            "/missing.tar.gz": (404, b"", 0),
            "/empty.tar.gz": (200, b"", 0),
            "/truncated.tar.gz": (200, half, len(half)),
            "/wrong.tar.gz": (200, wrong, len(wrong)),
            "/cut.tar.gz": (200, half, len(good)),
            "/page.html": (200, PAGE, len(PAGE)),
            "/long.tar.gz": (200, good + b"more", len(good) + 4)}
  server = _Server(routes)
  thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                            daemon=True)
  thread.start()
  yield server
  server.shutdown()
  server.server_close()
  thread.join(timeout=10)
  assert not thread.is_alive()


@pytest.fixture
def closed_port():
  """A port on 127.0.0.1 where nothing listens."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def test_sources_are_tried_in_order_and_every_wrong_copy_is_removed(tmp_path, archive, server,
                                                                    monkeypatch):
  monkeypatch.setattr(download, "TIMEOUT_S", 5)
  names = ["missing", "empty", "truncated", "wrong", "cut", "good"]
  dest = tmp_path / "tfds" / "downloads" / "manual" / download.ARCHIVE_NAME
  removed = []
  real_unlink = Path.unlink

  def unlink(path, missing_ok=False):
    removed.append((path.name, path.exists()))
    real_unlink(path, missing_ok=missing_ok)
  monkeypatch.setattr(Path, "unlink", unlink)
  said = []
  got = download.fetch_archive(dest, [server.url(f"/{name}.tar.gz") for name in names],
                               archive[1], said.append)
  assert got == server.url("/good.tar.gz")
  assert server.asked == [f"/{name}.tar.gz" for name in names]
  assert dest.read_bytes() == archive[0].read_bytes()
  assert [p.name for p in dest.parent.iterdir()] == [download.ARCHIVE_NAME]
  # The 404 wrote nothing; each copy that came and failed the check was removed.
  part = download.ARCHIVE_NAME + ".part"
  assert [exists for name, exists in removed if name == part] == [False, True, True, True, True]
  assert said == [f"data: downloading {server.url(f'/{name}.tar.gz')} (0 MB)"
                  for name in names[1:]]


def test_no_source_is_one_line_naming_each_and_what_it_answered(tmp_path, archive, server,
                                                                closed_port, monkeypatch):
  monkeypatch.setattr(download, "TIMEOUT_S", 5)
  size = archive[1].size
  urls = [server.url(f"/{name}.tar.gz") for name in ("missing", "empty", "truncated", "wrong")]
  urls += [server.url("/page.html"), server.url("/long.tar.gz"),
           f"http://127.0.0.1:{closed_port}/{download.ARCHIVE_NAME}"]
  dest = tmp_path / "tfds" / "downloads" / "manual" / download.ARCHIVE_NAME
  with pytest.raises(DataError) as raised:
    download.fetch_archive(dest, urls, archive[1], lambda line: None)
  sha = archive[1].sha256[:8]
  wrong_sha = hashlib.sha256(bytes(reversed(archive[0].read_bytes()))).hexdigest()[:8]
  assert str(raised.value) == (
      f"cannot download the TED HRLR data ({download.ARCHIVE_NAME}), tried "
      f"{urls[0]}: HTTP 404 Not Found; "
      f"{urls[1]}: an empty file; "
      f"{urls[2]}: a truncated file ({size // 2:,} of {size:,} bytes); "
      f"{urls[3]}: a wrong file (SHA-256 {wrong_sha}..., not {sha}...); "
      f"{urls[4]}: a wrong file ({len(PAGE)} bytes, not gzip); "
      f"{urls[5]}: a file of more than {size:,} bytes; "
      f"{urls[6]}: cannot be reached (Connection refused). "
      f"Get it by hand as {download.MANUAL_STEPS} says, then pass "
      f"--data=path/to/{download.ARCHIVE_NAME}")
  assert server.asked == ["/missing.tar.gz", "/empty.tar.gz", "/truncated.tar.gz", "/wrong.tar.gz",
                          "/page.html", "/long.tar.gz"]
  assert not (tmp_path / "tfds").exists()  # the folders it made are gone too


def test_the_default_sources_are_tfds_host_then_the_wayback_machines_raw_copy():
  assert download.ARCHIVE_URL == "http://www.phontron.com/data/qi18naacl-dataset.tar.gz"
  assert download.MIRRORS[0] == ("https://web.archive.org/web/20240301220426id_/"
                                 "http://www.phontron.com/data/qi18naacl-dataset.tar.gz")
  assert download.pinned() == (131_005_909, "216a86c3df4d4f522856fe9b920ff5be6b394d769cc8897"
                                            "4ae8f9f5546953bbc")


def test_a_copy_in_place_is_used_if_good_and_replaced_if_not(tmp_path, archive, server):
  dest = tmp_path / download.ARCHIVE_NAME
  dest.write_bytes(archive[0].read_bytes())
  good = server.url("/good.tar.gz")
  assert download.fetch_archive(dest, [good], archive[1], lambda line: None) == str(dest)
  assert server.asked == []
  dest.write_bytes(archive[0].read_bytes()[:100])
  assert download.fetch_archive(dest, [good], archive[1], lambda line: None) == good
  assert dest.read_bytes() == archive[0].read_bytes()
  dest.write_bytes(b"")
  with pytest.raises(DataError, match=rf"tried {dest}: an empty file, removed; "):
    download.fetch_archive(dest, [server.url("/missing.tar.gz")], archive[1], lambda line: None)
  assert not dest.exists()


def _pin(monkeypatch, digest):
  monkeypatch.setattr(download, "ARCHIVE_SIZE", digest.size)
  monkeypatch.setattr(download, "ARCHIVE_SHA256", digest.sha256)


def test_a_local_archive_as_data_gives_the_pairs_of_its_folder(tmp_path, archive, monkeypatch):
  path, digest = archive
  _pin(monkeypatch, digest)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  folder, message = sources.data_source(str(path))
  assert Path(folder) == tmp_path / "cache" / "transformer-pt-en" / "ted_hrlr_pt_to_en"
  assert message == f"data: {path} (checked), its pt->en files extracted to {folder}"
  assert sorted(p.name for p in Path(folder).iterdir()) == sorted(
      download.PAIR_FILES + (".archive_sha256",))
  for split, suffix in (("train", "train"), ("validation", "dev"), ("test", "test")):
    pairs = PAIRS[suffix]
    assert ted.local_split_pairs(folder, split) == [pairs[i] for i in ted.tfds_order(7, split)]
  # Extracted once: a second run reads the same folder without writing it.
  stamp = Path(folder) / ".archive_sha256"
  written = stamp.stat().st_mtime_ns
  assert sources.resolve_data(str(path))[0] == folder
  assert stamp.stat().st_mtime_ns == written


def test_a_named_file_that_is_not_the_archive_is_an_error_and_is_kept(tmp_path, archive,
                                                                      monkeypatch):
  _pin(monkeypatch, archive[1])
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  named = tmp_path / "copy.tar.gz"
  size = archive[1].size
  named.write_bytes(archive[0].read_bytes()[:size // 2])
  with pytest.raises(DataError) as raised:
    sources.resolve_data(str(named))
  assert str(raised.value) == (
      f"--data={named}: a truncated file ({size // 2:,} of {size:,} bytes), not the TED HRLR "
      f"archive {download.ARCHIVE_NAME} ({size:,} bytes, SHA-256 "
      f"{archive[1].sha256[:8]}...); see {download.MANUAL_STEPS}")
  assert named.exists() and not (tmp_path / "cache").exists()


def _member(name, kind=tarfile.REGTYPE, data=b"", target=""):
  member = tarfile.TarInfo(name)
  member.type, member.size, member.linkname = kind, len(data), target
  return member, data if kind == tarfile.REGTYPE else None


def test_extraction_writes_the_six_files_by_name_and_nothing_a_member_path_says(tmp_path,
                                                                               monkeypatch):
  monkeypatch.chdir(tmp_path)
  outside = tmp_path / "outside"
  hostile = [_member("../outside/evil", data=b"x"),
             _member(str(outside / "absolute"), data=b"x"),
             _member("datasets/pt_to_en/../../../outside/up", data=b"x"),
             # A link under a wanted name, before the real file: skipped, not followed.
             _member("datasets/pt_to_en/pt.train", tarfile.SYMTYPE, target=str(outside / "t")),
             _member("datasets/pt_to_en/en.train", tarfile.LNKTYPE, target="/etc/passwd")]
  path = tmp_path / download.ARCHIVE_NAME
  digest = ted_archive(path, hostile)
  dest = tmp_path / "extracted" / "ted_hrlr_pt_to_en"
  assert download.extract_archive(path, dest, digest) == dest
  assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted(
      (download.ARCHIVE_NAME, ".archive_sha256") + download.PAIR_FILES)
  assert not outside.exists() and not (tmp_path / "evil").exists()
  assert ted.local_split_pairs(dest, "train")[0] in PAIRS["train"]


def test_an_archive_whose_file_is_only_a_link_is_refused_and_leaves_nothing(tmp_path):
  path = tmp_path / "links.tar.gz"
  with tarfile.open(path, "w:gz") as tar:
    for name in download.PAIR_FILES:
      member, _ = _member(f"datasets/pt_to_en/{name}", tarfile.SYMTYPE, target="/etc/passwd")
      tar.addfile(member)
  data = path.read_bytes()
  digest = download.Digest(len(data), hashlib.sha256(data).hexdigest())
  with pytest.raises(DataError, match=r": no pt\.train, en\.train, .* under "
                                                   r"datasets/pt_to_en/, not the TED HRLR"):
    download.extract_archive(path, tmp_path / "cache" / "ted", digest)
  assert list((tmp_path / "cache").iterdir()) == []  # the staging folder is gone


class _PreparingBuilder:
  """A TFDS builder stand-in noting what its download folder's manual/ holds."""

  def __init__(self, data_dir):
    self.data_dir = str(data_dir)
    self.manual = None

  def download_and_prepare(self, download_dir):
    archive = Path(download_dir) / "manual" / download.ARCHIVE_NAME
    self.manual = archive.read_bytes()


def test_tfds_prepares_from_the_checked_archive_through_its_manual_folder(tmp_path, archive):
  builder = _PreparingBuilder(tmp_path / "tfds" / "ted_hrlr_translate" / "pt_to_en" / "1.0.0")
  assert download.manual_archive(builder) == (tmp_path / "tfds" / "downloads" / "manual" /
                                              download.ARCHIVE_NAME)
  download._download_and_prepare(builder, archive[0])  # pylint: disable=protected-access
  assert builder.manual == archive[0].read_bytes()


def test_tfds_says_nothing_of_a_folder_it_has_not_prepared(tmp_path, monkeypatch, caplog):
  tfds = download.import_tfds()
  with caplog.at_level(logging.INFO):
    builder = tfds.builder(download.TFDS_NAME, data_dir=str(tmp_path / "tfds"))
    assert not builder.is_prepared()
  assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.slow
def test_the_real_builder_prepares_from_the_archive_the_pairs_the_local_reader_reads(
    tmp_path, archive, monkeypatch):
  path, digest = archive
  tfds = download.import_tfds()
  builder = tfds.builder(download.TFDS_NAME, data_dir=str(tmp_path / "tfds"))
  # The small archive registered in place of the real one; the network closed.
  registered = tfds.core.download.checksums.UrlInfo(size=digest.size, checksum=digest.sha256,
                                                    filename=download.ARCHIVE_NAME)
  monkeypatch.setattr(type(builder), "url_infos", {download.ARCHIVE_URL: registered})

  def no_network(*args, **kwargs):
    raise socket.gaierror(socket.EAI_NONAME, "no network in this test")
  monkeypatch.setattr(socket, "getaddrinfo", no_network)
  download._download_and_prepare(builder, path)  # pylint: disable=protected-access
  assert builder.is_prepared()
  folder = download.extract_archive(path, tmp_path / "extracted", digest)
  for split in ted.SPLITS:
    prepared = builder.as_dataset(split=split, as_supervised=True).as_numpy_iterator()
    assert [(pt.decode(), en.decode()) for pt, en in prepared] == ted.local_split_pairs(
        folder, split)


# pylint: disable=protected-access
def test_a_skip_for_absent_data_says_what_to_put_there_not_a_file_inside_it(tmp_path):
  from helpers import fixtures  # pylint: disable=g-import-not-at-top
  absent = tmp_path / "shared" / "data" / "ted_hrlr_pt_to_en"
  with pytest.raises(pytest.skip.Exception) as skipped:
    fixtures._require(absent, "TED HRLR pt-en data", fixtures._TED_FILES)
  assert str(skipped.value) == (
      f"TED HRLR pt-en data not found at {absent}; to run this test, put the files of "
      "datasets/pt_to_en/ in qi18naacl-dataset.tar.gz (docs/data.md) there")
