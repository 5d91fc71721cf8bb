"""A tiny model for tests and smoke runs: trains in seconds on a CPU.

One layer a stack: tests look at the machinery around the model, and one layer
traces in about 70% of the time of two (a train.py run of a few steps takes
19 instead of 27 CPU seconds). Tests of stacking build their own models.
"""

from transformer.config import default_config


def get_config():
  config = default_config()
  config.model.num_layers = 1
  config.model.d_model = 32
  config.model.dff = 64
  config.model.num_heads = 4
  config.model.max_position = 256
  config.data.max_tokens = 64
  config.data.batch_size = 16
  config.data.shuffle_buffer = 1000
  config.data.vocab_size = 1000
  config.training.warmup_steps = 100
  config.training.epochs = 1
  config.training.checkpoint_every_steps = 50
  config.decoding.extra_length = 10
  return config
