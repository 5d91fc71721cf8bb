"""The epoch loop both trainers run, and what it does between epochs (Orbit's controller).

A trainer (:class:`Trainer`, the interface: as Orbit's ``StandardTrainer``;
:class:`transformer.training.tf_trainer.TensorFlowTrainer` under
``tf.distribute`` and :class:`transformer.training.jax_trainer.JaxTrainer` under
JAX implement it) owns the model, the optimizer and their steps: its
``run_epoch`` trains on one epoch's batches, or what is left of them after a
resume, and returns the epoch's metrics record. :func:`run_epochs` owns the
epochs and calls the actions around them:

* the end: ``training.train_steps`` steps (if > 0), ``training.epochs``
  epochs counting those already done, or the epochs a time budget fits
  (:mod:`transformer.training.budget`, told each epoch's seconds);
* SIGTERM/SIGINT: a checkpoint, then return with ``TrainResult.interrupted_by``
  set (the epoch stops after its current step);
* an epoch's end: the position moves to the next epoch and the time budget
  plans (the trainer's ``end_epoch``), the validation loss, the caller's extra
  fields (BLEU), the console's summary, the ``metrics.jsonl``
  record and the checkpoint that closes the epoch, in the trainer's order
  (``close_epoch``: each trainer keeps a kill between the record and the
  checkpoint from losing or doubling the record).

The checkpoints within an epoch (every ``training.checkpoint_every_steps``
steps), the progress line and the TensorBoard training scalars
(:class:`TrainScalars`) belong to the trainer's ``run_epoch``: they follow its
steps, timed by an :class:`EpochClock`, and with the progress line opened by
:func:`start_progress`. A NaN/Inf loss stops the run there
(:func:`non_finite_loss`), before anything is saved: the last checkpoint on
disk is the last good state.
"""

import time
from typing import Callable, Dict, List, Optional, Protocol, Tuple

from absl import logging

from transformer.model import losses
from transformer.model import optimization
from transformer.run import progress as progress_lib
from transformer.run import stop_signals
from transformer.run.errors import NonFiniteLossError
from transformer.training.budget import TimeBudget
from transformer.training.result import TrainResult
from transformer.training.summaries import Summaries


class Trainer(Protocol):
  """What :func:`run_epochs` needs of a trainer; both trainers implement it.

  Attributes:
    config: the full configuration (see :mod:`transformer.config`).
    budget: the run's time budget, or None.
    summaries: its TensorBoard scalars and ``metrics.jsonl``.
    progress: its console progress line and epoch summaries.
    planned: the run's length in epochs as the progress line shows it (None:
      not known yet), and whether that is the time budget's estimate.
  """

  config: object
  budget: Optional[TimeBudget]
  summaries: Summaries
  progress: progress_lib.EpochProgress
  planned: Tuple[Optional[int], bool]

  @property
  def step(self) -> int:
    """Optimizer steps taken, restored on resume."""

  @property
  def epochs_done(self) -> int:
    """Epochs completed, restored on resume."""

  @property
  def learning_rate(self) -> float:
    """The schedule's rate at the current step."""

  def run_epoch(self, max_steps: Optional[int], interval: int,
                stop: stop_signals.StopSignals) -> Tuple[Dict, float]:
    """Trains on one epoch, or what is left of it, until ``max_steps`` steps (None:
    no limit) or ``stop``, checkpointing every ``interval`` steps; returns the
    epoch's record (``record["complete"]`` False for an epoch cut short) and
    this run's seconds of it."""

  def save_checkpoint(self):
    """Writes a checkpoint of the current state."""

  def evaluate(self, validation) -> Dict[str, float]:
    """``{"loss", "accuracy"}`` over the validation batches (no dropout)."""

  def budget_seconds(self, run_seconds: float) -> float:
    """The seconds the time budget is told of ``run_seconds`` this run trained."""

  def end_epoch(self, record: Dict, steps_run: int) -> None:
    """Moves the position to the next epoch, and lets the time budget plan."""

  def close_epoch(self, record: Dict, report: Callable[[], None]) -> None:
    """Calls ``report`` (the record's log line, summary and append) and writes
    the checkpoint that closes the epoch, in the order that keeps a kill from
    losing or doubling the record."""


def end_text(training) -> str:
  """Where a run of ``config.training`` ends, as the log line says it."""
  max_steps = int(training.train_steps) or None
  max_epochs = None if max_steps else int(training.epochs)
  if training.time_budget_minutes:
    return (f"the end of {training.time_budget_minutes:g} minutes of training "
            f"(at most epoch {max_epochs})")
  return f"step {max_steps}" if max_steps else f"epoch {max_epochs}"


def has_steps_left(trainer: Trainer) -> bool:
  """Whether the configuration's end (``train_steps``, ``epochs`` or the time
  budget's planned epochs) is still ahead: a rerun of a finished run is not."""
  training = trainer.config.training
  ahead = (trainer.step < int(training.train_steps) if int(training.train_steps)
           else trainer.epochs_done < int(training.epochs))
  return ahead and not (trainer.budget is not None and
                        trainer.budget.finished(trainer.epochs_done))


def run_epochs(trainer: Trainer, validation=None,
               epoch_end_callback: Optional[Callable[[int, Dict], Dict]] = None) -> TrainResult:
  """Runs ``trainer``'s epochs until the configuration's end, a signal or an error.

  Args:
    trainer: either trainer (:class:`Trainer`).
    validation: the trainer's validation batches, or None.
    epoch_end_callback: ``(epoch, record) -> extra fields`` for the epoch's
      record (e.g. BLEU); ``epoch`` counts from 1.
  """
  training = trainer.config.training
  budget, summaries = trainer.budget, trainer.summaries
  max_steps = int(training.train_steps) or None
  interval = int(training.checkpoint_every_steps)
  history: List[Dict] = []
  start_step = trainer.step
  try:
    with stop_signals.StopSignals() as stop:
      while has_steps_left(trainer):
        first_step = trainer.step
        record, run_seconds = trainer.run_epoch(max_steps, interval, stop)
        if budget is not None:
          budget.add_seconds(trainer.budget_seconds(run_seconds))
        if stop.received is not None:
          trainer.save_checkpoint()  # train.py's last line says so (finish.exit_if_stopped)
          break
        if record["complete"]:
          if not history:  # the first epoch counted in this run
            mismatch = optimization.cooldown_mismatch(training, record["steps_in_epoch"])
            if mismatch:
              logging.warning(mismatch)
          trainer.end_epoch(record, steps_run=trainer.step - first_step)
        if validation is not None:
          val = trainer.evaluate(validation)
          record.update(val_loss=val["loss"], val_accuracy=val["accuracy"])
          summaries.write_scalars("validation", trainer.step,
                                  {"loss": val["loss"], "accuracy": val["accuracy"]})
        if epoch_end_callback is not None:
          record.update(epoch_end_callback(record["epoch"], dict(record)) or {})

        def report(record=record):  # the record itself goes to metrics.jsonl
          summarize(trainer, record)
          summaries.append_metrics(record)
          history.append(record)
        trainer.close_epoch(record, report)
  finally:
    summaries.flush()
  return TrainResult(step=trainer.step, start_step=start_step, epoch=trainer.epochs_done,
                     interrupted_by=stop.received, history=history)


def summarize(trainer: Trainer, record: Dict) -> None:
  """The console's summary of the epoch of ``record``: with the time budget's
  plan when the epoch's end made one."""
  if "planned_epochs" in record:
    trainer.progress.summary(record, record["planned_epochs"],
                             estimated=not int(trainer.budget.planned.numpy()))
  else:
    trainer.progress.summary(record, *trainer.planned)


def non_finite_loss(loss: float, step: int, epoch: int, latest_checkpoint) -> NonFiniteLossError:
  """The error for a NaN/Inf training ``loss`` at ``step`` of ``epoch`` (from 0)."""
  return NonFiniteLossError(
      f"the training loss is {loss} at step {step} (epoch {epoch + 1}); stopping without "
      f"saving. The last good checkpoint is kept: {latest_checkpoint or 'none was written yet'}. "
      "Lower the learning rate (config.training.warmup_steps), check the data, or try "
      "without mixed precision")


class TrainScalars:
  """TensorBoard's training scalars: the sums of the steps since the last write
  (``metrics``, a :class:`transformer.model.losses.TokenMetrics`), written every
  ``every`` steps with the learning rate and the tokens per second since then."""

  def __init__(self, summaries, every: int, now: float):
    self._summaries, self.every = summaries, every
    self.metrics, self._start = losses.TokenMetrics(), now

  def due(self, step: int, steps: int = 1) -> bool:
    """Whether the ``steps`` steps up to ``step`` passed a multiple of ``every``."""
    return step // self.every > (step - steps) // self.every

  def write(self, step: int, learning_rate: float, now: float) -> None:
    self._summaries.write_scalars("train", step, {
        "loss": self.metrics.loss, "accuracy": self.metrics.accuracy,
        "learning_rate": learning_rate,
        "tokens_per_second": self.metrics.tokens / max(now - self._start, 1e-9)})
    self.metrics, self._start = losses.TokenMetrics(), now


def epoch_record(*, epoch: int, step: int, complete: bool, steps_in_epoch: int,
                 metrics: losses.TokenMetrics, learning_rate: float, seconds: float) -> Dict:
  """The ``metrics.jsonl`` record of ``epoch`` (from 0): its training sums
  ``metrics`` over ``seconds``, both the whole epoch's across a resume."""
  return {"epoch": epoch + 1, "step": step, "complete": complete,
          "steps_in_epoch": steps_in_epoch,
          "train_loss": metrics.loss, "train_accuracy": metrics.accuracy,
          "learning_rate": learning_rate,
          "tokens_per_second": metrics.tokens / max(seconds, 1e-9), "seconds": seconds}


class EpochClock:
  """An epoch's training seconds on ``time.monotonic``: this run's share, and
  the whole epoch's across a resume (``seconds_before`` the earlier runs')."""

  def __init__(self, seconds_before: float = 0.0):
    self.start = time.monotonic()
    self.seconds_before = seconds_before

  @staticmethod
  def now() -> float:
    return time.monotonic()

  def run_seconds(self, now: Optional[float] = None) -> float:
    """This run's seconds of the epoch, until ``now`` (default: the present)."""
    return max((self.now() if now is None else now) - self.start, 1e-9)

  def epoch_seconds(self, now: Optional[float] = None) -> float:
    """The epoch's seconds across a resume, until ``now``."""
    return self.seconds_before + self.run_seconds(now)


def start_progress(trainer: Trainer, *, epoch_steps: int, skip: int, max_steps: Optional[int],
                   seconds_before: float) -> Tuple[Tuple[Optional[int], bool], int]:
  """Opens the progress line of the trainer's current epoch of ``epoch_steps``
  batches, ``skip`` of them (``seconds_before`` of training) done before a
  resume. Returns the run's planned epochs as known now, whether that is an
  estimate (the trainer's ``planned``), and the batch this run's epoch ends at
  (``train_steps`` may cut it)."""
  epoch, step = trainer.epochs_done, trainer.step
  if trainer.budget is None:
    epochs, estimated = int(trainer.config.training.epochs), False
  else:  # the part of this epoch trained before a resume is not a whole epoch's
    epochs, estimated = trainer.budget.epochs(epoch, seconds_before if skip else 0.0)
  steps_left = max_steps - step if max_steps else None
  planned = progress_lib.planned_epochs(epoch, epoch_steps, skip, steps_left, epochs)
  last = epoch_steps if steps_left is None else min(epoch_steps, skip + steps_left)
  trainer.progress.start(progress_lib.epoch_label(epoch + 1, planned, estimated), skip, last)
  return (planned, estimated), last
