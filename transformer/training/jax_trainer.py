"""The JAX trainer, :class:`JaxTrainer`: Keras on JAX without TensorFlow, from prepared shards (paper §5).

``KERAS_BACKEND=jax python train.py --data=<prepared folder>`` trains here;
:class:`transformer.training.tf_trainer.TensorFlowTrainer` is the ``tf.distribute`` trainer
it mirrors, and both run their epochs in :func:`transformer.training.loop.run_epochs`.
The same configuration gives the same model, schedule (with the time budget's
cooldown), label smoothing, dropout and loss over the real target tokens of
the global batch; a run leaves the same ``metrics.jsonl`` records, TensorBoard
scalars and console lines, and checkpoints after every
``checkpoint_every_steps`` steps and at each epoch's end (written while training
goes on), from which the same command resumes
(:mod:`transformer.training.jax_checkpointing`: folders whose
``model.weights.h5`` the TensorFlow side loads, ``evaluate.py``).

The steps (:class:`transformer.training.jax_steps.DeviceSteps`) are functions
of the variables' values, which live on the devices between steps and go back
into the Keras variables only for a checkpoint; :func:`transformer.data.shards.epoch_batches`
pads batches to few shapes, and with more than one device
``keras.distribution.DataParallel`` splits them on their rows. Each dispatch
trains a stack of ``training.steps_per_dispatch`` batches of one shape
(:mod:`transformer.training.jax_stacks`), put on the devices while the one
before trains; the host reads a stack's sums after the next is dispatched,
and all of them before a checkpoint and at an epoch's end (a NaN/Inf loss
stops the run there, before anything is saved). Checkpoints, TensorBoard
scalars and the progress line come at stack boundaries.

Not here: ``training.length_groups`` (the TensorFlow step's sub-batches; the
padded shapes do its work) and ``mixed_float16`` (no loss scaling; use
``mixed_bfloat16``).
"""

from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from absl import logging
import jax
import keras

from transformer.model import losses
from transformer.model import optimization
from transformer.run import files
from transformer.run import progress as progress_lib
from transformer.data import shards
from transformer.run import stop_signals
from transformer.run.errors import TrainingError
from transformer.model import Transformer
from transformer.training import budget as budget_lib
from transformer.training import jax_checkpointing
from transformer.training import jax_stacks
from transformer.training import jax_steps
from transformer.training import loop
from transformer.training import summaries
from transformer.training.result import TrainResult


class JaxTrainer(loop.Trainer):
  """Builds the model and optimizer and trains them on NumPy batches under JAX
  (:class:`transformer.training.loop.Trainer`).

  Args:
    config: the full configuration (see :mod:`transformer.config`).
    input_vocab_size, target_vocab_size: the vocabularies' sizes.
    model_dir: where checkpoints, logs and metrics go (a ``Path``).
    devices: the JAX devices to train on; several: data parallel.
    mixed_precision: ``"none"`` or ``"mixed_bfloat16"``.
    log_every_steps: TensorBoard training scalars every this many steps.
    progress: show the progress line and epoch summaries.
  """

  def __init__(self, config, *, input_vocab_size: int, target_vocab_size: int,
               model_dir: Path, devices=None, mixed_precision: str = "none",
               log_every_steps: int = 100, progress: bool = True):
    if mixed_precision not in ("none", "mixed_bfloat16"):
      raise ValueError(f"mixed precision {mixed_precision!r} is not supported under JAX; "
                       "use none or mixed_bfloat16")
    self.config = config
    self.model_dir = Path(model_dir)
    self.devices = list(devices or jax.devices()[:1])
    self.log_every_steps = max(1, int(log_every_steps))
    self.distribution = None
    if len(self.devices) > 1:
      self.distribution = keras.distribution.DataParallel(devices=self.devices)
    keras.distribution.set_distribution(self.distribution)
    keras.mixed_precision.set_global_policy(
        "float32" if mixed_precision == "none" else mixed_precision)
    jax_steps.set_random_seed(int(config.training.seed))
    self.model = Transformer.from_model_config(config.model, input_vocab_size,
                                               target_vocab_size)
    self.model.build(((None, None), (None, None)))
    self.budget = None
    if config.training.time_budget_minutes:
      self.budget = budget_lib.TimeBudget(
          config.training.time_budget_minutes, config.training.cooldown_fraction,
          int(config.training.epochs), make_variable=budget_lib.Number)
    self.optimizer = optimization.make_optimizer(config, self._cooldown())
    # make_optimizer's WarmupInverseSquareRoot, whose cooldown the budget sets.
    self._schedule = self.optimizer._learning_rate  # pylint: disable=protected-access
    self.optimizer.build(self.model.trainable_variables)
    # Position in the data: completed epochs, batches done in the current
    # epoch, batches per epoch (0 until an epoch has ended).
    self.epoch = self.step_in_epoch = self.steps_per_epoch = 0
    # The current epoch's sums and training seconds, checkpointed for a resumed epoch.
    self.epoch_sums, self.epoch_seconds = losses.TokenMetrics(), 0.0
    self._steps = jax_steps.DeviceSteps(
        self.model, self.optimizer, self.devices, self.distribution,
        float(config.training.label_smoothing), int(config.training.steps_per_dispatch))
    self.summaries = summaries.Summaries(self.model_dir, is_chief=True, tensorflow=False)
    if self.summaries.scalars_off:
      logging.warning("no TensorBoard scalars: %s", self.summaries.scalars_off)
    self.progress = progress_lib.EpochProgress(enabled=progress)
    self._step, self.planned = 0, (None, False)
    self.train_split = None  # what fit gives run_epoch (the training pairs)
    self.checkpoints = jax_checkpointing.Checkpoints(
        self.model_dir, self.model, self.optimizer, self.budget, config.training.keep_checkpoints)
    self._pending_record = None  # the restored checkpoint's epoch record

  # --------------------------------------------------------------- state

  @property
  def step(self) -> int:
    """Optimizer steps taken (restored on resume), counted on the host: reading
    the optimizer's counter would wait for the devices at every step."""
    return self._step

  @property
  def learning_rate(self) -> float:
    """The schedule's rate at the current step, on the host (the optimizer's
    own counter is synced only at checkpoints)."""
    return self._schedule.rate_on_host(self.step)

  def _cooldown(self):
    """``(cooldown_steps, cooldown_end_step)``: the budget's plan, or the config's."""
    if self.budget is not None:
      return (int(self.budget.cooldown_steps.numpy()), int(self.budget.cooldown_end_step.numpy()))
    return int(self.config.training.cooldown_steps), int(self.config.training.cooldown_end_step)

  def restore(self) -> int:
    """Restores the newest readable checkpoint; returns its step (0: none). As
    the TensorFlow trainer does, drops the ``metrics.jsonl`` records of training
    after it (a fallback past a damaged checkpoint), which the run redoes once."""
    state = self.checkpoints.restore()
    if state is not None:
      self.epoch, self.step_in_epoch = state["epoch"], state["step_in_epoch"]
      self.steps_per_epoch = state["steps_per_epoch"]
      sums = state["epoch_sums"]
      self.epoch_sums = losses.TokenMetrics(sums["loss"], sums["tokens"], sums["correct"])
      self.epoch_seconds = sums["seconds"]
      if self.budget is not None:
        self._set_cooldown()
      self._steps.read_variables()
      self._step = int(self.optimizer.iterations.numpy())
      self._pending_record = state.get("record")
    self.summaries.keep_records_up_to(self.step, self.epoch)
    return self.step

  def save_checkpoint(self, record: Optional[Dict] = None) -> None:
    """Starts writing a checkpoint of the current state in the background (``record``:
    the epoch's metrics record, appended to ``metrics.jsonl`` on resume if the kill came first)."""
    values, sums = self._steps.host_values(), self.epoch_sums
    self.checkpoints.save(self.step, lambda: self._steps.write_variables(values),
                           values[2], values[1], {
        "epoch": self.epoch, "step_in_epoch": self.step_in_epoch,
        "steps_per_epoch": self.steps_per_epoch,
        "epoch_sums": {"loss": sums.loss_sum, "tokens": sums.tokens, "correct": sums.correct,
                       "seconds": self.epoch_seconds},
        "record": record})

  def _set_cooldown(self) -> None:
    """Gives the schedule the budget's plan; the step is compiled again with it."""
    self._schedule.cooldown_steps, self._schedule.cooldown_end_step = self._cooldown()
    self._steps.recompile()

  # --------------------------------------------------------------- steps

  def train_stack(self, stack):
    """Trains on ``stack``, :func:`transformer.training.jax_stacks.stacked` of
    ``((source, target_in), target_out)`` batches of ``(rows, length)`` ids
    (NumPy or on the devices); returns its summed ``(loss_sum, tokens,
    correct)`` as device arrays, not waited for (the devices run ahead)."""
    sums, _ = self._steps.train_stack(self._steps.on_devices(stack, stacked=True))
    return sums

  def _batches(self, split: shards.Split, seed: int, shuffle: bool):
    return shards.epoch_batches(split, self.config.data, seed=seed, shuffle=shuffle,
                                rows_multiple=len(self.devices))

  def evaluate(self, validation: shards.Split) -> Dict[str, float]:
    """Mean token loss and accuracy over the split ``validation`` (no dropout)."""
    metrics = self._steps.evaluate(self._batches(validation, 0, shuffle=False))
    if metrics.tokens == 0:
      raise TrainingError("the validation split is empty")
    return {"loss": metrics.loss, "accuracy": metrics.accuracy}

  # --------------------------------------------------------------- the loop and its actions

  def fit(self, train_split: shards.Split,
          validation_split: Optional[shards.Split] = None) -> TrainResult:
    """Trains as :meth:`transformer.training.tf_trainer.TensorFlowTrainer.fit` does: until
    ``training.train_steps`` steps (if > 0), ``training.epochs`` epochs, or the
    epochs that fit in ``training.time_budget_minutes``
    (:func:`transformer.training.loop.run_epochs`). Call :meth:`restore` first."""
    if self._pending_record:  # the checkpoint's: a kill may have come before its append
      self.summaries.append_if_missing(self._pending_record)
    if loop.has_steps_left(self):  # else train.py's last line says the run had ended
      logging.info("training from step %d on %s", self.step,
                   progress_lib.plural(len(self.devices), f"{self.devices[0].platform} device"))
    self.train_split = train_split
    try:
      return loop.run_epochs(self, validation_split)
    finally:
      self.checkpoints.wait()

  @property
  def epochs_done(self) -> int:
    return self.epoch

  def budget_seconds(self, run_seconds: float) -> float:
    return run_seconds

  def end_epoch(self, record: Dict, steps_run: int) -> None:
    """Moves the position to the next epoch, and lets the time budget plan."""
    del steps_run  # the record's seconds are the whole epoch's: the checkpoint holds them
    self.epoch += 1
    self.steps_per_epoch, self.step_in_epoch = record["steps_in_epoch"], 0
    self.epoch_sums, self.epoch_seconds = losses.TokenMetrics(), 0.0
    if self.budget is not None:
      self._plan_budget(record)

  def close_epoch(self, record: Dict, report: Callable[[], None]) -> None:
    # The record goes into the checkpoint that closes the epoch, and then
    # into metrics.jsonl: a kill between the two loses nothing.
    self.save_checkpoint(record)
    report()

  def _plan_budget(self, record):
    planned_before = int(self.budget.planned.numpy())
    record["planned_epochs"] = self.budget.epoch_end(
        epochs_done=self.epoch, epoch_seconds=record["seconds"],
        steps_per_epoch=record["steps_in_epoch"], step=self.step)
    if int(self.budget.planned.numpy()) != planned_before:
      self._set_cooldown()

  def run_epoch(self, max_steps: Optional[int], interval: int,
                stop: stop_signals.StopSignals) -> Tuple[Dict, float]:
    """Trains on one epoch's batches, or what is left of them, a stack per
    dispatch; returns its metrics record and the seconds this run spent on it."""
    skip = self.step_in_epoch
    seed = shards.epoch_seed(int(self.config.training.seed), self.epoch)
    batches = jax_stacks.in_runs(self._batches(self.train_split, seed, shuffle=True))
    if not batches:
      raise TrainingError(f"the training split of epoch {self.epoch + 1} is empty")
    self.planned, last = loop.start_progress(self, epoch_steps=len(batches), skip=skip,
                                             max_steps=max_steps, seconds_before=self.epoch_seconds)
    epoch_metrics, seconds_before = ((self.epoch_sums, self.epoch_seconds) if skip
                                     else (losses.TokenMetrics(), 0.0))
    clock = loop.EpochClock(seconds_before)
    scalars = loop.TrainScalars(self.summaries, self.log_every_steps, clock.start)
    unread = jax_stacks.UnreadSums(lambda loss, step: loop.non_finite_loss(
        loss, step, self.epoch, self.checkpoints.latest()))
    size = self._steps.steps_per_dispatch
    ranges = jax_stacks.stack_ranges(batches, skip, last, size)
    done = skip
    for first, stop_at, stack in jax_stacks.device_stacks(batches, ranges, size,
                                                          self._steps.on_devices):
      unread.add(self.step, stop_at - first, stop_at, *self._steps.train_stack(stack))
      self._step += stop_at - first
      saving_due = self.checkpoints.due(self.step, interval)
      # A checkpoint, the epoch's end or a signal reads every stack; else the
      # one just dispatched stays unread, so the host does not wait for it.
      read_all = saving_due or stop_at == last or stop.received is not None
      for step_before, step, done, sums in unread.read(keep_last=not read_all):
        epoch_metrics.add(*sums)
        scalars.metrics.add(*sums)
        if scalars.due(step, step - step_before):
          scalars.write(step, self._schedule.rate_on_host(step), clock.now())
        self.step_in_epoch = done
        self.epoch_sums, self.epoch_seconds = epoch_metrics, clock.epoch_seconds()
        self.progress.update(done, **{"loss": epoch_metrics.loss, "acc": epoch_metrics.accuracy,
                                      "lr": self._schedule.rate_on_host(step),
                                      "tok/s": epoch_metrics.tokens / self.epoch_seconds})
      if stop.received is not None:
        break
      self.checkpoints.poll()
      if saving_due and stop_at < last:
        self.save_checkpoint()
    self.progress.end()
    now = clock.now()
    # The record's seconds are the epoch's across a resume; this run's share is returned apart.
    return loop.epoch_record(
        epoch=self.epoch, step=self.step, complete=done >= len(batches), steps_in_epoch=done,
        metrics=epoch_metrics, learning_rate=self.learning_rate,
        seconds=clock.epoch_seconds(now)), clock.run_seconds(now)

  def final_weights(self, path: Path) -> Path:
    """Writes the trained weights to ``path`` (a ``.weights.h5``), whole or not at all."""
    self.checkpoints.wait()
    self._steps.write_variables()
    with files.staged(path) as partial:
      self.model.save_weights(str(partial))
    return path
