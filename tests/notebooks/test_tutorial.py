"""The tutorial, statement by statement, against this package.

Walks "Neural machine translation with a Transformer and Keras" in its order,
with its argument names and values, on the real data and the tutorial's
tokenizer: each step checks that the tutorial's line runs here and gives the
tutorial's object (shapes, parameter counts, attention scores, translator and
export). Where a line cannot be the tutorial's (``tfds.load`` needs the
internet; ``make_batches`` reads a global ``tokenizers``), the comment says
what stands in for it.

One module-scoped walk: later steps use the objects of earlier ones, as the
tutorial's cells do.
"""

import contextlib
import io

import keras
import matplotlib
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (registers the tokenizer's ops)

from helpers import tutorial_baseline
from transformer.data import ted
from transformer.model.attention import CausalSelfAttention, CrossAttention, GlobalSelfAttention
from transformer.model.decoder import Decoder, DecoderLayer
from transformer.model.embedding import PositionalEmbedding, positional_encoding
from transformer.model.encoder import Encoder, EncoderLayer
from transformer.inference.export import ExportTranslator, Translator, print_translation
from transformer.model.feed_forward import FeedForward
from transformer.model.losses import masked_accuracy, masked_loss
from transformer.model import Transformer
from transformer.model.optimization import CustomSchedule
from transformer.data.pipeline import make_batches
from transformer.inference.plotting import plot_attention_head, plot_attention_weights

MAX_TOKENS = 128
# The tutorial's hyperparameters ("Training" → "Set hyperparameters").
num_layers, d_model, dff, num_heads, dropout_rate = 4, 128, 512, 8, 0.1
# What the tutorial's transformer.summary() reports with its tokenizer.
TUTORIAL_PARAMETERS = 10_184_162


@pytest.fixture(scope="module")
def tokenizers(tutorial_tokenizer_path):
  # The tutorial's own line: the converter is a plain SavedModel.
  return tf.saved_model.load(str(tutorial_tokenizer_path))


@pytest.fixture(scope="module")
def batch(ted_data_dir, tokenizers):
  """The tutorial's first training batch ``(pt, en), en_labels``: 64 pairs.

  ``tfds.load('ted_hrlr_translate/pt_to_en')`` cannot download here; the same
  files, in TFDS order, come from the shared folder. The tutorial's
  ``make_batches(train_examples)`` is ``make_batches(train_examples, tokenizers)``.
  """
  train_examples = ted.load_split(ted_data_dir, "train").take(256)
  train_batches = make_batches(train_examples, tokenizers, max_tokens=MAX_TOKENS,
                               batch_size=64, shuffle=False)
  for (pt, en), en_labels in train_batches.take(1):
    return (pt, en), en_labels


@pytest.fixture(scope="module")
def transformer(tokenizers):
  # The tutorial's line as it stands, NumPy int32 vocabulary sizes included.
  return Transformer(
      num_layers=num_layers,
      d_model=d_model,
      num_heads=num_heads,
      dff=dff,
      input_vocab_size=tokenizers.pt.get_vocab_size().numpy(),
      target_vocab_size=tokenizers.en.get_vocab_size().numpy(),
      dropout_rate=dropout_rate)


def test_tokenizer_and_batches_are_the_tutorials(tokenizers, batch):
  (pt, en), en_labels = batch
  assert pt.shape[0] == en.shape[0] == en_labels.shape[0] == 64
  assert en.shape == en_labels.shape and max(pt.shape[1], en.shape[1]) <= MAX_TOKENS
  # Decoder inputs start with [START]; labels are the same tokens shifted by
  # one and end with [END] (unless cut at MAX_TOKENS), which is no decoder input.
  np.testing.assert_array_equal(en[:, 0], 2)
  inputs = en[:, 1:].numpy()
  np.testing.assert_array_equal(inputs[inputs != 0], en_labels[:, :-1].numpy()[inputs != 0])
  lengths = np.sum(en_labels.numpy() != 0, axis=1)
  whole = lengths < MAX_TOKENS
  np.testing.assert_array_equal(en_labels.numpy()[np.arange(64), lengths - 1][whole], 3)
  encoded = tokenizers.en.tokenize(["and when you improve searchability ."])
  round_trip = tokenizers.en.detokenize(encoded)
  assert round_trip.numpy()[0] == b"and when you improve searchability ."
  assert tokenizers.en.lookup(encoded)[0, 0].numpy() == b"[START]"


def test_positional_encoding_is_the_tutorials_layout():
  pos_encoding = positional_encoding(length=2048, depth=512)
  assert pos_encoding.shape == (2048, 512)
  np.testing.assert_allclose(pos_encoding.numpy(),
                             tutorial_baseline.positional_encoding(2048, 512).numpy(),
                             atol=1e-6)


def test_embedding_attention_and_feed_forward_layers(tokenizers, batch):
  (pt, en), _ = batch
  embed_pt = PositionalEmbedding(vocab_size=tokenizers.pt.get_vocab_size().numpy(), d_model=512)
  embed_en = PositionalEmbedding(vocab_size=tokenizers.en.get_vocab_size().numpy(), d_model=512)
  pt_emb, en_emb = embed_pt(pt), embed_en(en)
  assert pt_emb.shape == (*pt.shape, 512) and en_emb.shape == (*en.shape, 512)

  sample_ca = CrossAttention(num_heads=2, key_dim=512)
  assert sample_ca(en_emb, pt_emb).shape == en_emb.shape
  assert sample_ca.last_attn_scores.shape == (64, 2, en.shape[1], pt.shape[1])
  sample_gsa = GlobalSelfAttention(num_heads=2, key_dim=512)
  assert sample_gsa(pt_emb).shape == pt_emb.shape
  sample_csa = CausalSelfAttention(num_heads=2, key_dim=512)
  assert sample_csa(en_emb).shape == en_emb.shape
  # The tutorial's causality check: the first 3 positions do not see the rest.
  out1 = sample_csa(embed_en(en[:, :3]))
  out2 = sample_csa(embed_en(en))[:, :3]
  assert tf.reduce_max(abs(out1 - out2)).numpy() < 1e-4

  sample_ffn = FeedForward(512, 2048)
  assert sample_ffn(en_emb).shape == en_emb.shape


@pytest.mark.slow
def test_encoder_and_decoder_take_the_tutorials_arguments(batch):
  (pt, en), _ = batch
  # Eight of the batch's pairs: the same layers and shapes, an eighth of the arithmetic.
  pt, en = pt[:8], en[:8]
  pt_emb = tf.random.normal((*pt.shape, 512))
  en_emb = tf.random.normal((*en.shape, 512))
  sample_encoder_layer = EncoderLayer(d_model=512, num_heads=8, dff=2048)
  assert sample_encoder_layer(pt_emb).shape == pt_emb.shape
  sample_encoder = Encoder(num_layers=4, d_model=512, num_heads=8, dff=2048, vocab_size=8500)
  assert sample_encoder(pt, training=False).shape == (*pt.shape, 512)
  assert len(sample_encoder.enc_layers) == 4

  sample_decoder_layer = DecoderLayer(d_model=512, num_heads=8, dff=2048)
  assert sample_decoder_layer(x=en_emb, context=pt_emb).shape == en_emb.shape
  sample_decoder = Decoder(num_layers=4, d_model=512, num_heads=8, dff=2048, vocab_size=8000)
  output = sample_decoder(x=en, context=pt_emb)
  assert output.shape == en_emb.shape
  assert sample_decoder.last_attn_scores.shape == (8, 8, en.shape[1], pt.shape[1])
  # The tutorial's layers: key_dim=d_model heads, its MHA dropout, no
  # dropout on the attention outputs, Keras' LayerNorm ε.
  attention = sample_decoder.dec_layers[0].cross_attention
  assert attention.mha.key_dim == 512 and attention.mha.attention_dropout_rate == 0.1
  assert attention.dropout.rate == 0.0 and attention.layernorm.epsilon == 1e-3


@pytest.mark.slow
def test_transformer_is_the_tutorials_model(transformer, batch):
  (pt, en), _ = batch
  # Eight of the batch's pairs: the same model and shapes, an eighth of the arithmetic.
  pt, en = pt[:8], en[:8]
  output = transformer((pt, en))
  assert output.shape == (*en.shape, 7010)
  attn_scores = transformer.decoder.dec_layers[-1].last_attn_scores
  assert attn_scores.shape == (8, num_heads, en.shape[1], pt.shape[1])
  assert transformer.count_params() == TUTORIAL_PARAMETERS
  summary = io.StringIO()
  transformer.summary(print_fn=lambda line, **_: summary.write(line + "\n"))
  assert f"{TUTORIAL_PARAMETERS:,}" in summary.getvalue()

  # The same layers as the tutorial's: with its model's weights copied in,
  # the logits agree at every real position.
  baseline = tutorial_baseline.build(tutorial_baseline.TutorialTransformer(
      num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
      input_vocab_size=7765, target_vocab_size=7010, dropout_rate=dropout_rate))
  # Keras' MHA keeps its projections per head, (d_model, heads, key_dim); ours
  # are flat (d_model, heads · key_dim): the same weights, one by one.
  assert ([int(np.prod(w.shape)) for w in baseline.weights]
          == [int(np.prod(w.shape)) for w in transformer.weights])
  tutorial_baseline.copy_weights(transformer, baseline)
  real = en.numpy() != 0
  np.testing.assert_allclose(baseline((pt, en), training=False).numpy()[real],
                             transformer((pt, en), training=False).numpy()[real],
                             atol=5e-5, rtol=1e-4)


@pytest.mark.slow
def test_compile_fit_and_keras_file_round_trip(transformer, batch, tmp_path_factory):
  (pt, en), en_labels = batch
  # Eight of the batch's pairs: the same traces and file, an eighth of the arithmetic.
  pt, en, en_labels = pt[:8], en[:8], en_labels[:8]
  learning_rate = CustomSchedule(d_model)
  optimizer = keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
  assert learning_rate(tf.range(40000, dtype=tf.float32)).shape == (40000,)
  transformer.compile(loss=masked_loss, optimizer=optimizer, metrics=[masked_accuracy])
  train_batches = tf.data.Dataset.from_tensors(((pt, en), en_labels)).repeat(3)
  before = [w.numpy() for w in transformer.trainable_weights]
  history = transformer.fit(train_batches, epochs=1, validation_data=train_batches.take(1),
                            verbose=0)
  assert {"loss", "masked_accuracy", "val_loss"} <= set(history.history)
  assert np.isfinite(history.history["loss"][0])
  # Three updates at the warm-up's first rates move every weight.
  assert all(not np.array_equal(b, w.numpy())
             for b, w in zip(before, transformer.trainable_weights))
  assert transformer.optimizer.iterations.numpy() == 3

  path = tmp_path_factory.mktemp("keras") / "transformer.keras"
  transformer.save(path)
  reloaded = keras.models.load_model(path)
  assert reloaded.loss is masked_loss
  np.testing.assert_allclose(reloaded((pt, en), training=False).numpy(),
                             transformer((pt, en), training=False).numpy(), atol=1e-6)
  after = reloaded.evaluate(train_batches.take(1), verbose=0, return_dict=True)
  np.testing.assert_allclose(after["loss"], history.history["val_loss"][0], rtol=1e-5)


@pytest.mark.slow
def test_translator_its_printout_and_its_plots(transformer, tokenizers, monkeypatch):
  matplotlib.use("Agg")
  shown = []
  monkeypatch.setattr(matplotlib.pyplot, "show", lambda: shown.append(True))
  translator = Translator(tokenizers, transformer)
  sentence = "este é um problema que temos que resolver."
  ground_truth = "this is a problem we have to solve ."
  translated_text, translated_tokens, attention_weights = translator(
      tf.constant(sentence))
  assert translated_text.dtype == tf.string and translated_text.shape == ()
  assert translated_tokens[0].numpy() == b"[START]"
  in_tokens = tokenizers.pt.lookup(tokenizers.pt.tokenize(
      tf.convert_to_tensor([sentence])).to_tensor())[0]
  assert attention_weights.shape == (1, num_heads, len(translated_tokens) - 1, len(in_tokens))
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    print_translation(sentence, translated_text, ground_truth)
  assert printed.getvalue().splitlines() == [
      f"Input:         : {sentence}",
      f"Prediction     : {translated_text.numpy().decode('utf-8')}",
      f"Ground truth   : {ground_truth}"]

  head = 0
  attention_heads = tf.squeeze(attention_weights, 0)
  attention = attention_heads[head]
  plot_attention_head(in_tokens, translated_tokens, attention)
  axes = matplotlib.pyplot.gca()
  assert [t.get_text() for t in axes.get_xticklabels()] == [
      t.decode("utf-8") for t in in_tokens.numpy()]
  assert len(axes.get_yticklabels()) == len(translated_tokens) - 1
  plot_attention_weights(sentence, translated_tokens, attention_weights[0])
  assert shown == [True]
  assert len(matplotlib.pyplot.gcf().axes) == num_heads
  matplotlib.pyplot.close("all")


@pytest.mark.slow
def test_export_translator_is_callable_after_reloading(transformer, tokenizers, tmp_path):
  translator = ExportTranslator(Translator(tokenizers, transformer))
  expected = translator("este é o primeiro livro que eu fiz.").numpy()
  text, _, _ = translator.translator(tf.constant("este é o primeiro livro que eu fiz."))
  assert expected == text.numpy()
  tf.saved_model.save(translator, export_dir=str(tmp_path / "translator"))
  reloaded = tf.saved_model.load(str(tmp_path / "translator"))
  assert reloaded("este é o primeiro livro que eu fiz.").numpy() == expected
