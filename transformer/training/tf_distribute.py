"""Choosing a ``tf.distribute`` strategy by name (the TF Model Garden's ``--strategy``).

``default`` (one device), ``mirrored`` (the local GPUs, or the CPU),
``tpu`` (``TPUStrategy``; the address is a TPU name or ``grpc://`` address,
none: the local TPU VM), ``multi_worker`` (the cluster from ``TF_CONFIG``) and
``auto`` (``tpu`` given an address, else ``mirrored`` on two or more GPUs, else
``default``). Only :func:`get_strategy` touches devices: the rest is tested
on a machine without TPUs or GPUs."""

import os
from typing import Optional

from absl import logging

from transformer.run.errors import UsageError

STRATEGIES = ("default", "mirrored", "tpu", "multi_worker", "auto")
MIXED_PRECISION = ("none", "mixed_float16", "mixed_bfloat16")


def check_strategy_flags(name: str, tpu_address: Optional[str] = None,
                         mixed_precision: str = "none") -> None:
  """Raises UsageError for an unknown or contradictory combination (a TPU
  address without ``tpu``/``auto``; ``mixed_float16``, a GPU set-up, on a TPU)."""
  if name not in STRATEGIES:
    raise UsageError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
  if mixed_precision not in MIXED_PRECISION:
    raise UsageError(f"unknown mixed precision policy {mixed_precision!r}; "
                     f"choose one of {', '.join(MIXED_PRECISION)}")
  if tpu_address and name not in ("tpu", "auto"):
    raise UsageError(f"a TPU address ({tpu_address!r}) was given with strategy "
                     f"{name!r}; use --strategy=tpu or --strategy=auto, or drop --tpu")
  on_tpu = name == "tpu" or (name == "auto" and bool(tpu_address))
  if on_tpu and mixed_precision == "mixed_float16":
    raise UsageError("mixed_float16 is for GPUs; on a TPU use --mixed_precision=mixed_bfloat16")


def resolve_strategy_name(name: str, tpu_address: Optional[str] = None,
                          num_gpus: int = 0) -> str:
  """The concrete strategy ``name`` stands for (resolves ``auto``)."""
  check_strategy_flags(name, tpu_address)
  if name != "auto":
    return name
  return "tpu" if tpu_address else "mirrored" if num_gpus >= 2 else "default"


def get_strategy(name: str, tpu_address: Optional[str] = None):
  """Creates the ``tf.distribute.Strategy`` called ``name`` (see the module docstring)."""
  # Deferred: TensorFlow is kept out of the JAX process, which imports this module.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  num_gpus = len(tf.config.list_physical_devices("GPU")) if name == "auto" else 0
  resolved = resolve_strategy_name(name, tpu_address, num_gpus)
  if resolved == "default":
    strategy = tf.distribute.get_strategy()
  elif resolved == "mirrored":
    strategy = tf.distribute.MirroredStrategy()
  elif resolved == "multi_worker":
    if "TF_CONFIG" not in os.environ:
      logging.warning("strategy multi_worker without TF_CONFIG: running as a single worker")
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
  else:  # tpu
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address or "")
    if tpu_address not in (None, "", "local"):
      tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    strategy = tf.distribute.TPUStrategy(resolver)
  replicas = strategy.num_replicas_in_sync
  logging.info("strategy %s: %d replica%s", resolved, replicas, "" if replicas == 1 else "s")
  return strategy


def distribute_dataset(strategy, dataset):
  """``dataset`` (global batches) as ``strategy`` feeds it to its replicas:
  with a cluster each worker reads its own share (auto-shard by DATA); without
  tf.data's autotuner, as an iterator lives one epoch or one validation only."""
  # Deferred: TensorFlow is kept out of the JAX process, which imports this module.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  dataset = pipeline.without_autotuner(dataset)
  if getattr(strategy, "cluster_resolver", None) is not None:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA)
    dataset = dataset.with_options(options)
  return strategy.experimental_distribute_dataset(dataset)


def is_chief(strategy) -> bool:
  """Whether this process writes checkpoints, summaries and exports: all but the
  non-chief workers of a multi-worker strategy (worker 0 when there is no chief task)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not getattr(strategy.extended, "_in_multi_worker_mode",
                                     lambda: False)():
    return True
  task_type, task_id = resolver.task_type, resolver.task_id
  if task_type == "chief" or task_type is None:
    return True
  cluster = resolver.cluster_spec().as_dict()
  return task_type == "worker" and task_id == 0 and "chief" not in cluster


def mean_over_replicas(strategy, value: float) -> float:
  """The mean of each replica's ``value``: one number every worker agrees on
  (e.g. a time each worker measured for itself)."""
  if strategy.num_replicas_in_sync == 1:
    return float(value)
  # Deferred: TensorFlow is kept out of the JAX process, which imports this module.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  local = tf.constant(float(value), tf.float64)
  per_replica = strategy.run(lambda: tf.identity(local))
  return float(strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None))

