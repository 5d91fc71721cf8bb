"""A reference Keras/TensorFlow Transformer (Vaswani et al. 2017, "Attention Is All You Need").

The modules follow the reading order of the TensorFlow tutorial
"Neural machine translation with a Transformer and Keras":

==========================  ============================================
tutorial section            module
==========================  ============================================
Data handling               ``data`` (loading), ``tokenizers``, ``pipeline``
Positional embedding        ``embedding``
Attention layers            ``attention``
Feed-forward network        ``feed_forward``
Encoder / decoder           ``encoder``, ``decoder``
The Transformer             ``model``
Training set-up             ``optimization`` (the schedule), ``losses``
Train the model             ``training/`` (the loop and its machinery)
Run inference               ``decoding``
Attention plots             ``plotting``
Export the model            ``export``
(BLEU, checkpoint averaging) ``evaluation``, ``bleu``, ``averaging``,
                            ``run_folder`` (a train.py output folder)
==========================  ============================================

Configuration lives in ``config`` (defaults and validation) and ``configs/``.
"""
