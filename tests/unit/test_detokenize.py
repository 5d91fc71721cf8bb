"""The Python detokenizer (transformer/data/detokenize.py) against the TensorFlow tokenizer."""

import numpy as np
import tensorflow as tf

from transformer.data.detokenize import Detokenizer


def vocabulary(tokenizer):
  ids = tf.range(tokenizer.get_vocab_size(), dtype=tf.int64)[tf.newaxis]
  return [token.decode("utf-8") for token in tokenizer.lookup(ids)[0].numpy()]


def tensorflow_text(tokenizer, rows):
  return [t.decode("utf-8") for t in tokenizer.detokenize(tf.constant(rows, tf.int64)).numpy()]


def test_round_trips_of_real_sentences_read_as_the_tokenizers(tutorial_tokenizers, ted_data_dir):
  english = (ted_data_dir / "en.dev").read_text(encoding="utf-8").splitlines()[:300]
  tokenizer = tutorial_tokenizers.en
  ids = tokenizer.tokenize(tf.constant(english)).to_tensor().numpy()  # padded with 0
  ours = Detokenizer(vocabulary(tokenizer))(ids)
  assert ours == tensorflow_text(tokenizer, ids)
  # The round trip is not the identity (accents, "n't"), and pieces do join.
  assert ours != english
  assert any("##" in token for token in vocabulary(tokenizer)[:2000])


def test_any_ids_read_as_the_tokenizers(tutorial_tokenizers, tmp_path):
  """Random rows: word pieces first, reserved tokens in the middle, padding,
  and ids past the vocabulary ([UNK]); also read from a vocabulary file."""
  tokenizer = tutorial_tokenizers.en
  tokens = vocabulary(tokenizer)
  size = len(tokens)
  rng = np.random.default_rng(5)
  pieces = [i for i, token in enumerate(tokens) if token.startswith("##")]
  rows = rng.integers(0, size + 20, (200, 12))
  rows[:50, 0] = rng.choice(pieces, 50)
  rows[50:100, 3] = rng.integers(0, 4, 50)  # [PAD] [UNK] [START] [END]
  rows[100:150, 4] = 3
  rows[100:150, 5] = rng.choice(pieces, 50)  # "[END] ##x"
  rows[150:, 8:] = 0
  want = tensorflow_text(tokenizer, rows)
  assert Detokenizer(tokens)(rows) == want
  (tmp_path / "vocab.en.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
  assert Detokenizer.from_file(tmp_path / "vocab.en.txt")(rows) == want
