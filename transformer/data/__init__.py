"""The data (tutorial: "Data handling"): the TED HRLR files (``ted``), the
vocabularies and tokenizers (``sources``, ``wordpiece``, ``tokenizers``), the
``tf.data`` batches (``pipeline``) and the NumPy shards the JAX path trains from
(``shards``, which imports no TensorFlow)."""
