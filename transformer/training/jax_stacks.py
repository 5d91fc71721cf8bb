"""The host's side of the JAX trainer's stacks of K = ``training.steps_per_dispatch`` batches.

A compiled call costs the host about 5 µs per array it takes (2.3–3.6 ms for the
tutorial's model): :func:`transformer.training.jax_steps.make_stack_step` runs K steps a call.
"""

import itertools
from typing import Iterator, List, Tuple

import jax
import numpy as np

# Batches of one shape in a row: stacks of any K that divides it are full,
# except for each shape's last group of an epoch.
GROUP_LENGTH = 32


def shape_of(batch) -> Tuple:
  """The shapes of a batch's arrays: batches of one shape share a compiled step."""
  return tuple(array.shape for array in jax.tree_util.tree_leaves(batch))


def grouped_by_shape(batches: List, group_length: int = GROUP_LENGTH) -> List:
  """``batches`` in groups of ``group_length`` of one shape: each group where
  its last batch comes, the shapes' shorter last groups at the end in the order
  of their first batch, each group in the batches' own order. The order does not
  depend on K, so any K trains on the same batches (on the CPU to the same
  weights bit for bit: tests/backends/test_jax_trainer_state.py)."""
  groups, open_groups = [], {}
  for batch in batches:
    group = open_groups.setdefault(shape_of(batch), [])
    group.append(batch)
    if len(group) == group_length:
      groups.append(open_groups.pop(shape_of(batch)))
  return [batch for group in groups + list(open_groups.values()) for batch in group]


def stack_ranges(batches: List, begin: int, end: int, size: int) -> List[Tuple[int, int]]:
  """``(first, stop)`` of the stacks of ``batches[begin:end]``: up to ``size``
  consecutive batches of one shape each."""
  ranges = []
  for _, run in itertools.groupby(range(begin, end), lambda index: shape_of(batches[index])):
    run = list(run)
    ranges += [(first, min(first + size, run[-1] + 1)) for first in run[::size]]
  return ranges


def stacked(batches: List, size: int):
  """``(arrays, active)``: 1 to ``size`` batches of one shape as arrays of
  ``(size, *batch shape)``, zeros after the last batch, and ``(size,)`` flags of
  the steps that train."""

  def stack(*arrays):
    out = np.zeros((size,) + arrays[0].shape, arrays[0].dtype)
    out[:len(arrays)] = arrays
    return out
  return jax.tree_util.tree_map(stack, *batches), np.arange(size) < len(batches)


class EpochStacks:
  """An epoch's batches (:func:`grouped_by_shape`) after the first ``skip``, a
  stack a chunk (:class:`transformer.training.engine.EpochBatches`), trained by
  ``steps`` (:class:`transformer.training.jax_steps.DeviceSteps`)."""

  def __init__(self, batches: List, skip: int, steps):
    self._batches, self._skip, self._steps = batches, skip, steps
    self.length = len(batches)

  def chunks(self, last: int) -> Iterator[Tuple[int, Tuple[int, object]]]:
    """Compiles every shape up to batch ``last`` (so, before the epoch's clock)."""
    size = self._steps.steps_per_dispatch
    for batch in {shape_of(b): b for b in self._batches[self._skip:last]}.values():
      self._steps.compile_stack(stacked([batch], size))
    return self._on_devices(stack_ranges(self._batches, self._skip, last, size), size)

  def _on_devices(self, ranges: List[Tuple[int, int]], size: int):
    """``(steps, (steps, stack))``, the next stack put on the devices before this
    one is handed out, so that the transfer overlaps the training before it."""
    stacks = (self._steps.on_devices(stacked(self._batches[first:stop], size), stacked=True)
              for first, stop in ranges)
    ahead = next(stacks, None)
    for first, stop in ranges:
      current, ahead = ahead, next(stacks, None)
      yield stop - first, (stop - first, current)
