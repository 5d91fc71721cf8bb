"""Bad input to translate.py and train.py: one ``<script>: error: ...`` line and
a non-zero exit status, never a traceback. No case trains."""

import json
import os
from pathlib import Path
import pty
import re
import subprocess
import sys
import threading

import pytest

from configs import tiny

# Each test runs a script in a child Python, most of them after TensorFlow loads.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GOOD_LINES = ["este é um problema que temos que resolver .", "olá ."]
NOT_UTF8 = b"\xff\xfe mau"  # 0xff never occurs in UTF-8.
AFTER = "mais uma frase ."
# Stdin or a file: two good lines, then one that is not UTF-8.
BAD_THIRD_LINE = ("".join(f"{line}\n" for line in GOOD_LINES).encode() + NOT_UTF8
                  + f"\n{AFTER}\n".encode())


def _script_env():
  """TF_CPP_MIN_LOG_LEVEL is removed: the scripts' defaults are tested."""
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  return {**env, "PYTHONPATH": str(ROOT)}


def run_script(script, *args, stdin=subprocess.DEVNULL, timeout=300):
  """Runs ``script`` from the repository root; stdin: bytes, a file descriptor
  or DEVNULL."""
  feed = {"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}
  return subprocess.run([sys.executable, script, *map(str, args)], cwd=ROOT,
                        env=_script_env(), capture_output=True, timeout=timeout, check=False,
                        **feed)


# A script's run() for one command line after another, stdin the null device,
# as Python would end it: sys.exit's message on stderr, a traceback for any
# other exception. Not in pytest's process: train.py, evaluate.py and
# translate.py define flags of the same names in absl's one registry.
_SERVER = """
import io, json, os, sys, tempfile, traceback
from absl import app, flags

replies = os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
commands, sys.stdin = sys.stdin, open(os.devnull)
script = __import__(sys.argv[1].removesuffix(".py"))
parse_flags = getattr(script, "parse_flags", app.parse_flags_with_usage)
for command in commands:
  sys.stdout = io.TextIOWrapper(io.BytesIO())
  with tempfile.TemporaryFile() as stderr:
    console = os.dup(2)
    os.dup2(stderr.fileno(), 2)
    try:
      flags.FLAGS.unparse_flags()
      script.run(parse_flags(json.loads(command)))
      status = 0
    except SystemExit as e:
      status = e.code if isinstance(e.code, int) else int(e.code is not None)
      if isinstance(e.code, str):
        print(e.code, file=sys.stderr)
    except BaseException:
      status = 1
      traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(console, 2)
    os.close(console)
    stderr.seek(0)
    streams = [sys.stdout.buffer.getvalue(), stderr.read()]
  print(json.dumps([status, *(s.decode("latin-1") for s in streams)]), file=replies, flush=True)
"""


class ScriptInOnePython:
  """``script`` run for many command lines by one child Python, which loads
  TensorFlow once where a fresh script would load it for each: for errors
  found after TensorFlow loads. ``run`` returns what :func:`run_script` does."""

  def __init__(self, script):
    self.script = script
    self.process = subprocess.Popen([sys.executable, "-c", _SERVER, script], cwd=ROOT,
                                    env=_script_env(), stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)

  def run(self, *args, timeout=300):
    argv = [self.script, *map(str, args)]
    self.process.stdin.write(json.dumps(argv) + "\n")
    self.process.stdin.flush()
    watchdog = threading.Timer(timeout, self.process.kill)
    watchdog.start()
    try:
      reply = self.process.stdout.readline()
    finally:
      watchdog.cancel()
    assert reply, f"the Python running {self.script} died or hung (killed after {timeout} s)"
    status, stdout, stderr = json.loads(reply)
    return subprocess.CompletedProcess(argv, status, stdout.encode("latin-1"),
                                       stderr.encode("latin-1"))

  def close(self):
    self.process.stdin.close()
    self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def translate_in_one_python():
  server = ScriptInOnePython("translate.py")
  yield server
  server.close()


@pytest.fixture(scope="module")
def train_in_one_python():
  server = ScriptInOnePython("train.py")
  yield server
  server.close()


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


def _assert_stopped_at_line_3(result, where, translate_greedy):
  line = error_line(result, "translate.py")
  assert line.startswith(f"translate.py: error: {where}: line 3 is not valid UTF-8"), line
  # The lines before the bad one, translated although their batch was not full.
  assert result.stdout == translate_greedy(GOOD_LINES)


def test_translate_names_the_line_of_stdin_that_is_not_utf8(tiny_translator_dir,
                                                            translate_greedy):
  # A fresh translate.py: an error found after TensorFlow loaded reaches the
  # console as one line (the other such errors run in translate_in_one_python).
  result = run_script("translate.py", f"--export_dir={tiny_translator_dir}",
                      "--method=greedy", "-", stdin=BAD_THIRD_LINE)
  _assert_stopped_at_line_3(result, "stdin", translate_greedy)


def test_translate_names_the_line_of_an_input_file_that_is_not_utf8(
    tmp_path, tiny_translator_dir, translate_greedy, translate_in_one_python):
  path = tmp_path / "sentences.pt"
  path.write_bytes(BAD_THIRD_LINE)
  result = translate_in_one_python.run(f"--export_dir={tiny_translator_dir}",
                                       "--method=greedy", f"--input_file={path}")
  _assert_stopped_at_line_3(result, str(path), translate_greedy)


@pytest.fixture(scope="module")
def stdin_with_a_bad_line_replaced(tiny_translator_dir):
  """translate.py given no sentences and --invalid_utf8=replace, its stdin a bad
  second line and a last line without a newline: one run for the two tests below."""
  text = GOOD_LINES[0].encode() + b"\n" + NOT_UTF8 + f"\n{AFTER}".encode()
  return run_script("translate.py", f"--export_dir={tiny_translator_dir}",
                    "--method=greedy", "--invalid_utf8=replace", stdin=text)


def test_translate_replaces_bytes_that_are_not_utf8_on_request(stdin_with_a_bad_line_replaced,
                                                               translate_greedy):
  result = stdin_with_a_bad_line_replaced
  assert result.returncode == 0, result.stderr.decode()[-3000:]
  assert result.stdout == translate_greedy([GOOD_LINES[0], "\ufffd\ufffd mau", AFTER])


def test_translate_reads_stdin_when_given_no_sentences(stdin_with_a_bad_line_replaced,
                                                       translate_greedy):
  result = stdin_with_a_bad_line_replaced
  assert result.returncode == 0, result.stderr.decode()[-3000:]
  # Every line of stdin, the last one too.
  assert result.stdout == translate_greedy([GOOD_LINES[0], "\ufffd\ufffd mau", AFTER])


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


def _assert_export_dir_error(result, export_dir, message):
  line = error_line(result, "translate.py")
  assert re.search(rf"--export_dir={re.escape(str(export_dir))}: {message}", line), line
  assert result.stdout == b""


@pytest.mark.parametrize("kind", ["missing", "keras_file", "checkpoint_folder"])
def test_translate_export_dir_that_is_not_a_saved_model_folder(kind, tmp_path,
                                                               tiny_translator_dir,
                                                               tutorial_tokenizer_path):
  export_dir, message = _bad_export_dir(kind, tmp_path, tiny_translator_dir,
                                        tutorial_tokenizer_path)
  _assert_export_dir_error(run_script("translate.py", f"--export_dir={export_dir}", "olá ."),
                           export_dir, message)


@pytest.mark.parametrize("kind", ["corrupt_saved_model", "tokenizer_saved_model"])
def test_translate_saved_model_that_is_not_a_translator(kind, tmp_path, tiny_translator_dir,
                                                        tutorial_tokenizer_path,
                                                        translate_in_one_python):
  export_dir, message = _bad_export_dir(kind, tmp_path, tiny_translator_dir,
                                        tutorial_tokenizer_path)
  _assert_export_dir_error(translate_in_one_python.run(f"--export_dir={export_dir}", "olá ."),
                           export_dir, message)


# ------------------------------------------------------------ train.py

def _write_data(folder, pt_train=b"um .\ndois .\n", en_train=b"one .\ntwo .\n"):
  folder.mkdir(parents=True, exist_ok=True)
  for name, content in (("pt.train", pt_train), ("en.train", en_train),
                        ("pt.dev", b"tres .\n"), ("en.dev", b"three .\n")):
    (folder / name).write_bytes(content)
  return folder


def _train(tmp_path, *args, data=None, tokenizer=None, in_one_python=None):
  """train.py without training, in a fresh Python or by ``in_one_python``."""
  args = ["--config=configs/tiny.py", f"--model_dir={tmp_path / 'run'}",
          f"--data={data or _write_data(tmp_path / 'data')}",
          f"--tokenizer={tokenizer or 'build'}", "--bleu_examples=0", "--noexport", *args]
  return in_one_python.run(*args) if in_one_python else run_script("train.py", *args)


def test_train_data_file_that_is_not_utf8(tmp_path):
  # A fresh train.py: an error found after TensorFlow loaded reaches the
  # console as one line (the other such errors run in train_in_one_python).
  data = _write_data(tmp_path / "data", pt_train=b"um .\n" + NOT_UTF8 + b"\n")
  line = error_line(_train(tmp_path, data=data), "train.py")
  assert re.search(r"pt.train: line 2 is not valid UTF-8", line), line


def test_train_data_files_of_different_line_counts(tmp_path, train_in_one_python):
  data = _write_data(tmp_path / "data", pt_train=b"um .\n")
  line = error_line(_train(tmp_path, data=data, in_one_python=train_in_one_python), "train.py")
  assert re.search(r"line counts differ: .*pt.train has 1 lines", line), line


def test_train_data_folder_without_the_files(tmp_path):
  data = _write_data(tmp_path / "data")
  (data / "en.dev").unlink()
  line = error_line(_train(tmp_path, data=data), "train.py")
  assert "not a folder with the TED HRLR files (missing en.dev)" in line


def test_train_tokenizer_folder_without_a_saved_model(tmp_path):
  line = error_line(_train(tmp_path, tokenizer=tmp_path), "train.py")
  assert line.startswith(f"train.py: error: --tokenizer={tmp_path}: no tokenizer SavedModel "
                         "there"), line


@pytest.mark.parametrize("kind,message", [
    ("corrupt_saved_model", "Cannot parse file"),
    ("translator", "has no .pt tokenizer"),
])
def test_train_saved_model_that_is_not_a_tokenizer(tmp_path, tiny_translator_dir,
                                                   train_in_one_python, kind, message):
  tokenizer = {"translator": tiny_translator_dir, "corrupt_saved_model": tmp_path}[kind]
  if kind == "corrupt_saved_model":
    (tmp_path / "saved_model.pb").write_bytes(b"not a protocol buffer")
  line = error_line(_train(tmp_path, tokenizer=tokenizer, in_one_python=train_in_one_python),
                    "train.py")
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
def test_train_corrupt_checkpoint(tmp_path, tutorial_tokenizer_path, train_in_one_python,
                                  index):
  checkpoints = tmp_path / "run" / "checkpoints"
  checkpoints.mkdir(parents=True)
  for name in ("ckpt-5.index", "ckpt-5.data-00000-of-00001"):
    (checkpoints / name).write_bytes(b"garbage")
  if index:
    (checkpoints / "checkpoint").write_text('model_checkpoint_path: "ckpt-5"\n')
  line = error_line(_train(tmp_path, tokenizer=tutorial_tokenizer_path,
                           in_one_python=train_in_one_python), "train.py")
  # With or without the index file: the files are found, and none is intact (#32).
  assert "no intact checkpoint left in" in line and "ckpt-5 (" in line, line


@pytest.mark.parametrize("args,message", [
    (["--train_examples=-1"], "train.py: error: --train_examples must be >= 0, got -1"),
    (["extra"], "train.py: error: unexpected arguments: extra"),
    (["--config.training.train_steps=many"],
     "train.py: error: --config.training.train_steps=many: invalid literal for int"),
    (["--config=configs/nonexistent.py"], "train.py: error: --config: .*No such file"),
])
def test_train_bad_flags(tmp_path, args, message):
  result = _train(tmp_path, *args)
  stderr = result.stderr.decode()
  assert result.returncode != 0 and "Traceback" not in stderr, stderr[-3000:]
  assert [line for line in stderr.splitlines() if re.match(message, line)], stderr[-3000:]
  assert not (tmp_path / "run").exists()
