"""Tests for transformer.tokenizers: building, caching, exporting and loading."""

import json
import os
from pathlib import Path
import string
import subprocess
import sys

import pytest
import tensorflow as tf

from transformer import data
from transformer import tokenizers

# The tutorial converter's vocabulary sizes (subword guide settings, 8,000 target).
TUTORIAL_VOCAB_SIZES = {"pt": 7765, "en": 7010}
SENTENCES = ["Olá, Mundo!", "e quando melhoramos a procura , tiramos a única vantagem .",
             "but they did n't test for curiosity ."]
TOY_PAIRS = [("olá , mundo !", "hello , world !"), ("mas e se ?", "but what if ?")]


def _toy_vocab():
  """A stand-in for the slow learner: characters, their ## forms and a few words."""
  characters = string.ascii_lowercase + string.digits + string.punctuation
  return (list(tokenizers.RESERVED_TOKENS) + list(characters)
          + ["##" + c for c in characters] + ["mundo", "hello", "world"])


@pytest.fixture
def learner_calls(monkeypatch):
  """Replaces the vocabulary learner with `_toy_vocab` and records its calls."""
  calls = []

  def fake_learner(sentences, vocab_size=8000, name=""):
    calls.append((name, len(sentences), vocab_size))
    return _toy_vocab()

  monkeypatch.setattr(tokenizers, "learn_vocabulary", fake_learner)
  return calls


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


@pytest.fixture
def builder_calls(monkeypatch):
  """Replaces the builder with one that writes a stub SavedModel and records calls."""
  calls = []

  def fake_builder(train_pairs, export_dir, vocab_size=8000, vocabulary="separate"):
    calls.append((len(train_pairs), vocab_size, vocabulary))
    Path(export_dir).mkdir(parents=True)
    (Path(export_dir) / "saved_model.pb").write_bytes(b"stub")
    return Path(export_dir)

  monkeypatch.setattr(tokenizers, "build_tokenizers", fake_builder)
  return calls


def test_cache_builds_once_per_key(tmp_path, builder_calls):
  first = tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path, vocab_size=100)
  assert len(builder_calls) == 1
  assert tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path, vocab_size=100) == first
  assert len(builder_calls) == 1
  assert json.loads((first / "build_info.json").read_text())["num_pairs"] == len(TOY_PAIRS)

  assert tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path, vocab_size=120) != first
  assert tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path, vocab_size=100,
                                            vocabulary="joint") != first
  changed_data = TOY_PAIRS + [("outra", "another")]
  assert tokenizers.get_or_build_tokenizers(changed_data, tmp_path, vocab_size=100) != first
  assert len(builder_calls) == 4
  assert tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path, vocab_size=100,
                                            rebuild=True) == first
  assert len(builder_calls) == 5
  # The staging folders of the builds are gone.
  assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_cache_key_from_a_data_folder_equals_key_from_its_pairs(tmp_path, builder_calls):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  (data_dir / "pt.train").write_text("".join(pt + "\n" for pt, _ in TOY_PAIRS))
  (data_dir / "en.train").write_text("".join(en + "\n" for _, en in TOY_PAIRS))
  from_folder = tokenizers.get_or_build_tokenizers(data_dir, tmp_path / "cache")
  pairs = data.local_split_pairs(data_dir, "train")
  assert tokenizers.get_or_build_tokenizers(pairs, tmp_path / "cache") == from_folder
  assert len(builder_calls) == 1


def test_joint_vocabulary_is_shared(tmp_path, learner_calls):
  path = tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path, vocabulary="joint")
  assert learner_calls == [("joint pt+en", 2 * len(TOY_PAIRS), 8000)]
  loaded = tokenizers.load_tokenizers(path)
  assert loaded.pt.get_vocab_path().numpy() == loaded.en.get_vocab_path().numpy()
  ids = tf.constant([[2, 40, 3]], tf.int64)
  assert loaded.pt.lookup(ids).numpy().tolist() == loaded.en.lookup(ids).numpy().tolist()
  text = loaded.en.detokenize(loaded.en.tokenize(tf.constant(["Hello, World!"])))
  assert text.numpy()[0].decode() == "hello , world !"


def test_bad_settings_raise(tmp_path):
  with pytest.raises(ValueError, match="unknown vocabulary 'shared'"):
    tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path, vocabulary="shared")
  with pytest.raises(ValueError, match="no training pairs"):
    tokenizers.get_or_build_tokenizers([], tmp_path)


def test_load_tokenizers_errors(tmp_path):
  with pytest.raises(tokenizers.TokenizerError,
                     match="no tokenizer SavedModel at .*ted_hrlr_translate_pt_en_converter"):
    tokenizers.load_tokenizers(tmp_path / "nowhere")
  module = tf.Module()
  module.en = tf.Module()
  tf.saved_model.save(module, str(tmp_path / "no_pt"))
  with pytest.raises(tokenizers.TokenizerError, match=r"no_pt has no \.pt tokenizer"):
    tokenizers.load_tokenizers(tmp_path / "no_pt")


@pytest.mark.parametrize("language, sentences, vocab_size", [(0, 400, 200), (1, 400, 250)])
def test_learn_wordpiece_gives_the_librarys_vocabulary(train_pairs, language, sentences,
                                                      vocab_size):
  from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner  # pylint: disable=g-import-not-at-top
  counts = tokenizers.count_words([pair[language] for pair in train_pairs[:sentences]])
  reserved = list(tokenizers.RESERVED_TOKENS)
  ours = tokenizers.learn_wordpiece(counts, vocab_size, reserved)
  assert ours == learner.learn(counts, vocab_size, reserved)
  # Learned pieces, not only characters: the iterations and the search ran.
  assert len(ours) <= vocab_size and any(len(token) > 4 for token in ours[len(reserved):])
