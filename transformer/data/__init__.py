"""The data (tutorial: "Data handling"): the TED HRLR files (``ted``), the
vocabularies and tokenizers (``sources``, ``wordpiece``, ``tokenizers``, and
the tokenizer SavedModel's module ``tokenizer_module``), the
``tf.data`` batches (``pipeline``) and the NumPy shards the JAX path trains from
(``shards``, which imports no TensorFlow)."""
