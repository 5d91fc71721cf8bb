"""The JAX trainer's stacks: several steps in one dispatch, and the host kept off the critical path.

One call of a compiled function costs the host about 5 µs per array it takes
(2.3–3.6 ms for the tutorial's model), every call; the JAX trainer trains
``training.steps_per_dispatch`` (K) steps per call instead
(:func:`transformer.training.jax_steps.make_stack_step`, a ``jax.lax.scan``
over a stack of K batches of one shape). Here is the host's side of it:

* :func:`grouped_by_shape`: the epoch's batches reordered so that batches of one shape
  come in groups of :data:`GROUP_LENGTH`; the order does not depend on K, so a
  training at any K trains on the same sequence of batches (and, on the CPU, to
  the same weights bit for bit: tests/backends/test_jax_trainer_state.py).
* :func:`stack_ranges` cuts them into stacks of up to K consecutive batches
  of one shape, and :func:`stacked` makes each one arrays with a leading axis
  of K, padded with steps marked inactive.
* :func:`device_stacks` puts each stack on the devices while the one before
  it trains, and :class:`UnreadSums` holds the stacks' sums on the devices
  until the loop reads them, one stack late, so that the host never waits for
  the stack it has just dispatched.
"""

import math
from typing import Callable, Iterator, List, Tuple

import jax
import numpy as np

# Batches of one shape in a row: stacks of any K that divides it are full,
# except for each shape's last group of an epoch.
GROUP_LENGTH = 32


def shape_of(batch) -> Tuple:
  """The shapes of a batch's arrays: batches of one shape share a compiled step."""
  return tuple(array.shape for array in jax.tree_util.tree_leaves(batch))


def grouped_by_shape(batches: List, group_length: int = GROUP_LENGTH) -> List:
  """``batches`` in groups of ``group_length`` batches of one shape: each group
  in the order its last batch comes in ``batches``, the shapes' shorter last
  groups at the end in the order of their first batch; within a group, the
  batches' own order. A batch moves at most as far as its shape's group needs."""
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
  while begin < end:
    stop = begin + 1
    while (stop < end and stop - begin < size
           and shape_of(batches[stop]) == shape_of(batches[begin])):
      stop += 1
    ranges.append((begin, stop))
    begin = stop
  return ranges


def stacked(batches: List, size: int):
  """``(arrays, active)``: ``batches`` (1 to ``size`` of one shape) as arrays
  of ``(size, *batch shape)``, zeros after the last batch, and the ``(size,)``
  flags of the steps that train (the rest leave the state as it is)."""

  def stack(*arrays):
    out = np.zeros((size,) + arrays[0].shape, arrays[0].dtype)
    for index, array in enumerate(arrays):
      out[index] = array
    return out
  return jax.tree_util.tree_map(stack, *batches), np.arange(size) < len(batches)


def device_stacks(batches: List, ranges: List[Tuple[int, int]], size: int,
                  on_devices: Callable) -> Iterator[Tuple[int, int, object]]:
  """``(first, stop, stack on the devices)`` of each range in turn; the next
  stack is assembled and put on the devices before this one is handed out,
  while the one dispatched before it trains (one ahead: the transfer is not
  on the critical path)."""

  def put(index):
    first, stop = ranges[index]
    return on_devices(stacked(batches[first:stop], size), stacked=True)
  ahead = put(0) if ranges else None
  for index, (first, stop) in enumerate(ranges):
    current = ahead
    if index + 1 < len(ranges):
      ahead = put(index + 1)
    yield first, stop, current


class UnreadSums:
  """The sums of the dispatched stacks that the host has not read yet.

  Args:
    non_finite: ``(loss, step) -> exception`` for a NaN/Inf loss at ``step``.
  """

  def __init__(self, non_finite: Callable[[float, int], Exception]):
    self._non_finite = non_finite
    self._stacks = []  # (step before the stack, its steps, stop, device sums, step losses)

  def add(self, step: int, steps: int, stop: int, sums, step_losses) -> None:
    """A stack of ``steps`` steps after optimizer step ``step``, ending at the
    epoch's batch ``stop``, and its device arrays
    (:meth:`transformer.training.jax_steps.DeviceSteps.train_stack`)."""
    self._stacks.append((step, steps, stop, sums, step_losses))

  def read(self, keep_last: bool) -> List[Tuple[int, int, int, Tuple[float, float, float]]]:
    """``(step before, step after, stop, (loss_sum, tokens, correct))`` of
    every stack not read, but the last one when ``keep_last`` (it has just
    been dispatched: reading it would wait for it). Raises ``non_finite``'s
    error, naming the first step whose loss is NaN/Inf."""
    count = len(self._stacks) - 1 if keep_last else len(self._stacks)
    reading, self._stacks = self._stacks[:count], self._stacks[count:]
    host_sums = jax.device_get([sums for *_, sums, _ in reading])
    done = []
    for (step, steps, stop, _, step_losses), sums in zip(reading, host_sums):
      if not math.isfinite(float(sums[0])):
        losses = np.asarray(jax.device_get(step_losses))[:steps]
        bad = int(np.argmin(np.isfinite(losses)))
        raise self._non_finite(float(losses[bad]), step + bad + 1)
      done.append((step, step + steps, stop, tuple(float(value) for value in sums)))
    return done
