"""The epoch loop both trainers run, and what it does between epochs (Orbit's controller).

A trainer (:class:`transformer.training.trainer.Trainer` under
``tf.distribute``, :class:`transformer.training.keras_loop.Trainer` under JAX)
owns the model, the optimizer and their steps: its ``run_epoch`` trains on one
epoch's batches, or what is left of them after a resume, and returns the
epoch's metrics record. :func:`run_epochs` owns the epochs and calls the
actions around them:

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
steps. A NaN/Inf loss stops the run there (:func:`non_finite_loss`), before
anything is saved: the last checkpoint on disk is the last good state.
"""

from typing import Callable, Dict, List, Optional, Tuple

from absl import logging

from transformer.model import losses
from transformer.model import optimization
from transformer.run import progress as progress_lib
from transformer.run import stop_signals
from transformer.run.errors import NonFiniteLossError
from transformer.training.result import TrainResult


def end_text(training) -> str:
  """Where a run of ``config.training`` ends, as the log line says it."""
  max_steps = int(training.train_steps) or None
  max_epochs = None if max_steps else int(training.epochs)
  if training.time_budget_minutes:
    return (f"the end of {training.time_budget_minutes:g} minutes of training "
            f"(at most epoch {max_epochs})")
  return f"step {max_steps}" if max_steps else f"epoch {max_epochs}"


def run_epochs(trainer, run_epoch: Callable, *, budget, summaries, validation=None,
               epoch_end_callback: Optional[Callable[[int, Dict], Dict]] = None) -> TrainResult:
  """Runs epochs until the configuration's end, a signal or an error.

  Args:
    trainer: gives ``config``, ``step``, ``epochs_done``, ``save_checkpoint()``,
      ``evaluate(validation)``, ``budget_seconds(seconds)`` (the seconds the
      budget is told), ``end_epoch(record, steps_run)``, ``close_epoch(record,
      report)`` and ``summarize(record)`` (the console's epoch summary).
    run_epoch: ``(max_steps, checkpoint_interval, stop) -> (record,
      seconds)``: one epoch, or what is left of it; ``seconds`` is this run's
      share of it. ``record["complete"]`` is False for an epoch cut short.
    budget: the trainer's :class:`~transformer.training.budget.TimeBudget`, or None.
    summaries: the trainer's :class:`~transformer.training.summaries.Summaries`.
    validation: the trainer's validation batches, or None.
    epoch_end_callback: ``(epoch, record) -> extra fields`` for the epoch's
      record (e.g. BLEU); ``epoch`` counts from 1.
  """
  training = trainer.config.training
  max_steps = int(training.train_steps) or None
  max_epochs = None if max_steps else int(training.epochs)
  interval = int(training.checkpoint_every_steps)
  history: List[Dict] = []
  start_step = trainer.step
  try:
    with stop_signals.StopSignals() as stop:
      while not ((max_steps is not None and trainer.step >= max_steps) or (
          max_epochs is not None and trainer.epochs_done >= max_epochs) or (
              budget is not None and budget.finished(trainer.epochs_done))):
        first_step = trainer.step
        record, run_seconds = run_epoch(max_steps, interval, stop)
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
          trainer.summarize(record)
          summaries.append_metrics(record)
          history.append(record)
        trainer.close_epoch(record, report)
  finally:
    summaries.flush()
  return TrainResult(step=trainer.step, start_step=start_step, epoch=trainer.epochs_done,
                     interrupted_by=stop.received, history=history)


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

  def due(self, step: int) -> bool:
    return step % self.every == 0

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


def start_progress(progress, *, epoch: int, epoch_steps: int, skip: int, step: int,
                   max_steps: Optional[int], epochs: Optional[int],
                   estimated: bool = False) -> Tuple[Optional[int], int]:
  """Opens the progress line of ``epoch`` (from 0) of ``epoch_steps`` batches,
  ``skip`` of them done before a resume, at ``step``; ``epochs``: the run's
  length as known now, an estimate if ``estimated``. Returns the run's planned
  epochs and the batch this run's epoch ends at (``train_steps`` may cut it)."""
  steps_left = max_steps - step if max_steps else None
  planned = progress_lib.planned_epochs(epoch, epoch_steps, skip, steps_left, epochs)
  last = epoch_steps if steps_left is None else min(epoch_steps, skip + steps_left)
  progress.start(progress_lib.epoch_label(epoch + 1, planned, estimated), skip, last)
  return planned, last
