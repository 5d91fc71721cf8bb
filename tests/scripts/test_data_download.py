"""The data where ../shared is absent: TensorFlow Datasets' real builder on a
machine without a network gives one line naming every source it tried and
what to do, within seconds, and leaves nothing behind; the real builder
prepares the same pairs from a checked archive as the local reader reads; a
named --data that does not exist is one line, never a download.
``--data=auto``'s choice: tests/unit/test_console_plan.py; the sources tried
against a local HTTP server: tests/unit/test_data_sources.py; the code:
transformer/data/download.py.
"""

import hashlib
import os
from pathlib import Path
import subprocess
import sys
import tarfile
import time

import pytest

from helpers.no_network import BLOCK_NETWORK
from transformer.data import download

ROOT = Path(__file__).resolve().parents[2]

# Runs a script as __main__ after the network blocker, reporting how often
# the network was tried (the last stderr line).
RUN_OFFLINE = BLOCK_NETWORK + """
import atexit
import os
import runpy
import sys
from transformer.data import download, sources
if os.environ.get("LOCAL_DATA"):  # where --data=auto looks for the local copy
  sources.LOCAL_DATA = sources.Path(os.environ["LOCAL_DATA"])
if os.environ.get("ARCHIVE_DIGEST"):  # a small test archive's "size sha256", pinned
  size, download.ARCHIVE_SHA256 = os.environ["ARCHIVE_DIGEST"].split()
  download.ARCHIVE_SIZE = int(size)
atexit.register(lambda: print(f"network tried {len(NETWORK_TRIED)} times", file=sys.stderr))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _offline(tmp_path, *args, **env):
  """Runs ``args`` (a script and its flags) offline with an empty home and
  TFDS data folder, and ``env``; returns (result, seconds)."""
  env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path / "home"),
         "TFDS_DATA_DIR": str(tmp_path / "tfds"), **env}
  (tmp_path / "home").mkdir()
  start = time.monotonic()
  result = subprocess.run([sys.executable, "-c", RUN_OFFLINE, *args], cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
  return result, time.monotonic() - start


def test_the_archive_url_and_its_digest_are_the_builders():
  # The installed builder's own metadata, no stand-in module: the first
  # source is the URL TFDS downloads, and the pinned size and SHA-256 are the
  # ones its checksums.tsv registers for it.
  tfds = download.import_tfds()
  builder = tfds.builder(download.TFDS_NAME, data_dir="/nonexistent/tfds")
  assert sys.modules[type(builder).__module__]._DATA_URL == download.ARCHIVE_URL
  registered = type(builder).url_infos[download.ARCHIVE_URL]
  assert (registered.size, registered.checksum) == download.pinned()
  assert registered.filename == download.ARCHIVE_NAME  # the name TFDS takes from manual/
  assert not Path("/nonexistent/tfds").exists()


def _offline_error(script):
  """The line a script ends with where no source can be reached."""
  tried = "; ".join(f"{url}: cannot be reached (Name or service not known)"
                    for url in (download.ARCHIVE_URL, *download.MIRRORS))
  return (f"{script}: error: cannot download the TED HRLR data ({download.ARCHIVE_NAME}), "
          f"tried {tried}. Get it by hand as {download.MANUAL_STEPS} says, then pass "
          f"--data=path/to/{download.ARCHIVE_NAME}")


@pytest.mark.slow
@pytest.mark.parametrize("script", ["train.py", "prepare.py", "evaluate.py"])
def test_tfds_without_a_network_is_one_line_within_seconds_and_leaves_nothing(tmp_path, script):
  flags = {"train.py": ["--config=configs/tiny.py", f"--model_dir={tmp_path / 'run'}"],
           "prepare.py": ["--config=configs/tiny.py", f"--output={tmp_path / 'prepared'}"],
           "evaluate.py": [f"--model_dir={tmp_path / 'run'}"]}[script]
  result, seconds = _offline(tmp_path, script, *flags, "--data=tfds")
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1, result.stderr
  assert lines[-2] == _offline_error(script), result.stderr
  # One look-up a source, no retries.
  assert lines[-1] == f"network tried {1 + len(download.MIRRORS)} times"
  # Nor TFDS's warning that the data set it has not prepared has no dataset_info.json.
  assert [line for line in lines[:-2] if "error" in line.lower() or "Retrying" in line
          or "dataset_info" in line] == []
  assert seconds < 60  # the import of TensorFlow is most of it
  assert not (tmp_path / "tfds").exists()
  assert not (tmp_path / "prepared").exists()


@pytest.mark.slow
def test_the_readmes_main_command_without_shared_or_a_network_is_one_line(tmp_path):
  # A clone without ../shared: --data=auto finds no local copy and would download.
  absent = tmp_path / "shared" / "data" / "ted_hrlr_pt_to_en"
  model_dir = tmp_path / "runs" / "cpu_2h"
  result, seconds = _offline(tmp_path, "train.py", "--config=configs/cpu_2h.py:clock",
                             f"--model_dir={model_dir}", LOCAL_DATA=str(absent))
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      _offline_error("train.py").replace(
          "error: ", f"error: no local copy of the data at {absent}, and ", 1),
      f"network tried {1 + len(download.MIRRORS)} times"], result.stderr
  assert seconds < 30  # asked before TensorFlow is imported
  assert not (tmp_path / "tfds").exists() and not model_dir.parent.exists()


@pytest.mark.slow
def test_a_named_data_folder_that_does_not_exist_is_an_error_not_a_download(tmp_path):
  typo = tmp_path / "ted_hrlr_pt_to_enn"
  result, _ = _offline(tmp_path, "train.py", "--config=configs/tiny.py",
                       f"--model_dir={tmp_path / 'run'}", f"--data={typo}")
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      f"train.py: error: --data={typo}: no such folder; pass a folder with pt.train en.train "
      f"pt.dev en.dev pt.test en.test, the archive {download.ARCHIVE_NAME}, or --data=tfds to "
      "download the data",
      "network tried 0 times"]
  assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_local_archive_trains_offline(tmp_path, ted_data_dir, tutorial_tokenizer_path):
  # The archive's layout, with the first lines of each real file.
  archive = tmp_path / download.ARCHIVE_NAME
  with tarfile.open(archive, "w:gz") as tar:
    for name in download.PAIR_FILES:
      lines = (ted_data_dir / name).read_bytes().splitlines(keepends=True)[:40]
      (tmp_path / name).write_bytes(b"".join(lines))
      tar.add(tmp_path / name, f"{download.ARCHIVE_FOLDER}/{name}")
  digest = f"{archive.stat().st_size} {hashlib.sha256(archive.read_bytes()).hexdigest()}"
  result, _ = _offline(tmp_path, "train.py", "--config=configs/tiny.py",
                       "--config.training.train_steps=2", "--bleu_examples=0", "--noexport",
                       f"--data={archive}", f"--tokenizer={tutorial_tokenizer_path}",
                       f"--model_dir={tmp_path / 'run'}", ARCHIVE_DIGEST=digest,
                       XDG_CACHE_HOME=str(tmp_path / "cache"), TF_CPP_MIN_LOG_LEVEL="2")
  assert result.returncode == 0, result.stderr[-3000:]
  extracted = tmp_path / "cache" / "transformer-pt-en" / "ted_hrlr_pt_to_en"
  assert f"data: {archive} (checked), its pt->en files extracted to {extracted}" in result.stderr
  assert result.stderr.strip().splitlines()[-1] == "network tried 0 times"
  assert (tmp_path / "run" / "checkpoints").is_dir()


def test_the_help_names_no_folder_of_this_machine():
  result = subprocess.run([sys.executable, "train.py", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
  # The examples are paths a user anywhere has; only --data=auto's rule names ../shared.
  assert "tutorial_tokenizer" not in result.stdout
  assert "--tokenizer=path/to/ted_hrlr_translate_pt_en_converter" in result.stdout
  assert "--data=path/to/qi18naacl-dataset.tar.gz" in result.stdout
