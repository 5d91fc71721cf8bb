"""How many tokens the translator returns (transformer/inference/export.py): the
tutorial's call gives [START] and ``max_length`` tokens, the exported call the
tutorial's 128, the batch functions the input length + ``extra_length``; and
``translate`` is beam search, ``translate_greedy`` greedy. On tiny models
whose output layer always picks one word, so that no translation ends early.
The SavedModel and its signatures: tests/integration/test_export_signatures.py."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer.inference import decoding
from transformer.inference import export
from transformer.data import tokenizers

SENTENCES = ["este é o primeiro livro que eu fiz .", "olá", "e quando melhoramos a procura ."]
EXTRA_LENGTH = 3


def word_count(text):
  return len(text.numpy().decode("utf-8").split())


@pytest.fixture(scope="module")
def one_word_model(tiny_config, make_model, tutorial_tokenizers):
  """A tiny model whose every output is the English word "the"."""
  config = tiny_config(output_weights="untied")
  keras.utils.set_random_seed(0)
  model = make_model(config, tokenizers.vocab_sizes(tutorial_tokenizers))
  (the,) = tutorial_tokenizers.en.tokenize(tf.constant(["the"]))[0, 1:-1].numpy()
  bias = np.zeros(model.final_layer.bias.shape, np.float32)
  bias[the] = 1e4
  model.final_layer.bias.assign(bias)
  config.decoding.extra_length = EXTRA_LENGTH
  return export.Translator(tutorial_tokenizers, model, config.decoding)


@pytest.mark.parametrize("max_length", [1, 6])
def test_the_tutorial_call_gives_start_and_max_length_tokens(one_word_model, max_length):
  text, tokens, attention = one_word_model(SENTENCES[0], max_length=max_length)
  assert [t.decode() for t in tokens.numpy()] == ["[START]"] + ["the"] * max_length
  assert word_count(text) == max_length
  assert attention.shape[2] == max_length


def test_the_exported_call_gives_the_tutorials_128_tokens(one_word_model):
  text = export.ExportTranslator(one_word_model)(tf.constant(SENTENCES[1]))
  assert word_count(text) == export.MAX_TOKENS == 128


@pytest.mark.parametrize("method", ["translate", "translate_greedy"])
def test_a_batch_translation_is_its_input_length_and_extra_length_long(one_word_model,
                                                                      tutorial_tokenizers,
                                                                      method):
  """§6.1: at most input length + 50 tokens (here config.decoding's 3); the
  input's length counts [START] and [END]."""
  texts = getattr(one_word_model, method)(tf.constant(SENTENCES))
  inputs = tutorial_tokenizers.pt.tokenize(tf.constant(SENTENCES)).row_lengths().numpy()
  assert [word_count(text) for text in texts] == [n + EXTRA_LENGTH for n in inputs]


def test_translate_is_beam_search_and_translate_greedy_greedy(short_config, make_model,
                                                              tutorial_tokenizers):
  # Untied output weights: the tiny tied model repeats one word whichever way it decodes.
  config = short_config(output_weights="untied")
  keras.utils.set_random_seed(1)
  model = make_model(config, tokenizers.vocab_sizes(tutorial_tokenizers))
  translator = export.Translator(tutorial_tokenizers, model, config.decoding)
  source = tutorial_tokenizers.pt.tokenize(tf.constant(SENTENCES)).to_tensor()
  expected = {method: tutorial_tokenizers.en.detokenize(tf.cast(decoding.decode(
      model, source, method, **config.decoding.to_dict()), tf.int64)).numpy().tolist()
              for method in decoding.METHODS}
  # The two differ on this model, so that one in place of the other shows.
  assert expected["beam"] != expected["greedy"]
  sentences = tf.constant(SENTENCES)
  assert translator.translate(sentences).numpy().tolist() == expected["beam"]
  assert translator.translate_greedy(sentences).numpy().tolist() == expected["greedy"]
