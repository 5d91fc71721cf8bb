"""The data where ../shared is absent: TensorFlow Datasets' real builder on a
machine without a network says in one line what to do, within seconds, and
leaves nothing behind; a named --data that does not exist is one line, never
a download. ``--data=auto``'s choice: tests/unit/test_console_plan.py; the
download's code: transformer/data/download.py.
"""

import os
from pathlib import Path
import subprocess
import sys
import time

import pytest

from helpers.no_network import BLOCK_NETWORK

ROOT = Path(__file__).resolve().parents[2]

# Runs a script as __main__ after the network blocker, reporting how often
# the network was tried (the last stderr line).
RUN_OFFLINE = BLOCK_NETWORK + """
import atexit
import os
import runpy
import sys
from transformer.data import sources
if os.environ.get("LOCAL_DATA"):  # where --data=auto looks for the local copy
  sources.LOCAL_DATA = sources.Path(os.environ["LOCAL_DATA"])
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


def test_the_archive_url_is_the_builders():
  # The installed builder's own metadata, no stand-in module: the host the
  # reachability check tries is the one TFDS downloads from.
  from transformer.data import download  # pylint: disable=g-import-not-at-top
  tfds = download.import_tfds()
  builder = tfds.builder(download.TFDS_NAME, data_dir="/nonexistent/tfds")
  assert sys.modules[type(builder).__module__]._DATA_URL == download.ARCHIVE_URL
  assert not Path("/nonexistent/tfds").exists()


@pytest.mark.slow
@pytest.mark.parametrize("script", ["train.py", "prepare.py"])
def test_tfds_without_a_network_is_one_line_within_seconds_and_leaves_nothing(tmp_path, script):
  model_dir = tmp_path / "run"
  args = ([script, "--config=configs/tiny.py", f"--model_dir={model_dir}"] if script == "train.py"
          else [script, "--config=configs/tiny.py", f"--output={tmp_path / 'prepared'}"])
  result, seconds = _offline(tmp_path, *args, "--data=tfds")
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1, result.stderr
  assert lines[-2] == (f"{script}: error: cannot download the TED HRLR data: www.phontron.com "
                       "cannot be reached (Name or service not known). Connect to the internet, "
                       "or pass --data=FOLDER with the files pt.train en.train pt.dev en.dev "
                       "pt.test en.test"), result.stderr
  assert lines[-1] == "network tried 1 times"  # one look-up, no retries
  assert [line for line in lines[:-2] if "error" in line.lower() or "Retrying" in line] == []
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
      f"train.py: error: no local copy of the data at {absent}, and cannot download the TED "
      "HRLR data: www.phontron.com cannot be reached (Name or service not known). Connect to "
      "the internet, or pass --data=FOLDER with the files pt.train en.train pt.dev en.dev "
      "pt.test en.test",
      "network tried 1 times"], result.stderr
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
      "pt.dev en.dev pt.test en.test, or --data=tfds to download the data",
      "network tried 0 times"]
  assert not (tmp_path / "run").exists()
