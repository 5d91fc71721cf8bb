"""The tokenizers on real text (transformer/data/tokenizers.py): ours built with the
subword guide's settings on the full training split (about a minute of one
core, then cached: conftest.py's guide_tokenizers_build) against the tutorial's
converter, both through the interface the model uses, and exported ones loaded
without this project. Building, caching and loading errors:
tests/unit/test_tokenizers.py."""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest
import tensorflow as tf

from transformer.data import tokenizers

# The tutorial converter's vocabulary sizes (subword guide settings, 8,000 target).
TUTORIAL_VOCAB_SIZES = {"pt": 7765, "en": 7010}
SENTENCES = ["Olá, Mundo!", "e quando melhoramos a procura , tiramos a única vantagem .",
             "but they did n't test for curiosity ."]


@pytest.fixture(params=["tutorial", pytest.param("ours", marks=pytest.mark.slow)])
def any_tokenizers(request):
  """Both the tutorial's converter and ours built with the guide's settings."""
  name = "tutorial_tokenizers" if request.param == "tutorial" else "guide_tokenizers"
  return request.getfixturevalue(name)


def _vocab_file(tokenizer) -> Path:
  return Path(tokenizer.get_vocab_path().numpy().decode())


@pytest.mark.slow
def test_guide_settings_on_full_train_split_give_the_tutorials_vocabularies(
    guide_tokenizers_build, guide_tokenizers, tutorial_tokenizers):
  """The README: built here, the vocabularies are byte for byte the tutorial's."""
  path, seconds = guide_tokenizers_build
  print(f"\nguide-settings tokenizers at {path}: {seconds:.1f} s "
        f"({'built' if seconds > 5 else 'cached'})")
  sizes = dict(zip(("pt", "en"), tokenizers.vocab_sizes(guide_tokenizers)))
  assert sizes == TUTORIAL_VOCAB_SIZES
  for language in ("pt", "en"):
    ours = _vocab_file(getattr(guide_tokenizers, language))
    theirs = _vocab_file(getattr(tutorial_tokenizers, language))
    assert ours != theirs
    # Compared as lists of byte lines (the same as comparing the bytes) so that
    # a failure names the first entry that differs.
    assert ours.read_bytes().split(b"\n") == theirs.read_bytes().split(b"\n"), language


def test_reserved_tokens_are_ids_0_to_3(any_tokenizers):
  for tokenizer in (any_tokenizers.pt, any_tokenizers.en):
    reserved = [t.decode() for t in tokenizer.get_reserved_tokens().numpy()]
    assert reserved == list(tokenizers.RESERVED_TOKENS)
    looked_up = tokenizer.lookup(tf.constant([[0, 1, 2, 3]], tf.int64)).numpy()
    assert [t.decode() for t in looked_up[0]] == reserved


def test_interface_dtypes_and_shapes(any_tokenizers):
  tokenizer = any_tokenizers.en
  ids = tokenizer.tokenize(tf.constant(SENTENCES))
  assert isinstance(ids, tf.RaggedTensor)
  assert ids.dtype == tf.int64 and ids.ragged_rank == 1
  assert ids.shape[0] == len(SENTENCES)
  for row in ids.to_list():
    assert row[0] == tokenizers.START_ID and row[-1] == tokenizers.END_ID
  ragged_text = tokenizer.detokenize(ids)
  dense_text = tokenizer.detokenize(ids.to_tensor())
  assert ragged_text.dtype == tf.string and ragged_text.shape == [len(SENTENCES)]
  assert ragged_text.numpy().tolist() == dense_text.numpy().tolist()
  tokens = tokenizer.lookup(ids)
  assert isinstance(tokens, tf.RaggedTensor) and tokens.dtype == tf.string
  assert tokenizer.lookup(ids.to_tensor()).shape == ids.to_tensor().shape
  assert int(tokenizer.get_vocab_size()) > 1000
  assert _vocab_file(tokenizer).is_file()


def test_round_trip_folds_case_accents_and_splits_punctuation(any_tokenizers):
  for tokenizer in (any_tokenizers.pt, any_tokenizers.en):
    text = tokenizer.detokenize(tokenizer.tokenize(tf.constant(["Olá, Mundo!"])))
    assert text.numpy()[0].decode() == "ola , mundo !"


@pytest.mark.slow
def test_our_tokenizer_agrees_with_the_tutorials_on_training_text(
    tutorial_tokenizers, guide_tokenizers, train_pairs):
  # Same settings and data, so the round trip of training text must agree.
  en = tf.constant([en for _, en in train_pairs[:200]])
  ours = guide_tokenizers.en.detokenize(guide_tokenizers.en.tokenize(en))
  theirs = tutorial_tokenizers.en.detokenize(tutorial_tokenizers.en.tokenize(en))
  assert ours.numpy().tolist() == theirs.numpy().tolist()


@pytest.mark.slow
def test_exported_tokenizers_load_with_only_tensorflow_and_text(guide_tokenizers_build,
                                                                tmp_path):
  script = (
      "import json, sys\n"
      "import tensorflow as tf\n"
      "import tensorflow_text\n"
      f"t = tf.saved_model.load({str(guide_tokenizers_build[0])!r})\n"
      "ids = t.pt.tokenize(tf.constant(['Olá, Mundo!']))\n"
      "print(json.dumps({'ids': ids.to_list(),\n"
      "  'text': t.pt.detokenize(ids).numpy()[0].decode(),\n"
      "  'dense_text': t.en.detokenize(t.en.tokenize(['hi there']).to_tensor())"
      ".numpy()[0].decode(),\n"
      "  'size': int(t.en.get_vocab_size()),\n"
      "  'project_imported': any(m.startswith('transformer') for m in sys.modules)}))\n")
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["TF_CPP_MIN_LOG_LEVEL"] = "3"
  result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  output = json.loads(result.stdout.strip().splitlines()[-1])
  assert output["ids"][0][0] == 2 and output["ids"][0][-1] == 3
  assert output["text"] == "ola , mundo !"
  assert output["dense_text"] == "hi there"
  assert not output["project_imported"]
