"""Bad input to translate.py and train.py: one ``<script>: error: ...`` line and
a non-zero exit status, never a traceback. No case trains."""

import json
import os
from pathlib import Path
import pty
import re
import subprocess
import sys

import pytest

from configs import tiny

# Each test runs a script in a fresh Python that imports TensorFlow.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
GOOD_LINES = ["este é um problema que temos que resolver .", "olá ."]
NOT_UTF8 = b"\xff\xfe mau"  # 0xff never occurs in UTF-8.
AFTER = "mais uma frase ."


def run_script(script, *args, stdin=subprocess.DEVNULL, timeout=300):
  """Runs ``script`` from the repository root; stdin: bytes, a file descriptor
  or DEVNULL. TF_CPP_MIN_LOG_LEVEL is removed: the scripts' defaults are tested."""
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  env["PYTHONPATH"] = str(ROOT)
  feed = {"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}
  return subprocess.run([sys.executable, script, *map(str, args)], cwd=ROOT, env=env,
                        capture_output=True, timeout=timeout, check=False, **feed)


def error_line(result, script, status=1):
  """The one error line of a run that must have failed with ``status``."""
  stderr = result.stderr.decode("utf-8", "replace")
  assert result.returncode == status, stderr[-3000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  errors = [line for line in stderr.splitlines() if line.startswith(f"{script}: error: ")]
  assert len(errors) == 1, stderr[-3000:]
  return errors[0]


# ------------------------------------------------------------ translate.py

@pytest.fixture(scope="module")
def translate_greedy(tiny_translator_dir):
  """Greedy translations in this process, as translate.py's stdout would hold them."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  translator = tf.saved_model.load(str(tiny_translator_dir))
  return lambda sentences: b"".join(
      t + b"\n" for t in translator.translate_greedy(tf.constant(sentences)).numpy())


@pytest.mark.parametrize("source", ["input_file", "stdin"])
def test_translate_names_the_line_that_is_not_utf8(tmp_path, tiny_translator_dir,
                                                   translate_greedy, source):
  text = "".join(f"{line}\n" for line in GOOD_LINES).encode() + NOT_UTF8 + f"\n{AFTER}\n".encode()
  if source == "input_file":
    path = tmp_path / "sentences.pt"
    path.write_bytes(text)
    result = run_script("translate.py", f"--export_dir={tiny_translator_dir}",
                        "--method=greedy", f"--input_file={path}")
    where = str(path)
  else:
    result = run_script("translate.py", f"--export_dir={tiny_translator_dir}",
                        "--method=greedy", "-", stdin=text)
    where = "stdin"
  line = error_line(result, "translate.py")
  assert line.startswith(f"translate.py: error: {where}: line 3 is not valid UTF-8"), line
  # The lines before the bad one, translated although their batch was not full.
  assert result.stdout == translate_greedy(GOOD_LINES)


def test_translate_replaces_bytes_that_are_not_utf8_on_request(tiny_translator_dir,
                                                               translate_greedy):
  text = GOOD_LINES[0].encode() + b"\n" + NOT_UTF8 + f"\n{AFTER}\n".encode()
  result = run_script("translate.py", f"--export_dir={tiny_translator_dir}",
                      "--method=greedy", "--invalid_utf8=replace", stdin=text)
  assert result.returncode == 0, result.stderr.decode()[-3000:]
  assert result.stdout == translate_greedy([GOOD_LINES[0], "\ufffd\ufffd mau", AFTER])


def test_translate_reads_stdin_when_given_no_sentences(tiny_translator_dir, translate_greedy):
  result = run_script("translate.py", f"--export_dir={tiny_translator_dir}",
                      "--method=greedy", stdin="\n".join(GOOD_LINES).encode())
  assert result.returncode == 0, result.stderr.decode()[-3000:]
  assert result.stdout == translate_greedy(GOOD_LINES)


def test_translate_at_a_terminal_without_sentences_prints_usage(tmp_path):
  controller, terminal = pty.openpty()
  try:
    result = run_script("translate.py", f"--export_dir={tmp_path}", stdin=terminal,
                        timeout=60)
  finally:
    os.close(controller)
    os.close(terminal)
  line = error_line(result, "translate.py", status=2)
  assert "no sentences" in line
  assert "python translate.py --export_dir DIR" in result.stderr.decode()  # the usage
  assert result.stdout == b""


def test_translate_sentences_and_input_file_together_is_a_usage_error(tmp_path):
  result = run_script("translate.py", f"--export_dir={tmp_path}",
                      f"--input_file={tmp_path / 'x.pt'}", "olá .", timeout=60)
  assert "not both" in error_line(result, "translate.py", status=2)


def test_translate_missing_input_file(tmp_path):
  result = run_script("translate.py", f"--export_dir={tmp_path}",
                      f"--input_file={tmp_path / 'x.pt'}", timeout=60)
  assert "x.pt: No such file or directory" in error_line(result, "translate.py")


def _bad_export_dir(kind, tmp_path, tiny_translator_dir, tutorial_tokenizer_path):
  """A --export_dir that is not a translator SavedModel, and what the error says."""
  if kind == "missing":
    return tmp_path / "nonexistent", "no such folder"
  if kind == "keras_file":
    path = tmp_path / "transformer.keras"
    path.write_bytes(b"PK\x03\x04")
    return path, "not a folder"
  if kind == "checkpoint_folder":
    for name in ("checkpoint", "ckpt-5.index", "ckpt-5.data-00000-of-00001"):
      (tmp_path / name).write_bytes(b"\0")
    return tmp_path, r"not a SavedModel \(no saved_model.pb\)"
  if kind == "corrupt_saved_model":
    (tmp_path / "saved_model.pb").write_bytes(b"not a protocol buffer")
    return tmp_path, "cannot load the SavedModel"
  assert kind == "tokenizer_saved_model"
  return tutorial_tokenizer_path, "a SavedModel but not a translator"


@pytest.mark.parametrize("kind", ["missing", "keras_file", "checkpoint_folder",
                                  "corrupt_saved_model", "tokenizer_saved_model"])
def test_translate_export_dir_that_is_not_a_translator(kind, tmp_path, tiny_translator_dir,
                                                       tutorial_tokenizer_path):
  export_dir, message = _bad_export_dir(kind, tmp_path, tiny_translator_dir,
                                        tutorial_tokenizer_path)
  result = run_script("translate.py", f"--export_dir={export_dir}", "olá .")
  line = error_line(result, "translate.py")
  assert re.search(rf"--export_dir={re.escape(str(export_dir))}: {message}", line), line
  assert result.stdout == b""


# ------------------------------------------------------------ train.py

def _write_data(folder, pt_train=b"um .\ndois .\n", en_train=b"one .\ntwo .\n"):
  folder.mkdir(parents=True, exist_ok=True)
  for name, content in (("pt.train", pt_train), ("en.train", en_train),
                        ("pt.dev", b"tres .\n"), ("en.dev", b"three .\n")):
    (folder / name).write_bytes(content)
  return folder


def _train(tmp_path, *args, data=None, tokenizer=None):
  return run_script("train.py", "--config=configs/tiny.py", f"--model_dir={tmp_path / 'run'}",
                    f"--data={data or _write_data(tmp_path / 'data')}",
                    f"--tokenizer={tokenizer or 'build'}", "--bleu_examples=0", "--noexport",
                    *args)


@pytest.mark.parametrize("pt_train,en_train,message", [
    (b"um .\n" + NOT_UTF8 + b"\n", b"one .\ntwo .\n", r"pt.train: line 2 is not valid UTF-8"),
    (b"um .\n", b"one .\ntwo .\n", r"line counts differ: .*pt.train has 1 lines"),
])
def test_train_malformed_data_files(tmp_path, pt_train, en_train, message):
  data = _write_data(tmp_path / "data", pt_train, en_train)
  line = error_line(_train(tmp_path, data=data), "train.py")
  assert re.search(message, line), line


def test_train_data_folder_without_the_files(tmp_path):
  data = _write_data(tmp_path / "data")
  (data / "en.dev").unlink()
  line = error_line(_train(tmp_path, data=data), "train.py")
  assert "not a folder with the TED HRLR files (missing en.dev)" in line


@pytest.mark.parametrize("kind,message", [
    ("no_saved_model", "no tokenizer SavedModel there"),
    ("corrupt_saved_model", "Cannot parse file"),
    ("translator", "has no .pt tokenizer"),
])
def test_train_tokenizer_that_is_not_a_tokenizer(tmp_path, tiny_translator_dir, kind, message):
  tokenizer = {"no_saved_model": tmp_path, "translator": tiny_translator_dir,
               "corrupt_saved_model": tmp_path}[kind]
  if kind == "corrupt_saved_model":
    (tmp_path / "saved_model.pb").write_bytes(b"not a protocol buffer")
  line = error_line(_train(tmp_path, tokenizer=tokenizer), "train.py")
  assert line.startswith(f"train.py: error: --tokenizer={tokenizer}") and message in line, line


def test_train_model_dir_of_another_configuration(tmp_path):
  run = tmp_path / "run"
  (run / "checkpoints").mkdir(parents=True)
  (run / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-5"\n')
  stored = json.loads(tiny.get_config().to_json_best_effort())
  stored["model"]["d_model"] = 64
  (run / "config.json").write_text(json.dumps(stored))
  line = error_line(_train(tmp_path), "train.py")
  assert line.endswith("was trained with a different config: field model.d_model was 64, "
                       "now 32; use a new --model_dir"), line


@pytest.mark.parametrize("index", [True, False])
def test_train_corrupt_checkpoint(tmp_path, tutorial_tokenizer_path, index):
  checkpoints = tmp_path / "run" / "checkpoints"
  checkpoints.mkdir(parents=True)
  for name in ("ckpt-5.index", "ckpt-5.data-00000-of-00001"):
    (checkpoints / name).write_bytes(b"garbage")
  if index:
    (checkpoints / "checkpoint").write_text('model_checkpoint_path: "ckpt-5"\n')
  line = error_line(_train(tmp_path, tokenizer=tutorial_tokenizer_path), "train.py")
  # With or without the index file: the files are found, and none is intact (#32).
  assert "no intact checkpoint left in" in line and "ckpt-5 (" in line, line


@pytest.mark.parametrize("args,message", [
    (["--train_examples=-1"], "train.py: error: --train_examples must be >= 0, got -1"),
    (["extra"], "train.py: error: unexpected arguments: extra"),
    (["--config.training.train_steps=many"], "FATAL Flags parsing error"),
    (["--config=configs/nonexistent.py"], "train.py: error: --config: .*No such file"),
])
def test_train_bad_flags(tmp_path, args, message):
  result = _train(tmp_path, *args)
  stderr = result.stderr.decode()
  assert result.returncode != 0 and "Traceback" not in stderr, stderr[-3000:]
  assert [line for line in stderr.splitlines() if re.match(message, line)], stderr[-3000:]
  assert not (tmp_path / "run").exists()
