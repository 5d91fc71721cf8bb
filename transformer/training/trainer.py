"""The training loop, :class:`Trainer` (tutorial: "Train the model"; paper §5).

:class:`Trainer` builds the model and optimizer under a ``tf.distribute``
strategy and trains them. The tutorial calls ``transformer.fit(train_batches,
epochs=20, ...)``; here the loop is written out, in the style of the TF Model
Garden's Orbit, and each other concern is a collaborator in this package (see
:mod:`transformer.training`).

The loop:

* runs under any ``tf.distribute`` strategy with the loss normalized by the
  number of real target tokens of the GLOBAL batch: each replica computes
  ``(loss_sum, token_count)`` (:func:`transformer.losses.masked_cross_entropy_sum`),
  the token count is all-reduced across replicas, and each replica divides its
  loss sum by the global count before taking gradients. The optimizer sums the
  replicas' gradients, so the update is the gradient of the global mean token
  loss: one device and N replicas over the same global batch give the same
  loss and the same gradients, even when the replicas' shares of the batch
  hold different numbers of real tokens (per-replica averaging would not);
* checkpoints at the end of each epoch and ``config.training.checkpoint_every_steps``
  steps after the last checkpoint, and resumes an epoch after the batches
  already trained on; the checkpoint also holds dropout's random state
  (:func:`dropout_random_state`), so that a resumed run repeats the
  uninterrupted one bitwise, and the epoch's running sums (:class:`EpochSums`),
  so that a resumed epoch's record covers all of its batches;
* stops cleanly on SIGTERM/SIGINT: checkpoint, then return with
  ``TrainResult.interrupted_by`` set;
* stops on a NaN/Inf loss with :class:`NonFiniteLossError` without saving: the
  last checkpoint on disk is the last good state.

Mixed precision: ``"mixed_float16"`` wraps the optimizer in
``keras.optimizers.LossScaleOptimizer`` (dynamic loss scaling);
``"mixed_bfloat16"`` needs no loss scaling. The logits and the loss are float32
either way. A step whose float16 gradients overflow on ANY replica is skipped on
every replica and the loss scale halved, as on one device (see
:class:`AllReplicaLossScaleOptimizer`).

``jit_compile=True`` compiles each replica's forward and backward pass with XLA.
XLA compiles once per input shape, so it needs batches of few shapes:
``pipeline.batch_tokenized(static_shapes=True)``, which ``train.py`` uses with
``--jit_compile`` (batches padded to their length bucket's longest sentence),
and not ``config.training.length_groups`` (see :mod:`transformer.training.step`), whose
sub-batch lengths vary.

Outputs under ``model_dir`` (written by the chief only under multi-worker):
``checkpoints/`` (:mod:`transformer.training.checkpointing`), TensorBoard scalars in
``logs/train`` (every ``log_every_steps``) and ``logs/validation`` (every
epoch), and one JSON line per epoch in ``metrics.jsonl``
(:mod:`transformer.training.summaries`).
"""

import json
import math
from pathlib import Path
import signal
import time
from typing import Callable, Dict, List, Optional, Tuple

from absl import logging
import keras
import tensorflow as tf

from transformer import losses
from transformer import optimization
from transformer.model import Transformer
from transformer.training import budget as budget_lib
from transformer.training import checkpointing
from transformer.training import distribute
from transformer import progress as progress_lib
from transformer.training import step as step_lib
from transformer import stop_signals
from transformer.training import summaries
from transformer.errors import NonFiniteLossError, TrainingError
from transformer.training.result import TrainResult


class AllReplicaLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
  """``keras.optimizers.LossScaleOptimizer`` that skips on the all-reduced gradients.

  The loss-scale optimizer skips a step and halves the loss scale when the
  gradients are not finite. Under a ``tf.distribute`` strategy, Keras 3
  (``LossScaleOptimizer._tf_apply``, added by keras-team/keras#18691, unchanged
  up to Keras 3.15; no upstream issue filed yet) calls :meth:`check_finite` on
  every replica's OWN gradients and keeps the first replica's answer, assuming
  the gradients were all-reduced already; the wrapped optimizer sums them only
  later. So when only another replica overflowed, the step was applied and
  the summed inf reached the weights of every replica (issue #14). This
  upstream-bug workaround all-reduces the finiteness instead: one non-finite
  gradient on any replica makes the sum non-finite, so every replica (and
  worker) now skips exactly when the summed gradients are not finite. It
  costs one scalar all-reduce per step and keeps the checkpointed variables
  of the class it extends.
  """

  def check_finite(self, grads):
    finite = super().check_finite(grads)
    context = tf.distribute.get_replica_context()
    if context is None:  # cross-replica context: nothing to agree on
      return finite
    overflowed = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                    tf.cast(tf.logical_not(finite), tf.float32))
    return tf.equal(overflowed, 0.0)


def dropout_random_state(model) -> tf.Module:
  """A trackable holding the state of every ``keras.random.SeedGenerator`` of
  ``model``: each dropout layer draws its masks from one, advancing its
  ``(2,)`` int64 state per call, so a resume restores them to repeat the
  uninterrupted run's masks. ``model.variables`` is ``model.weights`` plus them."""
  weights = {id(weight) for weight in model.weights}
  state = tf.Module()
  state.seed_states = [v for v in model.variables if id(v) not in weights]
  return state


class EpochSums(tf.Module):
  """The current epoch's :class:`transformer.losses.TokenMetrics` and the
  ``seconds`` spent on its steps, as float64 scalars, checkpointed so that the
  record of an epoch interrupted and resumed covers all of its batches. The
  variables keep the names ``loss``, ``tokens``, ``correct`` and ``seconds``
  that checkpoints hold."""

  def __init__(self):
    super().__init__(name="epoch_sums")
    for name in ("loss", "tokens", "correct", "seconds"):
      setattr(self, name, tf.Variable(0.0, dtype=tf.float64, trainable=False, name=name))

  def read(self) -> Tuple[losses.TokenMetrics, float]:
    """``(metrics, seconds)`` as checkpointed."""
    metrics = losses.TokenMetrics(float(self.loss.numpy()), float(self.tokens.numpy()),
                                  float(self.correct.numpy()))
    return metrics, float(self.seconds.numpy())

  def assign(self, metrics: losses.TokenMetrics, seconds: float) -> None:
    self.loss.assign(metrics.loss_sum)
    self.tokens.assign(metrics.tokens)
    self.correct.assign(metrics.correct)
    self.seconds.assign(seconds)


class Trainer:
  """Builds the model and optimizer under a strategy and trains them.

  Args:
    config: the full configuration (see :mod:`transformer.config`).
    input_vocab_size, target_vocab_size: the tokenizers' vocabulary sizes.
    model_dir: where checkpoints, logs and metrics go; None keeps nothing
      (tests).
    strategy: a ``tf.distribute.Strategy`` (default: the default strategy).
    mixed_precision: ``"none"``, ``"mixed_float16"`` or ``"mixed_bfloat16"``;
      sets Keras' global dtype policy (float32 for "none") before building.
    jit_compile: XLA-compile each replica's forward/backward pass (see the
      module docstring).
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
    self.jit_compile = jit_compile
    self.log_every_steps = max(1, int(log_every_steps))
    self.label_smoothing = float(config.training.label_smoothing)
    self.length_groups = int(config.training.length_groups)
    if jit_compile and self.length_groups > 1:
      raise ValueError("jit_compile needs static shapes, and training.length_groups > 1 cuts "
                       "each sub-batch to a length known only at run time; use one or the other")
    self.model_dir = Path(model_dir) if model_dir is not None else None
    is_chief = distribute.is_chief(self.strategy)

    keras.mixed_precision.set_global_policy(
        "float32" if mixed_precision == "none" else mixed_precision)
    keras.utils.set_random_seed(int(config.training.seed))
    with self.strategy.scope():
      self.model = Transformer.from_model_config(config.model, input_vocab_size,
                                                 target_vocab_size)
      self.model.build(((None, None), (None, None)))
      self._budget = None
      cooldown = None  # the config's
      if config.training.time_budget_minutes:
        self._budget = budget_lib.TimeBudget(
            config.training.time_budget_minutes, config.training.cooldown_fraction,
            int(config.training.epochs))
        cooldown = (self._budget.cooldown_steps, self._budget.cooldown_end_step)
      optimizer = optimization.make_optimizer(config, cooldown)
      if mixed_precision == "mixed_float16":
        optimizer = AllReplicaLossScaleOptimizer(optimizer)
      self.optimizer = optimizer
      # Create the slots now so that a checkpoint restores into them at once
      # (and a mismatch is detected at restore time).
      self.optimizer.build(self.model.trainable_variables)
    # Position in the data: completed epochs, batches done in the current
    # epoch, and batches per epoch (0 until one epoch has been seen).
    self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
    self.step_in_epoch = tf.Variable(0, dtype=tf.int64, trainable=False,
                                     name="step_in_epoch")
    self.steps_per_epoch = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name="steps_per_epoch")
    self._epoch_sums = EpochSums()
    self._checkpoints = checkpointing.Checkpoints(
        self.model_dir, self.strategy, keep=int(config.training.keep_checkpoints),
        model=self.model, optimizer=self.optimizer, epoch=self.epoch,
        step_in_epoch=self.step_in_epoch, steps_per_epoch=self.steps_per_epoch,
        added_state={"dropout_rng": dropout_random_state(self.model),
                     "epoch_sums": self._epoch_sums},
        **(self._budget.checkpointed() if self._budget else {}))
    self._summaries = summaries.Summaries(self.model_dir, is_chief=is_chief)
    self._progress = progress_lib.EpochProgress(enabled=progress and is_chief)
    # The run's length in epochs for "Epoch 3/20" (None: not known yet), and
    # whether it is a time budget's estimate ("Epoch 3/~20"): shown and
    # updated by the loop.
    self._planned = None
    self._planned_estimated = False
    self._budget_estimate = None  # the time budget's latest, until its plan is fixed
    self._grad_fn = None  # the step's gradients, XLA-compiled under jit_compile
    self._train_fn = None
    self._train_spec = None
    self._eval_fn = None
    self._eval_spec = None

  # --------------------------------------------------------------- properties

  @property
  def step(self) -> int:
    """Optimizer steps taken (restored from a checkpoint on resume)."""
    return int(self.optimizer.iterations.numpy())

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
    self._summaries.keep_records_up_to(step, int(self.epoch.numpy()))
    return step

  def save_checkpoint(self) -> Optional[str]:
    """Writes a checkpoint numbered by the step (all workers must call it)."""
    return self._checkpoints.save()

  # --------------------------------------------------------------- steps

  def _compute_gradients(self, inputs, labels, global_count):
    scale_loss = (self.optimizer.scale_loss
                  if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer) else None)
    return step_lib.gradients(self.model, inputs, labels, global_count,
                           label_smoothing=self.label_smoothing, scale_loss=scale_loss,
                           groups=self.length_groups)

  def _replica_train_step(self, inputs, labels):
    count = tf.reduce_sum(tf.cast(tf.not_equal(labels, 0), tf.float32))
    global_count = tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, count)
    grads, loss_sum, correct = self._grad_fn(inputs, labels, global_count)
    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    return loss_sum, count, correct

  def _replica_eval_step(self, inputs, labels):
    logits = self.model(inputs, training=False)
    loss_sum, count = losses.masked_cross_entropy_sum(labels, logits, self.label_smoothing)
    correct, _ = losses.masked_correct_sum(labels, logits)
    return loss_sum, count, correct

  def _reduce(self, per_replica):
    return tuple(self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                 for v in per_replica)

  def _distributed_step(self, replica_step, element_spec):
    """A ``tf.function`` running ``replica_step(inputs, labels)`` on every
    replica and summing its outputs over them."""
    def step(batch):
      inputs, labels = batch
      return self._reduce(self.strategy.run(replica_step, args=(inputs, labels)))
    # The signature has the dataset's unknown (None) batch and length
    # dimensions, so varying batch shapes do not retrace the step.
    return tf.function(step, input_signature=[element_spec])

  def _get_train_fn(self, element_spec):
    if self._train_fn is None or self._train_spec != element_spec:
      self._grad_fn = (tf.function(self._compute_gradients, jit_compile=True)
                       if self.jit_compile else self._compute_gradients)
      self._train_fn = self._distributed_step(self._replica_train_step, element_spec)
      self._train_spec = element_spec
    return self._train_fn

  def _get_eval_fn(self, element_spec):
    if self._eval_fn is None or self._eval_spec != element_spec:
      self._eval_fn = self._distributed_step(self._replica_eval_step, element_spec)
      self._eval_spec = element_spec
    return self._eval_fn

  def train_on_batches(self, dataset, max_steps: Optional[int] = None) -> List[Dict]:
    """Runs one optimizer step per batch of ``dataset`` (global batches).

    A low-level entry point (no checkpoints, signals or summaries); returns one
    ``{"loss", "tokens", "correct"}`` record per step, the loss being the mean
    over the global batch's real tokens.
    """
    dist = distribute.distribute_dataset(self.strategy, dataset)
    fn = self._get_train_fn(dist.element_spec)
    records = []
    for batch in dist:
      if max_steps is not None and len(records) >= max_steps:
        break
      batch_metrics = losses.TokenMetrics().add(*fn(batch))
      records.append({"loss": batch_metrics.loss, "tokens": batch_metrics.tokens,
                      "correct": batch_metrics.correct})
    return records

  def evaluate(self, dataset) -> Dict[str, float]:
    """Mean token loss and accuracy over ``dataset`` (no dropout)."""
    dist = distribute.distribute_dataset(self.strategy, dataset)
    fn = self._get_eval_fn(dist.element_spec)
    metrics = losses.TokenMetrics()
    for batch in dist:
      metrics.add(*fn(batch))
    if metrics.tokens == 0:
      raise TrainingError("the evaluation dataset is empty")
    return {"loss": metrics.loss, "accuracy": metrics.accuracy, "tokens": metrics.tokens}

  # --------------------------------------------------------------- the loop

  def fit(self, make_train_dataset: Callable[[int], tf.data.Dataset],
          validation_dataset: Optional[tf.data.Dataset] = None, *,
          epoch_end_callback: Optional[Callable[[int, Dict], Dict]] = None,
          step_callback: Optional[Callable[[int, float], None]] = None) -> TrainResult:
    """Trains until ``config.training.train_steps`` steps (if > 0) or
    ``config.training.epochs`` epochs, counting those already done, or with
    ``config.training.time_budget_minutes`` the epochs that fit in it
    (:mod:`transformer.training.budget`).

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
    training = self.config.training
    max_steps = int(training.train_steps) or None
    max_epochs = None if max_steps else int(training.epochs)
    interval = int(training.checkpoint_every_steps)
    history = []
    start_step = self.step
    if self._budget is not None:
      end = (f"the end of {training.time_budget_minutes:g} minutes of training "
             f"(at most epoch {max_epochs})")
    else:
      end = f"step {max_steps}" if max_steps else f"epoch {max_epochs}"
    logging.info("training from step %d to %s", start_step, end)
    try:
      with stop_signals.StopSignals() as stop:
        while True:
          epoch = int(self.epoch.numpy())
          if (max_steps is not None and self.step >= max_steps) or (
              max_epochs is not None and epoch >= max_epochs) or (
                  self._budget is not None and self._budget.finished(epoch)):
            break
          first_step = self.step
          record, run_seconds = self._run_epoch(epoch, make_train_dataset, max_steps,
                                                interval, step_callback, stop)
          if self._budget is not None:
            # Each worker timed itself; all must plan alike. An earlier run's
            # share of a resumed epoch was counted by that run.
            self._budget.add_seconds(
                distribute.mean_over_replicas(self.strategy, run_seconds))
          if stop.received is not None:
            self.save_checkpoint()
            logging.warning("stopped by %s at step %d; rerun the same command to resume",
                            signal.Signals(stop.received).name, self.step)
            break
          if record["complete"]:
            if not history:  # the first epoch counted in this run
              mismatch = optimization.cooldown_mismatch(training, record["steps_in_epoch"])
              if mismatch:
                logging.warning(mismatch)
            self.epoch.assign_add(1)
            self.steps_per_epoch.assign(record["steps_in_epoch"])
            self.step_in_epoch.assign(0)
            self._epoch_sums.assign(losses.TokenMetrics(), 0.0)
            if self._budget is not None:
              self._plan_budget(record, steps_run=self.step - first_step)
          # The record is appended before the checkpoint that closes the epoch:
          # a kill in between redoes the epoch's end from the checkpoint before
          # (restore drops the record), and none loses it.
          if validation_dataset is not None:
            val = self.evaluate(validation_dataset)
            record.update(val_loss=val["loss"], val_accuracy=val["accuracy"])
            self._summaries.write_scalars("validation", self.step,
                                          {"loss": val["loss"], "accuracy": val["accuracy"]})
          if epoch_end_callback is not None:
            record.update(epoch_end_callback(record["epoch"], dict(record)) or {})
          logging.info("epoch %d (step %d): %s", record["epoch"], record["step"],
                       json.dumps({k: v for k, v in record.items()
                                   if k not in ("epoch", "step")}, sort_keys=True))
          if "planned_epochs" in record:
            self._progress.summary(record, record["planned_epochs"],
                                   estimated=not int(self._budget.planned.numpy()))
          else:
            self._progress.summary(record, self._planned, self._planned_estimated)
          self._summaries.append_metrics(record)
          history.append(record)
          self.save_checkpoint()
    finally:
      self._summaries.flush()
      self._checkpoints.cleanup()
    logging.info("ran %d steps in this run (from step %d to step %d)",
                 self.step - start_step, start_step, self.step)
    return TrainResult(step=self.step, start_step=start_step, epoch=int(self.epoch.numpy()),
                       interrupted_by=stop.received, history=history)

  def _plan_budget(self, record, steps_run):
    # The record's seconds are the whole epoch's, across a resume; a resumed
    # epoch whose checkpoint predates the epoch's sums has only this run's
    # share of them: scaled up to all of its steps.
    epoch_seconds = distribute.mean_over_replicas(self.strategy, record["seconds"])
    if record.get("partial"):
      epoch_seconds *= record["steps_in_epoch"] / max(steps_run, 1)
    record["planned_epochs"] = self._budget.epoch_end(
        epochs_done=int(self.epoch.numpy()), epoch_seconds=epoch_seconds,
        steps_per_epoch=record["steps_in_epoch"], step=self.step)
    self._budget_estimate = record["planned_epochs"]

  def _epoch_count(self) -> Tuple[Optional[int], bool]:
    """``(epochs, estimated)``: the run's length in epochs as known now (None
    before a time budget has an estimate), and whether it is an estimate.

    A time budget's plan, once fixed, else its latest estimate: that of the
    last epoch ended in this run, or, right after a resume, the whole epochs'
    mean seconds so far. Else the configured count."""
    if self._budget is None:
      return int(self.config.training.epochs), False
    fixed = int(self._budget.planned.numpy())
    if fixed:
      return fixed, False
    done = int(self.epoch.numpy())
    if self._budget_estimate is None and done:
      # used_seconds also holds the part of the current epoch already trained.
      current = self._epoch_sums.read()[1] if int(self.step_in_epoch.numpy()) else 0.0
      whole_seconds = float(self._budget.used_seconds.numpy()) - current
      self._budget_estimate = budget_lib.planned_epochs(
          self._budget.budget_seconds, float(self._budget.used_seconds.numpy()), done,
          whole_seconds / done, self._budget.max_epochs)
    return self._budget_estimate, self._budget_estimate is not None

  def _open_progress(self, epoch, skip, target, dataset, max_steps):
    # Until an epoch has ended its length is unknown: one pass over this
    # epoch's batches (the same on every pass) counts them.
    epoch_steps = target or skip + int(dataset.reduce(
        tf.constant(0, tf.int64), lambda count, _: count + 1))
    steps_left = max_steps - self.step if max_steps else None
    epochs, self._planned_estimated = self._epoch_count()
    self._planned = progress_lib.planned_epochs(epoch, epoch_steps, skip, steps_left, epochs)
    total = epoch_steps if steps_left is None else min(epoch_steps, skip + steps_left)
    self._progress.start(progress_lib.epoch_label(epoch + 1, self._planned,
                                                  self._planned_estimated), skip, total)

  def _run_epoch(self, epoch, make_train_dataset, max_steps, interval, step_callback,
                 stop: stop_signals.StopSignals) -> Tuple[Dict, float]:
    """Trains on one epoch's batches, or what is left of them; returns its
    metrics record and the seconds this run spent on it."""
    skip = int(self.step_in_epoch.numpy())
    dataset = make_train_dataset(epoch)
    if skip:
      logging.info("resuming epoch %d after its first %d batches", epoch + 1, skip)
      dataset = dataset.skip(skip)
    dist = distribute.distribute_dataset(self.strategy, dataset)
    train_fn = self._get_train_fn(dist.element_spec)
    target = int(self.steps_per_epoch.numpy()) or None
    if self._progress.enabled:
      self._open_progress(epoch, skip, target, dataset, max_steps)
    # A resumed epoch goes on from its checkpointed sums; a checkpoint from
    # before them leaves the record covering only this run's batches: partial.
    epoch_metrics, seconds_before = (self._epoch_sums.read() if skip
                                     else (losses.TokenMetrics(), 0.0))
    partial = bool(skip) and not self._checkpoints.restored_added_state
    interval_metrics = losses.TokenMetrics()  # since the last TensorBoard scalars
    log_start = epoch_start = time.time()
    done = skip
    complete = True
    for batch in dist:
      batch_metrics = losses.TokenMetrics().add(*train_fn(batch))
      step = self.step
      if not math.isfinite(batch_metrics.loss_sum):
        raise NonFiniteLossError(
            f"the training loss is {batch_metrics.loss} at step {step} "
            f"(epoch {epoch + 1}); stopping without saving. The last good checkpoint "
            f"is kept: {self.latest_checkpoint() or 'none was written yet'}. Lower the "
            "learning rate (config.training.warmup_steps), check the data, or try "
            "without mixed precision")
      done += 1
      self.step_in_epoch.assign(done)
      epoch_metrics += batch_metrics
      interval_metrics += batch_metrics
      elapsed = max(time.time() - epoch_start, 1e-9)
      self._epoch_sums.assign(epoch_metrics, seconds_before + elapsed)
      tokens_per_second = epoch_metrics.tokens / (seconds_before + elapsed)
      lr = self.learning_rate
      self._progress.update(done, **{"loss": epoch_metrics.loss,
                                     "acc": epoch_metrics.accuracy,
                                     "lr": lr, "tok/s": tokens_per_second})
      if step % self.log_every_steps == 0:
        now = time.time()
        self._summaries.write_scalars("train", step, {
            "loss": interval_metrics.loss,
            "accuracy": interval_metrics.accuracy,
            "learning_rate": lr,
            "tokens_per_second": interval_metrics.tokens / max(now - log_start, 1e-9)})
        interval_metrics = losses.TokenMetrics()
        log_start = now
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
    self._progress.end()
    elapsed = max(time.time() - epoch_start, 1e-9)
    record = {
        "epoch": epoch + 1, "step": self.step, "complete": complete,
        "steps_in_epoch": done,
        "train_loss": epoch_metrics.loss,
        "train_accuracy": epoch_metrics.accuracy,
        "learning_rate": self.learning_rate,
        "tokens_per_second": epoch_metrics.tokens / (seconds_before + elapsed),
        # The epoch's training time, across a resume (returned apart: this run's share).
        "seconds": seconds_before + elapsed,
    }
    if partial:
      # train_*, tokens_per_second and seconds cover this run's batches only.
      record["partial"] = True
    return record, elapsed
