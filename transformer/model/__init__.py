"""The Transformer (paper §3; tutorial: "Define the components" to "The Transformer").

Written in ``keras.ops``, so that it runs on TensorFlow and on JAX; nothing here
imports TensorFlow or any other folder of the package but the configuration.
Read in this order: ``embedding``, ``attention``, ``feed_forward``, ``encoder``,
``decoder``, ``transformer``; then ``optimization`` (the learning-rate schedule)
and ``losses``.
"""

from transformer.model.transformer import Transformer
