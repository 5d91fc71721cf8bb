"""The TensorFlow tutorial "Neural machine translation with a Transformer and Keras".

Every field where the tutorial differs from the paper is set to the tutorial's
choice, so that this configuration has exactly the tutorial's 10,184,162
parameters with its tokenizer.
"""

from transformer.config import default_config


def get_config(device: str = "cpu"):
  """``configs/tutorial.py:gpu`` batches by explicit length buckets instead of
  random batches of 64 sentences, for XLA on an accelerator."""
  if device not in ("cpu", "gpu"):
    raise ValueError(f"configs/tutorial.py:{device}: choose 'cpu' or 'gpu'")
  config = default_config()
  config.model.num_layers = 4
  config.model.d_model = 128
  config.model.dff = 512
  config.model.num_heads = 8
  config.model.dropout_rate = 0.1
  config.model.attention_dropout_rate = 0.1
  config.model.residual_dropout_on_attention = False
  config.model.head_width = "full"
  config.model.positional_layout = "concatenated"
  config.model.output_weights = "untied"
  config.model.layer_norm_epsilon = 1e-3
  config.training.label_smoothing = 0.0
  config.training.epochs = 20
  # Not a tutorial-vs-paper choice but a speed switch: the tutorial's random
  # batches are mostly padding, and 8 sub-batches of similar length compute the
  # same gradient on fewer positions (transformer/training/tf_step.py, lab/bench/speed.py).
  config.training.length_groups = 8
  if device == "gpu":
    # 5 shapes, 68% real target tokens against 23% for random batches of 64, and
    # 1,379 real target tokens a step against 1,413: about as many steps an epoch
    # (830 against 810), so the schedule stays comparable (lab/bench/README.md,
    # "Length buckets"; lab/bench/results/bucket_batches.json).
    config.data.bucket_lengths = (16, 32, 48, 64, 128)
    config.data.tokens_per_batch = 2048
    config.training.length_groups = 1  # the buckets leave little padding to cut
    # Under JAX, 8 steps a call: one dispatch of the step's hundreds of arrays
    # per 8 batches (lab/bench/accelerator/README.md, loop_speed.py).
    config.training.steps_per_dispatch = 8
  return config
