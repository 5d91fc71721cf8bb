"""The benchmarks' tutorial baseline (tests/helpers/tutorial_baseline.py) computes what
this project's tutorial configuration computes, so that comparing them measures
code, not a different model."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from helpers import tutorial_baseline
from configs import tutorial
from transformer.inference import decoding

# The vocabulary sizes of the tutorial's tokenizer (7,765 pt and 7,010 en entries).
TUTORIAL_VOCABULARIES = (7765, 7010)


def tutorial_layout(config):
  """``config.model`` with the tutorial's layout choices (configs/tutorial.py)."""
  reference = tutorial.get_config().model
  for field in ("head_width", "positional_layout", "output_weights", "layer_norm_epsilon",
                "residual_dropout_on_attention", "attention_dropout_rate", "dropout_rate"):
    setattr(config.model, field, getattr(reference, field))
  return config


@pytest.fixture(scope="module")
def tiny_pair(tiny_config, make_model):
  """``tiny_pair(input_vocab=50, target_vocab=40)``: our model with tiny sizes and
  the tutorial's layout, and the baseline with its weights.

  The baseline's LayerNormalization keeps Keras' default ε; ours takes
  ``layer_norm_epsilon`` from configs/tutorial.py, so the two must agree to float rounding.
  """
  def make(input_vocab=50, target_vocab=40):
    config = tutorial_layout(tiny_config())
    keras.utils.set_random_seed(1)
    ours = make_model(config, (input_vocab, target_vocab))
    baseline = tutorial_baseline.build(tutorial_baseline.TutorialTransformer.from_model_config(
        config.model, input_vocab, target_vocab))
    tutorial_baseline.copy_weights(ours, baseline)
    return ours, baseline
  return make


def padded_batch(vocab, lengths, seed):
  """Ids ``(len(lengths), max(lengths) + 2)``: random tokens ≥ 4, then 0-padding."""
  rng = np.random.default_rng(seed)
  ids = np.zeros((len(lengths), max(lengths) + 2), np.int64)
  for row, length in enumerate(lengths):
    ids[row, :length] = rng.integers(4, vocab, length)
  return tf.constant(ids)


def test_parameter_count_is_the_tutorials():
  config = tutorial.get_config()
  baseline = tutorial_baseline.build(tutorial_baseline.TutorialTransformer.from_model_config(
      config.model, *TUTORIAL_VOCABULARIES))
  assert baseline.count_params() == 10_184_162


def test_logits_match_ours_at_every_real_position(tiny_pair):
  ours, baseline = tiny_pair()
  source = padded_batch(50, [7, 3, 5], seed=0)
  target = padded_batch(40, [2, 6, 4], seed=1)
  expected = ours((source, target), training=False).numpy()
  got = baseline((source, target), training=False).numpy()
  real = target.numpy() != 0
  np.testing.assert_allclose(got[real], expected[real], atol=2e-5, rtol=1e-4)


def test_padding_changes_no_logit_at_a_real_position(tiny_pair):
  """The re-attached masks reach every attention layer: more padding on the source
  and the target changes nothing at the real positions."""
  _, baseline = tiny_pair()
  source = padded_batch(50, [7, 3], seed=2)
  target = padded_batch(40, [2, 6], seed=3)
  logits = baseline((source, target), training=False).numpy()
  more_source = tf.pad(source, [[0, 0], [0, 9]])
  more_target = tf.pad(target, [[0, 0], [0, 4]])
  padded = baseline((more_source, more_target), training=False).numpy()
  real = target.numpy() != 0
  np.testing.assert_allclose(padded[:, :target.shape[1]][real], logits[real], atol=1e-5)


def test_tutorial_loss_and_accuracy_count_real_labels_only():
  labels = tf.constant([[5, 6, 0, 0], [7, 0, 0, 0]])
  logits = tf.math.log(tf.one_hot([[5, 9, 5, 5], [7, 7, 7, 7]], 10) * 0.9 + 0.01)
  per_token = -np.log([0.91, 0.01, 0.91])  # labels 5, 6, 7 under rows that favour 5, 9, 7
  np.testing.assert_allclose(tutorial_baseline.masked_loss(labels, logits), per_token.mean(),
                             rtol=1e-5)
  np.testing.assert_allclose(tutorial_baseline.masked_accuracy(labels, logits), 2 / 3)


@pytest.mark.slow
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf.function"])
def test_translator_loop_gives_our_greedy_tokens(tiny_pair, tutorial_tokenizers, compiled):
  ours, baseline = tiny_pair(*TUTORIAL_VOCABULARIES)
  sentence = tf.constant("este é um problema que temos que resolver .")
  length = 6
  translator = tutorial_baseline.Translator(tutorial_tokenizers, baseline)
  if compiled:
    tokens = tf.function(lambda s: translator(s, max_length=length)[1])(sentence)
  else:
    tokens = translator(sentence, max_length=length)[1]
  source = tutorial_tokenizers.pt.tokenize(sentence[tf.newaxis]).to_tensor()
  expected = decoding.greedy_decode(ours, source, tf.constant([length]))
  # Tokens that depend on the position and the prefix, not one repeated.
  assert len(set(expected.numpy()[0].tolist())) > 1
  assert tokens[0, 0] == decoding.START_ID
  np.testing.assert_array_equal(tokens[0, 1:], expected[0])
