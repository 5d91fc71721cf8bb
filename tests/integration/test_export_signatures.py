"""The exported translator's signatures (transformer/inference/export.py):
``serving_default`` and ``translate_with_attention`` serve beam search,
``translate_greedy`` greedy decoding, each as the in-memory translator's method
of that name. On a tiny model whose beam and greedy outputs differ. The
translator's lengths and methods in memory: tests/unit/test_translator_lengths.py."""

import keras
import pytest
import tensorflow as tf

from transformer.data import tokenizers
from transformer.inference import export

# A SavedModel export and load: seconds to tens of seconds.
pytestmark = pytest.mark.slow

SENTENCES = ["este é o primeiro livro que eu fiz .", "olá", "e quando melhoramos a procura ."]


def test_each_signature_serves_its_method(short_config, make_model, tutorial_tokenizers,
                                          tmp_path):
  # Untied output weights: the tiny tied model repeats one word whichever way it decodes.
  config = short_config(output_weights="untied")
  keras.utils.set_random_seed(1)
  model = make_model(config, tokenizers.vocab_sizes(tutorial_tokenizers))
  translator = export.export_translator(model, tutorial_tokenizers, tmp_path / "translator",
                                        config.decoding)
  signatures = tf.saved_model.load(str(tmp_path / "translator")).signatures
  sentences = tf.constant(SENTENCES)
  beam = translator.translate(sentences).numpy().tolist()
  greedy = translator.translate_greedy(sentences).numpy().tolist()
  assert beam != greedy  # so that one served in place of the other shows
  served = {name: signatures[name](sentences=sentences) for name in (
      "serving_default", "translate_greedy", "translate_with_attention")}
  assert served["serving_default"]["output_0"].numpy().tolist() == beam
  assert served["translate_greedy"]["output_0"].numpy().tolist() == greedy
  assert served["translate_with_attention"]["translation"].numpy().tolist() == beam
