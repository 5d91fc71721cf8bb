"""Length buckets: one rule for the ``tf.data`` pipeline and the NumPy shards (no TensorFlow).

Both batchings group sentences by length with ``bucket_by_sequence_length``
boundaries from :func:`bucket_boundaries`, each with its own recipe: the
pipeline's grow by 10% (:data:`GROWING_BUCKETS`), the shards' are
:data:`LENGTH_MULTIPLE` apart (:data:`FIXED_STEP_BUCKETS`), so that XLA meets
few shapes.
"""

from typing import List, Sequence

# The shards' batch lengths are rounded up to a multiple of this: few shapes for XLA.
LENGTH_MULTIPLE = 16
# From length 8, 10% longer each: the padding within a bucket stays near 10%.
GROWING_BUCKETS = dict(min_length=8, growth=1.1, step=1)
# Buckets LENGTH_MULTIPLE long: (i·m, (i+1)·m].
FIXED_STEP_BUCKETS = dict(min_length=LENGTH_MULTIPLE + 1, growth=1.0, step=LENGTH_MULTIPLE)


def bucket_boundaries(max_tokens: int, *, min_length: int, growth: float,
                      step: int) -> List[int]:
  """Boundaries from ``min_length`` up to ``max_tokens``, each the last times
  ``growth`` and at least ``step`` more: bucket i holds the lengths
  ``[boundaries[i-1], boundaries[i])``, the last bucket those up to ``max_tokens``."""
  boundaries = []
  length = min_length
  while length <= max_tokens:
    boundaries.append(length)
    length = max(length + step, int(length * growth))
  return boundaries


def bucket_max_lengths(boundaries: Sequence[int], max_tokens: int) -> List[int]:
  """The longest sequence each bucket of ``boundaries`` holds."""
  return [boundary - 1 for boundary in boundaries] + [max_tokens]
