"""Decoding under ``KERAS_BACKEND=jax``: :mod:`transformer.inference.decoding`
compiled with ``jax.jit``, with no TensorFlow import.

``jax.jit`` needs every shape static, so the output buffers are as long as the
padded source allows (its width + ``extra_length``, at most ``max_position``),
not the batch's longest limit; the compiled function returns whole buffers and
the steps taken, cut here in NumPy. The weights are its arguments
(``keras.StatelessScope``), not constants baked in. One compilation per batch
shape: callers pad many batches to a few shapes (``evaluation_jax.py``). Rows of
padding only get an output limit of 0: the rows a caller adds to fill a batch
cost no steps (a real sentence always has [START] and [END]).
"""

import jax
import keras
from keras import ops
import numpy as np

from transformer.inference import decoding


class JaxDecoder:
  """``decoder(source_ids)`` → ``(tokens, scores)`` as :func:`decoding.decode`
  gives them: ``(batch, out_len)`` int32 NumPy tokens ([END] then padding, no
  [START]) and, for beam search, the ``(batch,)`` float32 scores (None for greedy).
  ``model``: a built Transformer (JAX backend); the rest ``config.decoding``'s (§6.1).
  """

  def __init__(self, model, method: str, *, beam_size: int = 4, length_penalty: float = 0.6,
               extra_length: int = 50):
    if method not in decoding.METHODS:
      raise ValueError(f"unknown decoding method {method!r}; choose one of {decoding.METHODS}")
    self._model = model
    self._method = method
    self._beam_size = beam_size
    self._alpha = length_penalty
    self._extra_length = extra_length
    self._compiled = jax.jit(self._buffers)

  def _buffers(self, values, source_ids):
    """The traced decoding: ``(buffer (batch, length + 1), scores (batch,), steps)``."""
    model = self._model
    with keras.StatelessScope(state_mapping=list(zip(model.variables, values))):
      source_ids = ops.cast(decoding.trim_source(source_ids, model.max_position), "int32")
      limits = decoding.output_length_limits(source_ids, self._extra_length, model.max_position)
      limits = ops.where(ops.any(ops.not_equal(source_ids, 0), axis=1), limits, 0)
      # Static: the longest any row of this width may need.
      length = min(source_ids.shape[1] + self._extra_length, model.max_position)
      if self._method == "greedy":
        ids, steps = decoding.greedy_steps(model, source_ids, limits, length)
        return ids, ops.zeros(ops.shape(limits), "float32"), steps
      return decoding.beam_steps(model, source_ids, limits, length, self._beam_size,
                                 self._alpha)

  def __call__(self, source_ids):
    values = [variable.value for variable in self._model.variables]
    ids, scores, steps = self._compiled(values, np.asarray(source_ids, np.int32))
    tokens = np.asarray(ids)[:, 1:int(steps) + 1]
    return tokens, (np.asarray(scores) if self._method == "beam" else None)
