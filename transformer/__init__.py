"""A reference Keras/TensorFlow Transformer (Vaswani et al. 2017, "Attention Is All You Need").

The package is laid out so that the model stands apart from what feeds, runs and
trains it; each folder imports only the folders above it in this list:

===============  ===============================================================
folder           what it holds
===============  ===============================================================
``model/``       the Transformer in ``keras.ops`` (TensorFlow or JAX), one module
                 per tutorial section, with its losses and learning-rate schedule
``data/``        the TED HRLR files, WordPiece tokenizers, the ``tf.data``
                 pipeline and the NumPy shards of the JAX path
``run/``         a ``train.py`` output folder: its files, checkpoint files,
                 atomic writes and the lock, signals, progress, process set-up
``inference/``   decoding (greedy and beam), the exported translator, BLEU,
                 checkpoint averaging, attention plots
``training/``    the two trainers (TensorFlow, and Keras on JAX) and their loop
===============  ===============================================================

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
                            import Transformer``)
Training set-up             ``model.optimization`` (the schedule), ``model.losses``
Train the model             ``training/`` (the loop and its machinery)
Run inference               ``inference.decoding``
Attention plots             ``inference.plotting``
Export the model            ``inference.export``
(BLEU, checkpoint averaging) ``inference.evaluation``, ``inference.bleu``,
                            ``inference.averaging``, ``run.run_folder``
==========================  ============================================

Configuration lives in ``config`` (defaults and validation) and ``configs/``.
"""
