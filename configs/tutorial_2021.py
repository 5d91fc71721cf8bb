"""The TensorFlow tutorial as it was before its Keras rewrite: "Transformer
model for language understanding" (tensorflow/text, docs/tutorials/transformer.ipynb,
first commits of 2021).

The questions about the √d_model scaling usually quote this version
(``x *= tf.math.sqrt(tf.cast(self.d_model, tf.float32))`` in ``Encoder.call``).
It is closer to the paper than the current tutorial: heads of width
d_model/h, sines and cosines interleaved, dropout after every sub-layer and
none on the attention weights, LayerNorm ε 1e-6. Like the current tutorial it
has a separate output ``Dense`` with bias and no label smoothing. Its tables
of positions hold 1,000 rows (``pe_input=pe_target=1000``). Its pipeline cut
no sentence; here the data pipeline keeps ``data.max_tokens`` = 128 tokens, as
the current tutorial does.
"""

from configs import tutorial


def get_config():
  """The current tutorial's configuration with the 2021 version's choices."""
  config = tutorial.get_config()
  config.model.attention_dropout_rate = 0.0
  config.model.residual_dropout_on_attention = True
  config.model.head_width = "split"
  config.model.positional_layout = "interleaved"
  config.model.layer_norm_epsilon = 1e-6
  config.model.max_position = 1000
  return config
