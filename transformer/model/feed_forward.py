"""The position-wise feed-forward network (tutorial: "The feed forward network"; paper §3.3)."""

import keras


@keras.saving.register_keras_serializable(package="transformer")
class FeedForward(keras.layers.Layer):
  """``LayerNorm(x + Dropout(W₂·ReLU(W₁·x + b₁) + b₂))`` (eq. 2, §5.4).

  Input and output: ``(batch, length, d_model)``; the inner layer is ``dff`` wide.
  """

  def __init__(self, d_model: int, dff: int, dropout_rate: float = 0.1,
               layer_norm_epsilon: float = 1e-3, **kwargs):
    super().__init__(**kwargs)
    self.d_model = d_model
    self.dff = dff
    self.dropout_rate = dropout_rate
    self.layer_norm_epsilon = layer_norm_epsilon
    self.inner = keras.layers.Dense(dff, activation="relu", name="inner")
    self.outer = keras.layers.Dense(d_model, name="outer")
    self.dropout = keras.layers.Dropout(dropout_rate)
    self.layernorm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon)

  def build(self, x_shape):
    self.inner.build(x_shape)
    self.outer.build((*x_shape[:-1], self.dff))
    self.layernorm.build(x_shape)
    self.built = True

  def call(self, x, training=None):
    y = self.outer(self.inner(x))
    return self.layernorm(x + self.dropout(y, training=training))

  def compute_output_shape(self, x_shape):
    return x_shape

  def get_config(self):
    return {**super().get_config(), "d_model": self.d_model, "dff": self.dff,
            "dropout_rate": self.dropout_rate, "layer_norm_epsilon": self.layer_norm_epsilon}
