"""The TensorFlow trainer, :class:`TensorFlowTrainer` (tutorial: "Train the model"; paper §5).

The tutorial calls ``transformer.fit(train_batches, epochs=20, ...)``; here the
loop is written out in the style of the TF Model Garden's Orbit: the model and
optimizer come from :mod:`transformer.training.tf_build`, the steps under a
``tf.distribute`` strategy from :mod:`transformer.training.tf_steps`, the
epochs and what ends them from :func:`transformer.training.loop.run_epochs`;
:meth:`TensorFlowTrainer.run_epoch` trains one epoch between them. It checkpoints
``config.training.checkpoint_every_steps`` steps after the last checkpoint
and resumes an epoch after the batches already trained on; the checkpoint
also holds dropout's random state, so that a resumed run repeats the
uninterrupted one bitwise, and the epoch's running sums, so that a resumed
epoch's record covers all of its batches.

Outputs under ``model_dir`` (the chief's only, under multi-worker):
``checkpoints/`` (:mod:`transformer.training.checkpointing`), TensorBoard
scalars in ``logs/train`` and ``logs/validation``, and one JSON line per epoch
in ``metrics.jsonl`` (:mod:`transformer.training.summaries`).
"""

import math
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from absl import logging
import keras
import tensorflow as tf

from transformer.model import losses
from transformer.run import progress as progress_lib
from transformer.run import stop_signals
from transformer.run.errors import TrainingError
from transformer.training import checkpointing
from transformer.training import distribute
from transformer.training import loop
from transformer.training import summaries
from transformer.training import tf_build
from transformer.training import tf_steps
from transformer.training.result import TrainResult


class TensorFlowTrainer(loop.Trainer):
  """Builds the model and optimizer under a strategy and trains them
  (:class:`transformer.training.loop.Trainer`).

  Args:
    config: the full configuration (see :mod:`transformer.config`).
    input_vocab_size, target_vocab_size: the tokenizers' vocabulary sizes.
    model_dir: where checkpoints, logs and metrics go; None keeps nothing
      (tests).
    strategy: a ``tf.distribute.Strategy`` (default: the default strategy).
    mixed_precision: ``"none"``, ``"mixed_float16"`` or ``"mixed_bfloat16"``;
      sets Keras' global dtype policy (float32 for "none") before building.
    jit_compile: XLA-compile each replica's forward/backward pass
      (:mod:`transformer.training.tf_steps`).
    log_every_steps: TensorBoard training scalars every this many steps.
    progress: show a progress bar per epoch.
  """

  def __init__(self, config, *, input_vocab_size: int, target_vocab_size: int,
               model_dir=None, strategy=None, mixed_precision: str = "none",
               jit_compile: bool = False, log_every_steps: int = 100,
               progress: bool = True):
    if mixed_precision not in distribute.MIXED_PRECISION:
      raise ValueError(f"unknown mixed precision policy {mixed_precision!r}; "
                       f"choose one of {', '.join(distribute.MIXED_PRECISION)}")
    self.config = config
    self.strategy = strategy or tf.distribute.get_strategy()
    self.mixed_precision = mixed_precision
    self.log_every_steps = max(1, int(log_every_steps))
    length_groups = int(config.training.length_groups)
    if jit_compile and length_groups > 1:
      raise ValueError("jit_compile needs static shapes, and training.length_groups > 1 cuts "
                       "each sub-batch to a length known only at run time; use one or the other")
    self.model_dir = Path(model_dir) if model_dir is not None else None
    is_chief = distribute.is_chief(self.strategy)
    self.model, self.optimizer, self.budget = tf_build.build(
        config, self.strategy, mixed_precision, input_vocab_size, target_vocab_size)
    self._steps = tf_steps.DistributedSteps(
        self.model, self.optimizer, self.strategy,
        label_smoothing=float(config.training.label_smoothing), length_groups=length_groups,
        jit_compile=jit_compile)
    # Position in the data: completed epochs, batches done in the current
    # epoch, and batches per epoch (0 until one epoch has been seen).
    self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
    self.step_in_epoch = tf.Variable(0, dtype=tf.int64, trainable=False,
                                     name="step_in_epoch")
    self.steps_per_epoch = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name="steps_per_epoch")
    self._epoch_sums = tf_build.EpochSums()
    self._checkpoints = checkpointing.Checkpoints(
        self.model_dir, self.strategy, keep=int(config.training.keep_checkpoints),
        model=self.model, optimizer=self.optimizer, epoch=self.epoch,
        step_in_epoch=self.step_in_epoch, steps_per_epoch=self.steps_per_epoch,
        added_state={"dropout_rng": tf_build.dropout_random_state(self.model),
                     "epoch_sums": self._epoch_sums},
        **(self.budget.checkpointed() if self.budget else {}))
    self.summaries = summaries.Summaries(self.model_dir, is_chief=is_chief)
    self.progress = progress_lib.EpochProgress(enabled=progress and is_chief)
    self.planned = (None, False)
    # What fit gives run_epoch: (make_train_dataset, step_callback).
    self._epoch_data = None

  # --------------------------------------------------------------- properties

  @property
  def step(self) -> int:
    """Optimizer steps taken (restored from a checkpoint on resume)."""
    return int(self.optimizer.iterations.numpy())

  @property
  def epochs_done(self) -> int:
    return int(self.epoch.numpy())

  @property
  def learning_rate(self) -> float:
    return float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))

  # --------------------------------------------------------------- checkpoints

  def latest_checkpoint(self) -> Optional[str]:
    """The latest checkpoint's path under ``model_dir``, or None."""
    return self._checkpoints.latest()

  def restore(self) -> int:
    """Restores the latest checkpoint (see
    :meth:`transformer.training.checkpointing.Checkpoints.restore`) and drops
    the ``metrics.jsonl`` records of training after it, which the run redoes."""
    step = self._checkpoints.restore()
    self.summaries.keep_records_up_to(step, int(self.epoch.numpy()))
    return step

  def save_checkpoint(self) -> Optional[str]:
    """Writes a checkpoint numbered by the step (all workers must call it)."""
    return self._checkpoints.save()

  # --------------------------------------------------------------- steps

  def train_on_batches(self, dataset, max_steps: Optional[int] = None) -> List[Dict]:
    """One optimizer step per batch of ``dataset``, and nothing else
    (:meth:`transformer.training.tf_steps.DistributedSteps.train_on_batches`)."""
    return self._steps.train_on_batches(dataset, max_steps)

  def evaluate(self, validation: tf.data.Dataset) -> Dict[str, float]:
    """Mean token loss and accuracy over the batches ``validation`` (no dropout)."""
    return self._steps.evaluate(validation)

  # --------------------------------------------------------------- the loop

  def fit(self, make_train_dataset: Callable[[int], tf.data.Dataset],
          validation_dataset: Optional[tf.data.Dataset] = None, *,
          epoch_end_callback: Optional[Callable[[int, Dict], Dict]] = None,
          step_callback: Optional[Callable[[int, float], None]] = None) -> TrainResult:
    """Trains until ``config.training.train_steps`` steps (if > 0) or
    ``config.training.epochs`` epochs, counting those already done, or with
    ``config.training.time_budget_minutes`` the epochs that fit in it
    (:func:`transformer.training.loop.run_epochs`).

    Call :meth:`restore` first to resume.

    Args:
      make_train_dataset: ``epoch -> dataset`` of global batches
        ``((source, target_input), labels)``. It must give the same batches in
        the same order for the same epoch (seed the shuffle with the epoch), so
        that a resumed epoch skips exactly the batches already trained on.
      validation_dataset: batches for the per-epoch validation loss/accuracy.
      epoch_end_callback: ``(epoch, record) -> extra fields`` merged into the
        epoch's metrics record (e.g. BLEU); ``epoch`` counts from 1 and
        ``record["complete"]`` is False for a last epoch cut short by
        ``train_steps``.
      step_callback: ``(step, loss)`` after every step (tests).
    """
    if loop.has_steps_left(self):  # else train.py's last line says the run had ended
      logging.info("training from step %d to %s", self.step, loop.end_text(self.config.training))
    self._epoch_data = (make_train_dataset, step_callback)
    try:
      return loop.run_epochs(self, validation_dataset, epoch_end_callback)
    finally:
      self._checkpoints.cleanup()

  # --------------------------------------------------------------- the loop's actions

  def budget_seconds(self, run_seconds: float) -> float:
    # Each worker timed itself; all must plan alike. An earlier run's share of
    # a resumed epoch was counted by that run.
    return distribute.mean_over_replicas(self.strategy, run_seconds)

  def end_epoch(self, record: Dict, steps_run: int) -> None:
    """Moves the position to the next epoch, and lets the time budget plan."""
    self.epoch.assign_add(1)
    self.steps_per_epoch.assign(record["steps_in_epoch"])
    self.step_in_epoch.assign(0)
    self._epoch_sums.assign(losses.TokenMetrics(), 0.0)
    if self.budget is not None:
      self._plan_budget(record, steps_run=steps_run)

  def close_epoch(self, record: Dict, report: Callable[[], None]) -> None:
    # The record is appended before the checkpoint that closes the epoch:
    # a kill in between redoes the epoch's end from the checkpoint before
    # (restore drops the record), and none loses it.
    report()
    self.save_checkpoint()

  def _plan_budget(self, record, steps_run):
    # The record's seconds are the whole epoch's, across a resume; a resumed
    # epoch whose checkpoint predates the epoch's sums has only this run's
    # share of them: scaled up to all of its steps.
    epoch_seconds = distribute.mean_over_replicas(self.strategy, record["seconds"])
    if record.get("partial"):
      epoch_seconds *= record["steps_in_epoch"] / max(steps_run, 1)
    record["planned_epochs"] = self.budget.epoch_end(
        epochs_done=int(self.epoch.numpy()), epoch_seconds=epoch_seconds,
        steps_per_epoch=record["steps_in_epoch"], step=self.step)

  def _open_progress(self, skip, target, dataset, max_steps, seconds_before):
    # Until an epoch has ended its length is unknown: one pass over this
    # epoch's batches (the same on every pass) counts them.
    epoch_steps = target or skip + int(dataset.reduce(
        tf.constant(0, tf.int64), lambda count, _: count + 1))
    self.planned, _ = loop.start_progress(self, epoch_steps=epoch_steps, skip=skip,
                                          max_steps=max_steps, seconds_before=seconds_before)

  def run_epoch(self, max_steps: Optional[int], interval: int,
                stop: stop_signals.StopSignals) -> Tuple[Dict, float]:
    """Trains on one epoch's batches, or what is left of them; returns its
    metrics record and the seconds this run spent on it."""
    make_train_dataset, step_callback = self._epoch_data
    epoch = self.epochs_done
    skip = int(self.step_in_epoch.numpy())
    dataset = make_train_dataset(epoch)
    if skip:  # the restore's line said where (checkpointing.py)
      dataset = dataset.skip(skip)
    dist = distribute.distribute_dataset(self.strategy, dataset)
    train_fn = self._steps.train_fn(dist.element_spec)
    target = int(self.steps_per_epoch.numpy()) or None
    # A resumed epoch goes on from its checkpointed sums; a checkpoint from
    # before them leaves the record covering only this run's batches: partial.
    epoch_metrics, seconds_before = (self._epoch_sums.read() if skip
                                     else (losses.TokenMetrics(), 0.0))
    partial = bool(skip) and not self._checkpoints.restored_added_state
    if self.progress.enabled:
      self._open_progress(skip, target, dataset, max_steps, seconds_before)
    clock = loop.EpochClock(seconds_before)
    scalars = loop.TrainScalars(self.summaries, self.log_every_steps, clock.start)
    done = skip
    complete = True
    for batch in dist:
      batch_metrics = losses.TokenMetrics().add(*train_fn(batch))
      step = self.step
      if not math.isfinite(batch_metrics.loss_sum):
        raise loop.non_finite_loss(batch_metrics.loss, step, epoch, self.latest_checkpoint())
      done += 1
      self.step_in_epoch.assign(done)
      epoch_metrics += batch_metrics
      scalars.metrics += batch_metrics
      now = clock.now()
      self._epoch_sums.assign(epoch_metrics, clock.epoch_seconds(now))
      tokens_per_second = epoch_metrics.tokens / clock.epoch_seconds(now)
      lr = self.learning_rate
      self.progress.update(done, **{"loss": epoch_metrics.loss,
                                     "acc": epoch_metrics.accuracy,
                                     "lr": lr, "tok/s": tokens_per_second})
      if scalars.due(step):
        scalars.write(step, lr, now)
      if step_callback is not None:
        step_callback(step, batch_metrics.loss)
      if stop.received is not None:
        complete = False
        break
      if max_steps is not None and step >= max_steps:
        complete = False
        break
      if self._checkpoints.due(step, interval):
        self.save_checkpoint()
    else:
      if done == 0:
        raise TrainingError(f"the training dataset of epoch {epoch + 1} is empty")
    if not complete and stop.received is None and target and done >= target:
      complete = True  # train_steps was reached on the epoch's last batch
    self.progress.end()
    now = clock.now()
    # The record's seconds are the epoch's across a resume; this run's share is returned apart.
    record = loop.epoch_record(
        epoch=epoch, step=self.step, complete=complete, steps_in_epoch=done,
        metrics=epoch_metrics, learning_rate=self.learning_rate, seconds=clock.epoch_seconds(now))
    if partial:
      # train_*, tokens_per_second and seconds cover this run's batches only.
      record["partial"] = True
    return record, clock.run_seconds(now)
