"""The Transformer (paper §3; tutorial: "Define the components" to "The Transformer").

Written in ``keras.ops``; imports neither TensorFlow nor the package outside ``model/``
(``tests/unit/test_layering.py``). Read in this order: ``settings`` (the ``config.model``
fields), ``embedding``, ``attention``, ``feed_forward``, ``encoder``, ``decoder``,
``transformer``; then ``optimization`` (the learning-rate schedule) and ``losses``.
``transformer.model.settings`` alone, as ``transformer.config`` imports it, imports no Keras.
"""


def __getattr__(name: str):
  if name == "Transformer":
    # Deferred: Keras imports TensorFlow, which train.py's start (config, flags) runs without.
    from transformer.model.transformer import Transformer  # pylint: disable=g-import-not-at-top
    return Transformer
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
