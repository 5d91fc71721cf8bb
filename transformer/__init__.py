"""A reference Keras/TensorFlow Transformer (Vaswani et al. 2017, "Attention Is All You Need").

The package is laid out so that the model stands apart from what feeds, runs and
trains it; each folder imports only the folders above it in this list, and
``config`` (``tests/unit/test_layering.py``):

===============  ===============================================================
folder           what it holds
===============  ===============================================================
``model/``       the Transformer in ``keras.ops`` (TensorFlow or JAX), one module
                 per tutorial section, with its settings (``model.settings``:
                 ``config.model``'s fields, defaults and check), its losses and
                 learning-rate schedule; it imports nothing else of the package
``run/``         a ``train.py`` output folder: its files, checkpoint files,
                 atomic writes and the lock, signals, progress, process set-up
``data/``        the TED HRLR files, WordPiece tokenizers, the ``tf.data``
                 pipeline and the NumPy shards of the JAX path
``inference/``   decoding (greedy and beam), the exported translator, BLEU,
                 checkpoint averaging, attention plots
``training/``    the two trainers (``TensorFlowTrainer``, ``JaxTrainer``), the
                 interface both implement and the loop that runs them
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

Configuration lives in ``config`` (defaults and validation; the model's
fields in ``model.settings``) and ``configs/``; ``config`` imports only the
model's settings.
"""
