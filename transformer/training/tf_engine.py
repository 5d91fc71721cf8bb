"""The TensorFlow engine, :class:`TensorFlowEngine`, and :class:`TensorFlowTrainer` (paper §5).

The tutorial calls ``transformer.fit(train_batches, epochs=20, ...)``; here
:class:`transformer.training.loop.Trainer` runs the epochs and this engine
trains one global batch per chunk under a ``tf.distribute`` strategy: the
model and optimizer from :mod:`transformer.training.tf_build`, the steps on
every replica from :mod:`transformer.training.tf_steps`. Its checkpoints
(:mod:`transformer.training.tf_checkpointing`) hold the model, the optimizer,
dropout's random state (a resumed run repeats the uninterrupted one bitwise)
and the loop's state: the position in the data, the epoch's running sums and
the time budget's plan.

Outputs under ``model_dir`` (the chief's only, under multi-worker):
``checkpoints/``, TensorBoard scalars in ``logs/train`` and
``logs/validation``, and one JSON line per epoch in ``metrics.jsonl``.
"""

from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import keras
import tensorflow as tf

from transformer.model import losses
from transformer.run.progress import plural
from transformer.training import tf_checkpointing
from transformer.training import tf_distribute
from transformer.training import loop
from transformer.training import tf_build
from transformer.training import tf_steps


# The time budget's state (transformer.training.budget.STATE) by its names in checkpoints.
_BUDGET_NAMES = {"used_seconds": "budget_used_seconds", "planned": "budget_planned_epochs",
                 "cooldown_steps": "budget_cooldown_steps",
                 "cooldown_end_step": "budget_cooldown_end_step"}


class _Batches:
  """An epoch's distributed batches, one a chunk
  (:class:`transformer.training.engine.EpochBatches`)."""

  def __init__(self, dist, length: int, skip: int):
    self._dist, self.length, self._skip = dist, length, skip

  def chunks(self, last: int):
    return ((1, batch) for _, batch in zip(range(self._skip, last), self._dist))


class TensorFlowEngine:
  """Builds the model and optimizer under a strategy and trains them
  (:class:`transformer.training.engine.Engine`).

  Args:
    config: the full configuration (see :mod:`transformer.config`).
    input_vocab_size, target_vocab_size: the tokenizers' vocabulary sizes.
    model_dir: where checkpoints go; None keeps nothing (tests).
    strategy: a ``tf.distribute.Strategy`` (default: the default strategy).
    mixed_precision: ``"none"``, ``"mixed_float16"`` or ``"mixed_bfloat16"``;
      sets Keras' global dtype policy (float32 for "none") before building.
    jit_compile: XLA-compile each replica's forward/backward pass
      (:mod:`transformer.training.tf_steps`).
  """

  def __init__(self, config, *, input_vocab_size: int, target_vocab_size: int,
               model_dir=None, strategy=None, mixed_precision: str = "none",
               jit_compile: bool = False):
    if mixed_precision not in tf_distribute.MIXED_PRECISION:
      raise ValueError(f"unknown mixed precision policy {mixed_precision!r}; "
                       f"choose one of {', '.join(tf_distribute.MIXED_PRECISION)}")
    length_groups = int(config.training.length_groups)
    if jit_compile and length_groups > 1:
      raise ValueError("jit_compile needs static shapes, and training.length_groups > 1 cuts "
                       "each sub-batch to a length known only at run time; use one or the other")
    self.strategy = strategy or tf.distribute.get_strategy()
    self.is_chief = tf_distribute.is_chief(self.strategy)
    self.model, self.optimizer, self._cooldown = tf_build.build(
        config, self.strategy, mixed_precision, input_vocab_size, target_vocab_size)
    self._steps = tf_steps.DistributedSteps(
        self.model, self.optimizer, self.strategy,
        label_smoothing=float(config.training.label_smoothing), length_groups=length_groups,
        jit_compile=jit_compile)
    # The loop's state as checkpoints hold it, by the names they have always had.
    variable = lambda name, dtype: tf.Variable(0, dtype=dtype, trainable=False, name=name)
    self._position = {name: variable(name, tf.int64)
                      for name in ("epoch", "step_in_epoch", "steps_per_epoch")}
    self._epoch_sums = tf_build.EpochSums()
    self._budget = {}
    if config.training.time_budget_minutes:
      self._budget = {"used_seconds": variable(_BUDGET_NAMES["used_seconds"], tf.float64),
                      "planned": variable(_BUDGET_NAMES["planned"], tf.int64),
                      "cooldown_steps": self._cooldown[0],
                      "cooldown_end_step": self._cooldown[1]}
    self._checkpoints = tf_checkpointing.Checkpoints(
        None if model_dir is None else Path(model_dir), self.strategy,
        keep=int(config.training.keep_checkpoints),
        model=self.model, optimizer=self.optimizer, **self._position,
        added_state={"dropout_rng": tf_build.dropout_random_state(self.model),
                     "epoch_sums": self._epoch_sums},
        **{_BUDGET_NAMES[name]: value for name, value in self._budget.items()})

  @property
  def step(self) -> int:
    """Optimizer steps taken (a skipped float16 overflow step is not one)."""
    return int(self.optimizer.iterations.numpy())

  def learning_rate(self, step: int) -> float:
    del step  # the optimizer's own counter, which a skipped step does not move
    return float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

  def describe(self) -> str:
    return plural(self.strategy.num_replicas_in_sync, "replica")

  # --------------------------------------------------------------- steps

  def epoch_batches(self, train_data: Callable[[int], tf.data.Dataset], epoch: int, skip: int,
                    length: int) -> _Batches:
    # The batches after the first ``skip`` (the restore's line said where). A
    # shuffle reshuffles on each pass over one dataset: the count passes over one
    # of its own, so that training takes the epoch's first pass, resumed or not.
    remaining = lambda: train_data(epoch).skip(skip)
    length = length or skip + int(remaining().reduce(tf.constant(0, tf.int64),
                                                     lambda count, _: count + 1))
    dist = tf_distribute.distribute_dataset(self.strategy, remaining())
    self._train_fn = self._steps.train_fn(dist.element_spec)
    return _Batches(dist, length, skip)

  def train(self, chunk):
    return self._train_fn(chunk)

  def read(self, trained: List) -> List[Tuple[float, float, float]]:
    return [tuple(float(value) for value in sums) for sums in trained]

  def non_finite(self, trained) -> Tuple[int, float]:
    return 0, losses.TokenMetrics().add(*trained).loss

  def train_on_batches(self, dataset, max_steps: Optional[int] = None) -> List[Dict]:
    """One optimizer step per batch of ``dataset`` and nothing else: the lab's
    benchmarks (:meth:`transformer.training.tf_steps.DistributedSteps.train_on_batches`)."""
    return self._steps.train_on_batches(dataset, max_steps)

  def evaluate(self, validation: tf.data.Dataset) -> losses.TokenMetrics:
    return self._steps.evaluate(validation)

  def set_cooldown(self, steps: int, end_step: int) -> None:
    self._cooldown[0].assign(steps)
    self._cooldown[1].assign(end_step)

  def agree(self, seconds: float) -> float:
    # Each worker timed itself; all must plan alike.
    return tf_distribute.mean_over_replicas(self.strategy, seconds)

  # --------------------------------------------------------------- checkpoints

  def save(self, state: Dict) -> None:
    """Writes a checkpoint numbered by the step (all workers must call it)."""
    for name, variable in self._position.items():
      variable.assign(state[name])
    sums = state["epoch_sums"]
    self._epoch_sums.assign(losses.TokenMetrics(sums["loss"], sums["tokens"], sums["correct"]),
                            sums["seconds"])
    for name, variable in self._budget.items():
      variable.assign(state["budget"][name])
    self._checkpoints.save()

  def restore(self) -> Optional[Dict]:
    if not self._checkpoints.restore():
      return None
    metrics, seconds = self._epoch_sums.read()
    return {**{name: int(variable.numpy()) for name, variable in self._position.items()},
            "epoch_sums": ({"loss": metrics.loss_sum, "tokens": metrics.tokens,
                            "correct": metrics.correct, "seconds": seconds}
                           if self._checkpoints.restored_added_state else None),
            "budget": {name: variable.numpy() for name, variable in self._budget.items()}}

  def latest_checkpoint(self) -> Optional[str]:
    return self._checkpoints.latest()

  def poll(self) -> None:
    """Nothing: TensorFlow checkpoints are written before :meth:`save` returns."""

  def finish(self) -> None:
    self._checkpoints.cleanup()


class TensorFlowTrainer(loop.Trainer):
  """:class:`transformer.training.loop.Trainer` over a :class:`TensorFlowEngine`;
  the arguments are the engine's, and the loop's ``log_every_steps`` and ``progress``."""

  def __init__(self, config, *, input_vocab_size: int, target_vocab_size: int,
               model_dir=None, log_every_steps: int = 100, progress: bool = True,
               **engine_options):
    engine = TensorFlowEngine(config, input_vocab_size=input_vocab_size,
                              target_vocab_size=target_vocab_size, model_dir=model_dir,
                              **engine_options)
    super().__init__(config, engine, model_dir=model_dir, is_chief=engine.is_chief,
                     log_every_steps=log_every_steps, progress=progress)
