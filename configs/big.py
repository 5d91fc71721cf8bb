"""The paper's big model (Vaswani et al. 2017, Table 3, "big"): 213M parameters."""

from transformer.config import default_config


def get_config():
  config = default_config()
  config.model.d_model = 1024
  config.model.dff = 4096
  config.model.num_heads = 16
  config.model.dropout_rate = 0.3
  config.model.output_weights = "shared"
  config.data.vocabulary = "joint"
  config.data.bucketing = True
  config.data.tokens_per_batch = 25000
  return config
