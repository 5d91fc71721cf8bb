"""The TensorFlow engine (:class:`TensorFlowEngine`) and :class:`TensorFlowTrainer` (paper §5).

Where the tutorial calls ``transformer.fit(train_batches, epochs=20, ...)``, the loop
runs the epochs and this engine trains one global batch a chunk. Its checkpoints hold
dropout's random state too: a resumed run repeats the uninterrupted one bitwise."""

import itertools
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import keras
import tensorflow as tf

from transformer.model import losses
from transformer.model import optimization
from transformer.model import Transformer
from transformer.run.progress import plural
from transformer.training import budget
from transformer.training import loop
from transformer.training import tf_checkpointing
from transformer.training import tf_distribute
from transformer.training import tf_step


# The time budget's state (budget.STATE) by its names in checkpoints, in that order.
_BUDGET_NAMES = ("budget_used_seconds", "budget_planned_epochs", "budget_cooldown_steps",
                 "budget_cooldown_end_step")


class AllReplicaLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
  """``keras.optimizers.LossScaleOptimizer`` that skips on the all-reduced gradients:
  under ``tf.distribute`` Keras 3 keeps the first replica's check of its OWN gradients
  (``LossScaleOptimizer._tf_apply``), so another replica's overflow reached every
  replica's weights (tests/distributed/test_mixed_precision.py)."""

  def check_finite(self, grads):
    finite = super().check_finite(grads)
    context = tf.distribute.get_replica_context()
    if context is None:  # cross-replica context: nothing to agree on
      return finite
    overflowed = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                    tf.cast(tf.logical_not(finite), tf.float32))
    return tf.equal(overflowed, 0.0)


def dropout_random_state(model) -> tf.Module:
  """A trackable of the state of ``model``'s ``keras.random.SeedGenerator`` s
  (dropout's masks): ``model.variables`` less ``model.weights``."""
  weights = {id(weight) for weight in model.weights}
  state = tf.Module()
  state.seed_states = [v for v in model.variables if id(v) not in weights]
  return state


class _Batches:
  """An epoch's distributed batches, one a chunk
  (:class:`transformer.training.engine.EpochBatches`)."""

  def __init__(self, dist, length: int, skip: int):
    self._dist, self.length, self._skip = dist, length, skip

  def chunks(self, last: int):
    return ((1, batch) for _, batch in zip(range(self._skip, last), self._dist))


class TensorFlowEngine:
  """Builds the model and optimizer under ``strategy`` (default: the default one)
  and trains them (:class:`transformer.training.engine.Engine`); ``model_dir`` None
  keeps no checkpoints (tests); ``mixed_precision``: Keras' dtype policy."""

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
    keras.mixed_precision.set_global_policy(
        "float32" if mixed_precision == "none" else mixed_precision)
    keras.utils.set_random_seed(int(config.training.seed))
    variable = lambda name, dtype, value=0: tf.Variable(value, dtype=dtype, trainable=False,
                                                        name=name)
    with self.strategy.scope():
      self.model = Transformer.from_model_config(config.model, input_vocab_size,
                                                 target_vocab_size)
      self.model.build(((None, None), (None, None)))
      # The schedule's cooldown: variables a time budget sets without a new trace.
      self._cooldown = (variable("budget_cooldown_steps", tf.int64,
                                 int(config.training.cooldown_steps)),
                        variable("budget_cooldown_end_step", tf.int64,
                                 int(config.training.cooldown_end_step)))
      self.optimizer = optimization.make_optimizer(config, self._cooldown)
      if mixed_precision == "mixed_float16":
        self.optimizer = AllReplicaLossScaleOptimizer(self.optimizer)
      # Slots made now: a checkpoint restores into them, and a mismatch shows at restore.
      self.optimizer.build(self.model.trainable_variables)
    self._steps = tf_step.DistributedSteps(
        self.model, self.optimizer, self.strategy,
        label_smoothing=float(config.training.label_smoothing), length_groups=length_groups,
        jit_compile=jit_compile)
    # The loop's state as checkpoints hold it, by the names they have always had.
    self._position = {name: variable(name, tf.int64)
                      for name in ("epoch", "step_in_epoch", "steps_per_epoch")}
    # The epoch's sums and seconds so far: an epoch resumed mid-way records all its batches.
    self._epoch_sums = {name: variable(name, tf.float64)
                        for name in ("loss", "tokens", "correct", "seconds")}
    epoch_sums = tf.Module(name="epoch_sums")
    for name, sum_variable in self._epoch_sums.items():
      setattr(epoch_sums, name, sum_variable)
    self._budget = {}  # by budget.STATE's names
    if config.training.time_budget_minutes:
      self._budget = dict(zip(budget.STATE, (variable(_BUDGET_NAMES[0], tf.float64),
                                             variable(_BUDGET_NAMES[1], tf.int64),
                                             *self._cooldown)))
    self._checkpoints = tf_checkpointing.Checkpoints(
        None if model_dir is None else Path(model_dir), self.strategy,
        keep=int(config.training.keep_checkpoints),
        model=self.model, optimizer=self.optimizer, **self._position,
        added_state={"dropout_rng": dropout_random_state(self.model),
                     "epoch_sums": epoch_sums},
        **dict(zip(_BUDGET_NAMES, self._budget.values())))

  @property
  def step(self) -> int:
    """Optimizer steps taken (a skipped float16 overflow step is not one)."""
    return int(self.optimizer.iterations.numpy())

  def learning_rate(self, step: int) -> float:
    del step  # the optimizer's own counter, which a skipped step does not move
    return float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

  def describe(self) -> str:
    return plural(self.strategy.num_replicas_in_sync, "replica")

  def epoch_batches(self, train_data: Callable[[int], tf.data.Dataset], epoch: int, skip: int,
                    length: int) -> _Batches:
    # A shuffle reshuffles on each pass over one dataset: the count passes over
    # one of its own, so that training takes the epoch's first pass, resumed or not.
    remaining = lambda: train_data(epoch).skip(skip)
    length = length or skip + int(remaining().reduce(tf.constant(0, tf.int64),
                                                     lambda count, _: count + 1))
    dist = tf_distribute.distribute_dataset(self.strategy, remaining())
    self._train_fn = self._steps.step("train", dist.element_spec)
    return _Batches(dist, length, skip)

  def train(self, chunk):
    return self._train_fn(chunk)

  def read(self, trained: List) -> List[Tuple[float, float, float]]:
    return [tuple(float(value) for value in sums) for sums in trained]

  def non_finite(self, trained) -> Tuple[int, float]:
    return 0, losses.TokenMetrics().add(*trained).loss

  def train_on_batches(self, dataset, max_steps: Optional[int] = None) -> List[Dict]:
    """One optimizer step per global batch of ``dataset`` and nothing else (no
    checkpoints, signals or summaries: the lab's benchmarks); one
    ``{"loss", "tokens", "correct"}`` record a step."""
    dist = tf_distribute.distribute_dataset(self.strategy, dataset)
    train = self._steps.step("train", dist.element_spec)
    records = []
    for batch in itertools.islice(dist, max_steps):
      metrics = losses.TokenMetrics().add(*train(batch))
      records.append({"loss": metrics.loss, "tokens": metrics.tokens,
                      "correct": metrics.correct})
    return records

  def evaluate(self, validation: tf.data.Dataset) -> losses.TokenMetrics:
    return self._steps.evaluate(validation)

  def set_cooldown(self, steps: int, end_step: int) -> None:
    self._cooldown[0].assign(steps)
    self._cooldown[1].assign(end_step)

  def agree(self, seconds: float) -> float:
    # Each worker timed itself; all must plan alike.
    return tf_distribute.mean_over_replicas(self.strategy, seconds)

  def save(self, state: Dict) -> None:
    """Writes a checkpoint numbered by the step (all workers must call it)."""
    for name, variable in self._position.items():
      variable.assign(state[name])
    for name, value in state["epoch_sums"].items():
      self._epoch_sums[name].assign(value)
    for name, variable in self._budget.items():
      variable.assign(state["budget"][name])
    self._checkpoints.save()

  def restore(self) -> Optional[Dict]:
    if not self._checkpoints.restore():
      return None
    return {**{name: int(variable.numpy()) for name, variable in self._position.items()},
            "epoch_sums": ({name: float(variable.numpy())
                            for name, variable in self._epoch_sums.items()}
                           if self._checkpoints.restored_added_state else None),
            "budget": {name: variable.numpy() for name, variable in self._budget.items()}}

  def latest_checkpoint(self) -> Optional[str]:
    return self._checkpoints.latest()

  def poll(self) -> None:
    """Nothing: TensorFlow checkpoints are written before :meth:`save` returns."""

  def finish(self) -> None:
    self._checkpoints.cleanup()


class TensorFlowTrainer(loop.Trainer):
  """:class:`transformer.training.loop.Trainer` over a :class:`TensorFlowEngine`."""

  def __init__(self, config, *, input_vocab_size: int, target_vocab_size: int,
               model_dir=None, log_every_steps: int = 100, progress: bool = True,
               **engine_options):
    engine = TensorFlowEngine(config, input_vocab_size=input_vocab_size,
                              target_vocab_size=target_vocab_size, model_dir=model_dir,
                              **engine_options)
    super().__init__(config, engine, model_dir=model_dir, is_chief=engine.is_chief,
                     log_every_steps=log_every_steps, progress=progress)
