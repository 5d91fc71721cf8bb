"""Tests for transformer.data.tokenizers: building, caching, exporting and loading,
on toy vocabularies. Ours built on the full training split against the
tutorial's: tests/integration/test_guide_tokenizers.py."""

import json
from pathlib import Path
import string

import pytest
import tensorflow as tf

from transformer.data import ted
from transformer.data import tokenizers
from transformer.data import wordpiece
from transformer.run.errors import DataError

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

  def fake_learner(sentences, vocab_size, reserved_tokens, name=""):
    assert tuple(reserved_tokens) == tokenizers.RESERVED_TOKENS
    calls.append((name, len(sentences), vocab_size))
    return _toy_vocab()

  monkeypatch.setattr(wordpiece, "learn_vocabulary", fake_learner)
  return calls


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
  pairs = ted.local_split_pairs(data_dir, "train")
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
  with pytest.raises(DataError,
                     match="no tokenizer SavedModel at .*ted_hrlr_translate_pt_en_converter"):
    tokenizers.load_tokenizers(tmp_path / "nowhere")
  module = tf.Module()
  module.en = tf.Module()
  tf.saved_model.save(module, str(tmp_path / "no_pt"))
  with pytest.raises(DataError, match=r"no_pt has no \.pt tokenizer"):
    tokenizers.load_tokenizers(tmp_path / "no_pt")


@pytest.mark.parametrize("language, sentences, vocab_size", [(0, 400, 200), (1, 400, 250)])
def test_learn_wordpiece_gives_the_librarys_vocabulary(train_pairs, language, sentences,
                                                      vocab_size):
  from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner  # pylint: disable=g-import-not-at-top
  counts = wordpiece.count_words([pair[language] for pair in train_pairs[:sentences]])
  reserved = list(tokenizers.RESERVED_TOKENS)
  ours = wordpiece.learn_wordpiece(counts, vocab_size, reserved)
  assert ours == learner.learn(counts, vocab_size, reserved)
  # Learned pieces, not only characters: the iterations and the search ran.
  assert len(ours) <= vocab_size and any(len(token) > 4 for token in ours[len(reserved):])


def test_the_same_build_of_another_run_is_copied_not_built_again(tmp_path, builder_calls):
  first = tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path / "a", vocab_size=100)
  second = tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path / "b", vocab_size=100,
                                             other_caches=[tmp_path / "c", tmp_path / "a"])
  assert len(builder_calls) == 1 and second == tmp_path / "b" / first.name
  assert (second / "saved_model.pb").read_bytes() == b"stub"
  # Another setting is another build.
  tokenizers.get_or_build_tokenizers(TOY_PAIRS, tmp_path / "b", vocab_size=120,
                                     other_caches=[tmp_path / "a"])
  assert len(builder_calls) == 2


def test_the_whole_training_split_with_the_tutorials_settings_is_the_tutorials_tokenizer(
    tmp_path, train_pairs, builder_calls):
  """Its cache key is pinned (the build it names is the tutorial's converter:
  tests/integration/test_guide_tokenizers.py), and that converter is used as it is."""
  assert tokenizers.cache_key(train_pairs, 8000, "separate") == tokenizers.TUTORIAL_CACHE_KEY
  tutorial = tmp_path / "tutorial_tokenizer"
  tutorial.mkdir()
  (tutorial / "saved_model.pb").write_bytes(b"the tutorial's")
  assert tokenizers.get_or_build_tokenizers(train_pairs, tmp_path / "run",
                                            tutorial=tutorial) == tutorial
  assert tokenizers.get_or_build_tokenizers(train_pairs[:-1], tmp_path / "run",
                                            tutorial=tutorial) != tutorial
  assert len(builder_calls) == 1
