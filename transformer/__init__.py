"""A reference Keras/TensorFlow Transformer (Vaswani et al. 2017, "Attention Is All You Need").

Each folder imports only the folders before it, and ``config``
(``tests/unit/test_layering.py``): ``model/`` (nothing else of the package),
``run/``, ``data/``, ``inference/``, ``training/``; each one's ``__init__`` says
what it holds.

The modules follow the reading order of the TensorFlow tutorial
"Neural machine translation with a Transformer and Keras":

==========================  ============================================
tutorial section            module
==========================  ============================================
Data handling               ``data.ted`` (loading), ``data.tokenizers``,
                            ``data.pipeline``
Positional embedding        ``model.embedding``
Attention layers            ``model.attention``
Feed-forward network        ``model.feed_forward``
Encoder / decoder           ``model.encoder``, ``model.decoder``
The Transformer             ``model.transformer`` (``from transformer.model
                            import Transformer``), ``model.settings``
Training set-up             ``model.optimization`` (the schedule), ``model.losses``
Train the model             ``training/`` (``training.loop``,
                            ``training.tf_engine``, ``training.jax_engine``)
Run inference               ``inference.decoding``
Attention plots             ``inference.plotting``
Export the model            ``inference.export``
(BLEU, checkpoint averaging) ``inference.evaluation``, ``inference.bleu``,
                            ``inference.averaging``, ``run.run_folder``
==========================  ============================================

Configuration lives in ``config`` (the model's fields in ``model.settings``)
and ``configs/``.
"""
