"""The pipeline on the full TED HRLR training split (transformer/data/pipeline.py):
what bucketing saves. The batches' content: tests/unit/test_pipeline.py."""

import pytest

from transformer.data import ted
from transformer.data import pipeline


@pytest.mark.slow
def test_bucketing_pads_far_less_on_the_real_train_split(ted_data_dir, tutorial_tokenizers):
  # Measured (tutorial tokenizer, max_tokens 128): random batches of 64 pad
  # 73% of positions, bucketed ones 7.6%.
  train = ted.load_split(ted_data_dir, "train")
  random_batches = pipeline.padding_fraction(
      pipeline.make_batches(train, tutorial_tokenizers, batch_size=64))
  bucketed = pipeline.padding_fraction(
      pipeline.make_batches(train, tutorial_tokenizers, batch_size=64, bucketing=True))
  print(f"\npadding fraction: random {random_batches:.3f}, bucketed {bucketed:.3f}")
  assert 0.65 < random_batches < 0.80
  assert bucketed < 0.25 * random_batches
