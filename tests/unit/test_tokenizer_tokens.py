"""The tokenizers' reserved tokens and detokenization (transformer/data/tokenizer_module.py):
[START] and [END] around every sentence at the tutorial's ids, and text without
[PAD], [START] or [END] but with [UNK]. On a toy vocabulary; the tutorial's own
tokenizer where ../shared has it. Building, caching and loading:
tests/unit/test_tokenizers.py."""

import pytest
import tensorflow as tf

from transformer.data import tokenizer_module
from transformer.data import tokenizers

WORDS = ["ola", "mundo", "a", "casa", ",", "!"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
  vocab_file = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  vocab_file.write_text("".join(f"{token}\n" for token in [*tokenizers.RESERVED_TOKENS, *WORDS]))
  return tokenizer_module.CustomTokenizer(tokenizers.RESERVED_TOKENS, vocab_file)


def word_id(word):
  return len(tokenizers.RESERVED_TOKENS) + WORDS.index(word)


def test_a_sentence_is_its_word_ids_between_start_and_end(tokenizer):
  ids = tokenizer.tokenize(tf.constant(["Olá, mundo!", "a casa"])).to_list()
  assert ids == [[tokenizers.START_ID, *map(word_id, ["ola", ",", "mundo", "!"]),
                  tokenizers.END_ID],
                 [tokenizers.START_ID, word_id("a"), word_id("casa"), tokenizers.END_ID]]


def test_the_reserved_ids_are_the_tokens_at_those_places_of_the_vocabulary(tokenizer):
  reserved = [t.decode() for t in tokenizer.get_reserved_tokens().numpy()]
  looked_up = tokenizer.lookup(tf.constant([[tokenizers.PAD_ID, tokenizers.START_ID,
                                             tokenizers.END_ID]], tf.int64))
  assert [t.decode() for t in looked_up[0].numpy()] == ["[PAD]", "[START]", "[END]"]
  assert reserved == list(tokenizers.RESERVED_TOKENS)


def test_detokenizing_drops_padding_start_and_end_but_keeps_unknown_words(tokenizer):
  ids = tf.constant([[tokenizers.START_ID, word_id("ola"), 1, word_id("mundo"),
                      tokenizers.END_ID, 0, 0],
                     [tokenizers.START_ID, word_id("casa"), tokenizers.END_ID, 0, 0, 0, 0]],
                    tf.int64)
  texts = [t.decode() for t in tokenizer.detokenize(ids).numpy()]
  assert texts == ["ola [UNK] mundo", "casa"]
  ragged = tf.ragged.constant([[tokenizers.START_ID, word_id("a"), tokenizers.END_ID]],
                              tf.int64)
  assert tokenizer.detokenize(ragged).numpy().tolist() == [b"a"]


def test_the_tutorials_tokenizer_has_the_same_reserved_ids(tutorial_tokenizers):
  """Models and decoding use these ids with the tutorial's converter too."""
  for tokenizer in (tutorial_tokenizers.pt, tutorial_tokenizers.en):
    ids = tokenizer.tokenize(tf.constant(["a"]))[0].numpy()
    assert (ids[0], ids[-1]) == (tokenizers.START_ID, tokenizers.END_ID)
    assert tokenizer.lookup(tf.constant([[tokenizers.PAD_ID]], tf.int64))[0, 0] == b"[PAD]"
