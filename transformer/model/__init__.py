"""The Transformer (paper §3; tutorial: "Define the components" to "The Transformer").

Written in ``keras.ops``, so that it runs on TensorFlow and on JAX; nothing here
imports TensorFlow or anything of the package outside ``model/``
(``tests/unit/test_layering.py``). Read in this order: ``settings`` (the
``config.model`` fields), ``embedding``, ``attention``, ``feed_forward``,
``encoder``, ``decoder``, ``transformer``; then ``optimization`` (the
learning-rate schedule) and ``losses``.
"""

from transformer.model.transformer import Transformer
