"""The data (tutorial: "Data handling"): where it comes from (``sources``,
``download``, ``ted``), the tokenizers (``wordpiece``, ``tokenizers``,
``tokenizer_module``, ``detokenize``), the ``tf.data`` batches (``pipeline``),
the JAX path's NumPy shards (``shards``) and their shared ``buckets``."""
