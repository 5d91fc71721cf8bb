"""The tokenizers' reserved tokens and their ids, with no TensorFlow import:
decoding (``transformer/inference/decoding.py``) and the NumPy detokenizer
(``transformer/data/detokenize.py``) run under JAX without TensorFlow."""

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
PAD_ID = RESERVED_TOKENS.index("[PAD]")
START_ID = RESERVED_TOKENS.index("[START]")
END_ID = RESERVED_TOKENS.index("[END]")
