"""The paper's base model (Vaswani et al. 2017, Table 3, "base"): 65M parameters.

Three-way weight sharing over a joint vocabulary, as in §3.4, and batches of
about 25,000 source and 25,000 target tokens, as in §5.1.
"""

from transformer.config import default_config


def get_config(device: str = "cpu"):
  """``configs/base.py:gpu`` pads each batch to one of 5 bucket lengths, for XLA
  on an accelerator: 5 shapes an epoch instead of 8."""
  if device not in ("cpu", "gpu"):
    raise ValueError(f"configs/base.py:{device}: choose 'cpu' or 'gpu'")
  config = default_config()
  config.model.output_weights = "shared"
  config.data.vocabulary = "joint"
  config.data.bucketing = True
  config.data.tokens_per_batch = 25000
  if device == "gpu":
    # The tutorial's buckets (configs/tutorial.py:gpu): 5 shapes instead of 8, for 65.5%
    # real target tokens instead of 67.4% (the tutorial's tokenizer;
    # lab/bench/results/bucket_batches.json).
    config.data.bucket_lengths = (16, 32, 48, 64, 128)
    # Under JAX, 8 steps a call: one dispatch of the step's hundreds of arrays
    # per 8 batches (lab/bench/accelerator/README.md, loop_speed.py).
    config.training.steps_per_dispatch = 8
  return config
