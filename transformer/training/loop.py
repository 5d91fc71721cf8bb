"""The training loop (Orbit's controller): one loop, whichever engine trains.

:class:`Trainer` owns everything periodic: the position in the data, the
epoch's clock and sums, the scalars, the progress line, the NaN/Inf check, the
checkpoint cadence, the time budget, validation and the epoch's record. An
engine (:mod:`transformer.training.engine`) only trains chunks of batches,
evaluates, saves and restores; it never calls back into the loop.

A chunk's sums are read once the next is dispatched (the devices run ahead of
the host), and all of them before a checkpoint, at an epoch's end and on a
signal. SIGTERM and SIGINT stop the loop after the current chunk, with a
checkpoint; a NaN/Inf loss stops it before anything is saved.

One crash-safety protocol for ``metrics.jsonl``: an epoch's record is appended
before the checkpoint that closes the epoch, and a resume drops the records
after the checkpoint it restored: a kill between the two redoes the epoch's end.
"""

import dataclasses
import math
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from absl import logging

from transformer.model import losses
from transformer.model import optimization
from transformer.run import progress as progress_lib
from transformer.run import stop_signals
from transformer.run.errors import NonFiniteLossError, TrainingError
from transformer.training.budget import TimeBudget
from transformer.training.engine import Engine
from transformer.training.summaries import EpochClock, Summaries, TrainScalars


@dataclasses.dataclass
class TrainResult:
  step: int                       # optimizer steps done in total (across resumes)
  start_step: int                 # the step this run started from (restored)
  epoch: int                      # completed epochs
  interrupted_by: Optional[int]   # signal number if stopped by a signal, else None
  history: List[Dict]             # the metrics records written this run


def end_text(training) -> str:
  """Where a run of ``config.training`` ends, as the start line says it (a time
  budget has no ``train_steps``: transformer.config)."""
  if training.time_budget_minutes:
    return (f"the end of {training.time_budget_minutes:g} minutes of training "
            f"(at most epoch {int(training.epochs)})")
  steps = int(training.train_steps)
  return f"step {steps}" if steps else f"epoch {int(training.epochs)}"


class Trainer:
  """Trains ``engine``'s model as ``config.training`` says, and records it.

  Args:
    config: the full configuration (see :mod:`transformer.config`).
    engine: what trains (:class:`Engine`).
    model_dir: where ``metrics.jsonl`` and the TensorBoard logs go (None: nowhere).
    is_chief: whether this process writes them.
    log_every_steps: TensorBoard training scalars every this many steps.
    progress: show the progress line and the epoch summaries.
  """

  def __init__(self, config, engine: Engine, *, model_dir=None, is_chief: bool = True,
               log_every_steps: int = 100, progress: bool = True):
    self.config, self.engine = config, engine
    training = config.training
    self.budget = (TimeBudget(training.time_budget_minutes, training.cooldown_fraction,
                              int(training.epochs)) if training.time_budget_minutes else None)
    self.summaries = Summaries(None if model_dir is None else Path(model_dir), is_chief=is_chief)
    self.log_every_steps = max(1, int(log_every_steps))
    self.progress = progress_lib.EpochProgress(enabled=progress and is_chief,
                                               log_every_steps=self.log_every_steps)
    # Completed epochs, batches done in this one and in an epoch (0: not known yet).
    self.epoch = self.step_in_epoch = self.steps_per_epoch = 0
    self.epoch_sums, self.epoch_seconds = losses.TokenMetrics(), 0.0
    self._partial = False  # the resumed epoch's earlier sums were not checkpointed
    self._checked = False  # the data's epoch length checked against the checkpoint's
    self._saved = None  # (step, epoch, step_in_epoch) last saved or restored
    self._planned = (None, False)  # (epochs, estimated) as the progress line shows them
    if self.budget is not None:  # no cooldown until the budget plans one
      engine.set_cooldown(0, 0)

  @property
  def model(self):
    return self.engine.model

  @property
  def step(self) -> int:
    return self.engine.step

  @property
  def learning_rate(self) -> float:
    return self.engine.learning_rate(self.step)

  def latest_checkpoint(self):
    return self.engine.latest_checkpoint()

  def state(self) -> Dict:
    """The loop's state as a checkpoint holds it."""
    sums = self.epoch_sums
    return {"step": self.step, "epoch": self.epoch, "step_in_epoch": self.step_in_epoch,
            "steps_per_epoch": self.steps_per_epoch,
            "epoch_sums": {"loss": sums.loss_sum, "tokens": sums.tokens,
                           "correct": sums.correct, "seconds": self.epoch_seconds},
            "budget": self.budget.state() if self.budget is not None else {}}

  def save_checkpoint(self) -> None:
    """Writes a checkpoint, unless this position is the last one saved."""
    if self._saved != (self.step, self.epoch, self.step_in_epoch):
      self.engine.save(self.state())
      self._saved = (self.step, self.epoch, self.step_in_epoch)

  def restore(self) -> int:
    """Restores the newest intact checkpoint and drops the ``metrics.jsonl``
    records after it (the run redoes them); returns its step (0: none)."""
    state = self.engine.restore()
    if state is not None:
      self.epoch, self.step_in_epoch = state["epoch"], state["step_in_epoch"]
      self.steps_per_epoch = state["steps_per_epoch"]
      sums = state["epoch_sums"]
      self._partial = sums is None and self.step_in_epoch > 0
      if sums is not None:
        self.epoch_sums = losses.TokenMetrics(sums["loss"], sums["tokens"], sums["correct"])
        self.epoch_seconds = sums["seconds"]
      if self.budget is not None and state["budget"]:
        self.budget.load(state["budget"])
        self.engine.set_cooldown(self.budget.cooldown_steps, self.budget.cooldown_end_step)
      self._saved = (self.step, self.epoch, self.step_in_epoch)
    self.summaries.keep_records_up_to(self.step, self.epoch)
    return self.step

  def has_steps_left(self) -> bool:
    """Whether ``train_steps``, ``epochs`` or the budget's plan is still ahead."""
    training = self.config.training
    ahead = (self.step < int(training.train_steps) if int(training.train_steps)
             else self.epoch < int(training.epochs))
    return ahead and not (self.budget is not None and self.budget.finished(self.epoch))

  def evaluate(self, validation) -> Dict[str, float]:
    """Mean token loss and accuracy, and the tokens, over ``validation`` (no dropout)."""
    metrics = self.engine.evaluate(validation)
    if metrics.tokens == 0:
      raise TrainingError("the validation data is empty")
    return {"loss": metrics.loss, "accuracy": metrics.accuracy, "tokens": metrics.tokens}

  def fit(self, train_data, validation=None, *,
          epoch_end_callback: Optional[Callable[[int, Dict], Dict]] = None,
          step_callback: Optional[Callable[[int, float], None]] = None) -> TrainResult:
    """Trains until the configuration's end, a signal or an error (:meth:`restore` first).

    Args:
      train_data: the engine's epochs (TensorFlow: ``epoch -> dataset`` of global
        batches, the same for the same epoch; JAX: a prepared split).
      validation: the validation batches (or split), or None.
      epoch_end_callback: ``(epoch from 1, record) -> extra fields`` (e.g. BLEU).
      step_callback: ``(step, loss)`` after every chunk, each read at once.
    """
    training = self.config.training
    if self.has_steps_left():  # else train.py's last line says the run had ended
      logging.info("training from step %d to %s on %s", self.step, end_text(training),
                   self.engine.describe())
    max_steps, history, start_step = int(training.train_steps) or None, [], self.step
    try:
      with stop_signals.StopSignals() as stop:
        while self.has_steps_left():
          first_step = self.step
          record, run_seconds = self.train_epoch(train_data, stop, max_steps, step_callback)
          if self.budget is not None:
            self.budget.add_seconds(self.engine.agree(run_seconds))
          if stop.received is not None:
            self.save_checkpoint()  # train.py's last line says so (launch.stop_if_interrupted)
            break
          if record["complete"] and not history and (  # the run's first epoch
              mismatch := optimization.cooldown_mismatch(training, record["steps_in_epoch"])):
            logging.warning(mismatch)
          if record["complete"]:
            self._end_epoch(record, steps_run=self.step - first_step)
          if validation is not None:
            loss, accuracy = (self.evaluate(validation)[key] for key in ("loss", "accuracy"))
            record.update(val_loss=loss, val_accuracy=accuracy)
            self.summaries.write_scalars("validation", self.step,
                                         dict(loss=loss, accuracy=accuracy))
          if epoch_end_callback is not None:
            record.update(epoch_end_callback(record["epoch"], dict(record)) or {})
          if "planned_epochs" in record:  # the budget's plan as this epoch's end made it
            self._planned = (record["planned_epochs"], not self.budget.planned)
          self.progress.summary(record, *self._planned)
          self.summaries.append_metrics(record)  # before the checkpoint: see the module's doc
          history.append(record)
          self.save_checkpoint()
    finally:  # the scalars are flushed as they are written
      self.engine.finish()
    return TrainResult(step=self.step, start_step=start_step, epoch=self.epoch,
                       interrupted_by=stop.received, history=history)

  def _end_epoch(self, record: Dict, steps_run: int) -> None:
    """Moves to the next epoch, and lets the time budget plan."""
    self.epoch += 1
    self.steps_per_epoch, self.step_in_epoch = record["steps_in_epoch"], 0
    self.epoch_sums, self.epoch_seconds = losses.TokenMetrics(), 0.0
    if self.budget is None:
      return
    # A resumed epoch without checkpointed sums timed this run's share only: scaled up.
    seconds = self.engine.agree(record["seconds"])
    if record.get("partial"):
      seconds *= record["steps_in_epoch"] / max(steps_run, 1)
    record["planned_epochs"] = self.budget.epoch_end(
        epochs_done=self.epoch, epoch_seconds=seconds,
        steps_per_epoch=record["steps_in_epoch"], step=self.step)
    self.engine.set_cooldown(self.budget.cooldown_steps, self.budget.cooldown_end_step)

  def _start_progress(self, epoch_steps: int, skip: int, max_steps: Optional[int]) -> int:
    """Opens the epoch's progress line; returns the batch its run ends at (``train_steps``)."""
    if self.budget is None:
      epochs, estimated = int(self.config.training.epochs), False
    else:  # the part of this epoch trained before a resume is not a whole epoch's
      epochs, estimated = self.budget.epochs(self.epoch, self.epoch_seconds if skip else 0.0)
    steps_left = max_steps - self.step if max_steps else None
    planned = progress_lib.planned_epochs(self.epoch, epoch_steps, skip, steps_left, epochs)
    self._planned = (planned, estimated)
    last = epoch_steps if steps_left is None else min(epoch_steps, skip + steps_left)
    self.progress.start(progress_lib.epoch_label(self.epoch + 1, planned, estimated), skip, last)
    return last

  def train_epoch(self, train_data, stop: stop_signals.StopSignals,
                  max_steps: Optional[int] = None,
                  step_callback: Optional[Callable[[int, float], None]] = None
                  ) -> Tuple[Dict, float]:
    """Trains what is left of the epoch; returns its record (``complete`` False
    when cut short) and the seconds this run spent on it."""
    skip, known = self.step_in_epoch, self.steps_per_epoch
    # The first epoch of a run counts its batches: the data may not be the checkpoint's.
    batches = self.engine.epoch_batches(train_data, self.epoch, skip, known if self._checked else 0)
    if not batches.length:
      raise TrainingError(f"the training data of epoch {self.epoch + 1} is empty")
    if known and batches.length != known:  # a resume would skip or repeat batches
      raise TrainingError(
          f"the training data gives {batches.length} batches an epoch, and this run had "
          f"{known} (its checkpoint is at batch {skip} of epoch {self.epoch + 1}): resume "
          "with the data it trained on (the same --data and --train_examples), or use a new "
          "--model_dir")
    self._checked, self.steps_per_epoch = True, batches.length
    last = self._start_progress(batches.length, skip, max_steps)
    chunks = batches.chunks(last)  # compiled before the clock starts
    if not skip:
      self.epoch_sums, self.epoch_seconds = losses.TokenMetrics(), 0.0
    clock = EpochClock(self.epoch_seconds)
    scalars = TrainScalars(self.summaries, self.log_every_steps, clock.start)
    unread = []  # (step before, steps, batch of the epoch after, the engine's sums)
    dispatched = skip
    for steps, chunk in chunks:
      dispatched += steps
      unread.append((self.step, steps, dispatched, self.engine.train(chunk)))
      saving_due = (self.step - (self._saved[0] if self._saved else 0)
                    >= int(self.config.training.checkpoint_every_steps))
      # Else the chunk just dispatched stays unread: the host does not wait for it.
      read_all = (saving_due or dispatched == last or stop.received is not None
                  or step_callback is not None)
      reading, unread = (unread, []) if read_all else (unread[:-1], unread[-1:])
      for (before, steps_read, done, trained), sums in zip(
          reading, self.engine.read([trained for *_, trained in reading])):
        if not math.isfinite(sums[0]):
          offset, loss = self.engine.non_finite(trained)
          raise NonFiniteLossError.at(loss, before + offset + 1, self.epoch,
                                      self.latest_checkpoint())
        batch_metrics = losses.TokenMetrics(*sums)
        self.epoch_sums += batch_metrics
        scalars.metrics += batch_metrics
        step = before + steps_read
        rate = self.engine.learning_rate(step)
        if scalars.due(step, steps_read):
          scalars.write(step, rate, clock.now())
        self.step_in_epoch, self.epoch_seconds = done, clock.epoch_seconds()
        self.progress.update(done, step, loss=self.epoch_sums.loss, acc=self.epoch_sums.accuracy,
                             lr=rate, **{"tok/s": self.epoch_sums.tokens / self.epoch_seconds})
        if step_callback is not None:
          step_callback(step, batch_metrics.loss)
      if stop.received is not None:
        break
      self.engine.poll()
      if saving_due and dispatched < last:  # at the epoch's end, its close saves
        self.save_checkpoint()
    self.progress.end()
    now = clock.now()
    self.epoch_seconds = clock.epoch_seconds(now)
    record = {"epoch": self.epoch + 1, "step": self.step,
              "complete": self.step_in_epoch >= batches.length,
              "steps_in_epoch": self.step_in_epoch,
              "train_loss": self.epoch_sums.loss, "train_accuracy": self.epoch_sums.accuracy,
              "learning_rate": self.engine.learning_rate(self.step),
              "tokens_per_second": self.epoch_sums.tokens / self.epoch_seconds,
              "seconds": self.epoch_seconds}
    if self._partial:  # train_*, tokens_per_second and seconds cover this run's batches only
      record["partial"], self._partial = True, False
    return record, clock.run_seconds(now)
