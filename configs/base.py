"""The paper's base model (Vaswani et al. 2017, Table 3, "base"): 65M parameters.

Three-way weight sharing over a joint vocabulary, as in §3.4, and batches of
about 25,000 source and 25,000 target tokens, as in §5.1.
"""

from transformer.config import default_config


def get_config():
  config = default_config()
  config.model.output_weights = "shared"
  config.data.vocabulary = "joint"
  config.data.bucketing = True
  config.data.tokens_per_batch = 25000
  return config
