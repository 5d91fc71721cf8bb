"""Checkpoint averaging (paper §6.1: "averaging the last 5 checkpoints"), and
restoring a model only from a checkpoint that fits it."""

from pathlib import Path
from typing import List, Sequence

from absl import logging
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from transformer.run.checkpoint_files import drop_unreadable_newest
from transformer.run.errors import CheckpointError, describe_error
from transformer.run.run_folder import PathLike

# Where tf.train.Checkpoint stores its object graph inside a checkpoint.
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def last_checkpoints(checkpoint_dir: PathLike, n: int) -> List[str]:
  """The last ``n`` intact checkpoints of ``checkpoint_dir``'s ``checkpoint``
  file, oldest first; :class:`CheckpointError` when there are fewer."""
  if n < 1:
    raise CheckpointError(f"the number of checkpoints must be >= 1, got {n}")
  try:
    state = tf.train.get_checkpoint_state(str(checkpoint_dir))
  except Exception as e:  # pylint: disable=broad-except  (ParseError, OpError...)
    raise CheckpointError(f"{Path(checkpoint_dir) / 'checkpoint'} is corrupt: "
                          f"{describe_error(e)}") from e
  paths, unreadable = drop_unreadable_newest(
      list(state.all_model_checkpoint_paths) if state else [])
  for prefix, reason in unreadable:
    logging.warning("skipping the checkpoint %s: it cannot be read (%s)", prefix, reason)
  if len(paths) < n:
    raise CheckpointError(
        f"asked for the last {n} checkpoints but {checkpoint_dir} has "
        f"{len(paths)}{' intact' if unreadable else ''}"
        f"{': ' + ', '.join(paths) if paths else ''}"
        f"{''.join(f'; {p} cannot be read ({r})' for p, r in unreadable)}")
  return paths[-n:]


def average_checkpoints(model, paths: Sequence[str]) -> None:
  """Sets the model's weights to the element-wise mean of the checkpoints
  ``paths``, each restored in turn (:func:`restore_model`)."""
  if not paths:
    raise CheckpointError("no checkpoints to average")
  variables = [v for v in model.weights if tf.as_dtype(v.dtype).is_floating]
  sums = [np.zeros(v.shape, np.float64) for v in variables]
  for path in paths:
    restore_model(model, path)
    for total, variable in zip(sums, variables):
      total += variable.numpy()
  for total, variable in zip(sums, variables):
    variable.assign((total / len(paths)).astype(tf.as_dtype(variable.dtype).as_numpy_dtype))


def count_model_variables(path: str) -> int:
  """How many variables the checkpoint holds below its root's ``model`` child,
  counted in its object graph: by name, the Trainer's checkpoints reach them
  through the optimizer (``optimizer/_trainable_variables/N``)."""
  reader = tf.train.load_checkpoint(path)
  if not reader.has_tensor(_OBJECT_GRAPH_KEY):
    raise CheckpointError(f"{path} has no object graph: it was not written by "
                          "tf.train.Checkpoint")
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
  stack = [child.node_id for child in graph.nodes[0].children if child.local_name == "model"]
  seen = set()
  while stack:
    node = stack.pop()
    if node not in seen:
      seen.add(node)
      stack.extend(child.node_id for child in graph.nodes[node].children)
  return sum(1 for node in seen if graph.nodes[node].attributes)


def restore_model(model, path: str) -> None:
  """Loads the model's weights from a ``tf.train.Checkpoint(model=model, ...)``
  that fits exactly (as many variables below ``model``, each matched: the
  restore skips silently what it cannot reach), else :class:`CheckpointError`."""
  if not model.built:
    raise CheckpointError(f"build the model before restoring {path} into it")
  try:
    saved = count_model_variables(path)
  except tf.errors.OpError as e:
    raise CheckpointError(f"cannot read the checkpoint {path}: {describe_error(e)}") from e
  if saved != len(model.weights):
    raise CheckpointError(
        f"{path} holds {saved} model variables, this model has {len(model.weights)}: "
        "it was written by a different model (configuration or vocabulary)")
  try:
    status = tf.train.Checkpoint(model=model).restore(path).expect_partial()
    status.assert_existing_objects_matched()
  except Exception as e:  # pylint: disable=broad-except  (AssertionError, OpError, IndexError...)
    raise CheckpointError(f"{path} does not fit the model: {describe_error(e)}") from e
