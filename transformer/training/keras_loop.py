"""The training loop without TensorFlow: Keras on JAX, from prepared shards (paper §5).

``KERAS_BACKEND=jax python train.py --data=<prepared folder>`` trains here;
:class:`transformer.training.trainer.Trainer` is the ``tf.distribute`` trainer
it mirrors, and both run their epochs in :func:`transformer.training.loop.run_epochs`.
The same configuration gives the same model, schedule (with the time budget's
cooldown), label smoothing, dropout and loss over the real target tokens of
the global batch; a run leaves the same ``metrics.jsonl`` records, TensorBoard
scalars and console lines, and checkpoints after every
``checkpoint_every_steps`` steps and at each epoch's end, from which the same
command resumes. The checkpoints are :mod:`transformer.keras_checkpoints`
folders whose ``model.weights.h5`` the TensorFlow side loads (``evaluate.py``).

The steps (:mod:`transformer.training.jax_steps`) are functions of the
variables' values, which live on the devices between steps and go back into
the Keras variables only for a checkpoint; :func:`transformer.shards.epoch_batches`
pads batches to few shapes, and with more than one device
``keras.distribution.DataParallel`` splits them on their rows. The host reads
the steps' sums only when it needs them: to redraw the progress line, for
TensorBoard, before a checkpoint and at an epoch's end (a NaN/Inf loss stops
the run there, before anything is saved).

Not here: ``training.length_groups`` (the TensorFlow step's sub-batches; the
padded shapes do its work) and ``mixed_float16`` (no loss scaling; use
``mixed_bfloat16``).
"""

import math
from pathlib import Path
import time
from typing import Callable, Dict, Optional

from absl import logging
import jax
import keras

from transformer import keras_checkpoints
from transformer import losses
from transformer import optimization
from transformer import progress as progress_lib
from transformer import shards
from transformer.errors import TrainingError
from transformer.model import Transformer
from transformer.training import budget as budget_lib
from transformer.training import jax_steps
from transformer.training import loop
from transformer.training import summaries
from transformer.training.result import TrainResult


class Trainer:
  """Builds the model and optimizer and trains them on NumPy batches under JAX.

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
    self.label_smoothing = float(config.training.label_smoothing)
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
    self._values = self._read_variables()
    self._step = 0
    self._summaries = summaries.Summaries(self.model_dir, is_chief=True, tensorflow=False)
    if self._summaries.scalars_off:
      logging.warning("no TensorBoard scalars: %s", self._summaries.scalars_off)
    self._progress = progress_lib.EpochProgress(enabled=progress)
    self._planned = None
    self._budget_estimate = int(config.training.epochs)
    self._last_saved = None  # (step, epoch, step_in_epoch)
    self._train_step = self._eval_step = None
    self._pending_record = None  # the restored checkpoint's epoch record

  # --------------------------------------------------------------- state

  @property
  def step(self) -> int:
    """Optimizer steps taken (restored on resume), counted on the host: reading
    the optimizer's counter would wait for the devices at every step."""
    return self._step

  def learning_rate(self) -> float:
    """The schedule's rate at the current step (the optimizer's own counter
    is synced only at checkpoints)."""
    return float(keras.ops.convert_to_numpy(self._schedule(self.step)))

  def _cooldown(self):
    """``(cooldown_steps, cooldown_end_step)`` for the schedule: the budget's
    plan, or the config's."""
    if self.budget is not None:
      return (int(self.budget.cooldown_steps.numpy()), int(self.budget.cooldown_end_step.numpy()))
    return (int(self.config.training.cooldown_steps),
            int(self.config.training.cooldown_end_step))

  def _read_variables(self):
    """The Keras variables' values: (trainable, non-trainable, optimizer),
    placed as the step's outputs will be, so that the step compiles once."""
    values = ([v.value for v in self.model.trainable_variables],
              [v.value for v in self.model.non_trainable_variables],
              [v.value for v in self.optimizer.variables])
    return values if self.distribution is not None else jax.device_put(values, self.devices[0])

  def _write_variables(self) -> None:
    """Puts the values trained on the devices back into the Keras variables."""
    for variables, values in zip((self.model.trainable_variables,
                                  self.model.non_trainable_variables,
                                  self.optimizer.variables), self._values):
      for variable, value in zip(variables, values):
        variable.assign(value)

  def restore(self) -> int:
    """Restores the newest readable checkpoint; returns its step (0: none)."""
    restored = keras_checkpoints.restore(self.model_dir / keras_checkpoints.CHECKPOINT_SUBDIR,
                                         self.model)
    if restored is None:
      return 0
    path, optimizer_values, non_trainable_values, state = restored
    for variables, values, what in (
        (self.optimizer.variables, optimizer_values, "optimizer"),
        (self.model.non_trainable_variables, non_trainable_values, "non-trainable")):
      if [tuple(v.shape) for v in variables] != [tuple(a.shape) for a in values]:
        raise keras_checkpoints.CheckpointError(
            f"cannot restore the checkpoint {path}: its {what} variables do not fit this "
            "model/configuration. Use a new --model_dir")
      for variable, value in zip(variables, values):
        variable.assign(value)
    self.epoch, self.step_in_epoch = state["epoch"], state["step_in_epoch"]
    self.steps_per_epoch = state["steps_per_epoch"]
    sums = state["epoch_sums"]
    self.epoch_sums = losses.TokenMetrics(sums["loss"], sums["tokens"], sums["correct"])
    self.epoch_seconds = sums["seconds"]
    if self.budget is not None:
      for name, value in state["budget"].items():
        getattr(self.budget, name).assign(value)
      self._set_cooldown()
    self._values = self._read_variables()
    self._step = int(self.optimizer.iterations.numpy())
    self._last_saved = (self.step, self.epoch, self.step_in_epoch)
    self._pending_record = state.get("record")
    logging.info("restored checkpoint %s at step %d (epoch %d, batch %d of the epoch)",
                 path, self.step, self.epoch, self.step_in_epoch)
    return self.step

  def save_checkpoint(self, record: Optional[Dict] = None) -> Path:
    """Writes a checkpoint of the current state (``record``: the epoch's metrics
    record, appended to ``metrics.jsonl`` on resume if the kill came first)."""
    position = (self.step, self.epoch, self.step_in_epoch)
    self._write_variables()
    state = {"step": self.step, "epoch": self.epoch, "step_in_epoch": self.step_in_epoch,
             "steps_per_epoch": self.steps_per_epoch,
             "epoch_sums": {"loss": self.epoch_sums.loss_sum, "tokens": self.epoch_sums.tokens,
                            "correct": self.epoch_sums.correct, "seconds": self.epoch_seconds},
             "budget": ({name: getattr(self.budget, name).numpy() for name in
                         ("used_seconds", "planned", "cooldown_steps", "cooldown_end_step")}
                        if self.budget is not None else {}),
             "record": record}
    path = keras_checkpoints.save(self.model_dir / keras_checkpoints.CHECKPOINT_SUBDIR,
                                  self.step, self.model, self._values[2], self._values[1],
                                  state, keep=int(self.config.training.keep_checkpoints))
    self._last_saved = position
    logging.info("saved checkpoint %s", path)
    return path

  def _set_cooldown(self) -> None:
    """Gives the schedule the budget's plan; the step is compiled again with it."""
    self._schedule.cooldown_steps, self._schedule.cooldown_end_step = self._cooldown()
    self._train_step = None

  # --------------------------------------------------------------- steps

  def _build_steps(self):
    self._train_step, self._eval_step = jax_steps.make_steps(self.model, self.optimizer,
                                                             self.label_smoothing)

  def _on_devices(self, batch):
    """A NumPy batch as device arrays, split on its rows over the devices."""
    if self.distribution is None:
      return jax.device_put(batch, self.devices[0])
    return jax.tree_util.tree_map(
        lambda array: keras.distribution.distribute_tensor(
            array, self.distribution.get_data_layout(array.shape)), batch)

  def train_step(self, batch):
    """One training step on ``batch``, ``((source, target_in), target_out)`` of
    ``(rows, length)`` ids; returns its ``(loss_sum, tokens, correct)`` as device
    arrays, not waited for (the devices run ahead of the host)."""
    if self._train_step is None:
      self._build_steps()
    self._values, step_sums = self._train_step(self._values, self._on_devices(batch))
    return step_sums

  def _batches(self, split: shards.Split, seed: int, shuffle: bool):
    return shards.epoch_batches(split, self.config.data, seed=seed, shuffle=shuffle,
                                rows_multiple=len(self.devices))

  def evaluate(self, split: shards.Split) -> Dict[str, float]:
    """Mean token loss and accuracy over ``split`` (no dropout)."""
    if self._train_step is None:
      self._build_steps()
    metrics = losses.TokenMetrics()
    device_sums = [self._eval_step(self._values, self._on_devices(batch))
                   for batch in self._batches(split, 0, shuffle=False)]
    for batch_sums in jax.device_get(device_sums):
      metrics.add(*batch_sums)
    if metrics.tokens == 0:
      raise TrainingError("the validation split is empty")
    return {"loss": metrics.loss, "accuracy": metrics.accuracy}

  # --------------------------------------------------------------- the loop

  def fit(self, train_split: shards.Split,
          validation_split: Optional[shards.Split] = None) -> TrainResult:
    """Trains as :meth:`transformer.training.trainer.Trainer.fit` does: until
    ``training.train_steps`` steps (if > 0), ``training.epochs`` epochs, or the
    epochs that fit in ``training.time_budget_minutes``
    (:func:`transformer.training.loop.run_epochs`). Call :meth:`restore` first."""
    if self._pending_record:  # the checkpoint's: a kill may have come before its append
      self._summaries.append_if_missing(self._pending_record)
    logging.info("training from step %d on %d %s device(s)", self.step, len(self.devices),
                 self.devices[0].platform)

    def run_epoch(max_steps, interval, stop):
      record = self._run_epoch(train_split, max_steps, interval, stop)
      return record, record["seconds"]
    return loop.run_epochs(self, run_epoch, budget=self.budget, summaries=self._summaries,
                           validation=validation_split)

  # --------------------------------------------------------------- the loop's actions

  @property
  def epochs_done(self) -> int:
    return self.epoch

  def budget_seconds(self, run_seconds: float) -> float:
    return run_seconds

  def end_epoch(self, record: Dict, steps_run: int) -> None:
    """Moves the position to the next epoch, and lets the time budget plan."""
    self.epoch += 1
    self.steps_per_epoch, self.step_in_epoch = record["steps_in_epoch"], 0
    self.epoch_sums, self.epoch_seconds = losses.TokenMetrics(), 0.0
    if self.budget is not None:
      self._plan_budget(record, steps_run=steps_run)

  def close_epoch(self, record: Dict, report: Callable[[], None]) -> None:
    # The record goes into the checkpoint that closes the epoch, and then
    # into metrics.jsonl: a kill between the two loses nothing.
    self.save_checkpoint(record)
    report()

  def summarize(self, record: Dict) -> None:
    """The console's summary of the epoch of ``record``."""
    self._progress.summary(record, record.get("planned_epochs", self._planned))

  def _plan_budget(self, record, steps_run):
    # A resumed epoch ran only part of its steps here: scale its seconds up.
    epoch_seconds = record["seconds"] / max(steps_run, 1) * record["steps_in_epoch"]
    planned_before = int(self.budget.planned.numpy())
    record["planned_epochs"] = self.budget.epoch_end(
        epochs_done=self.epoch, epoch_seconds=epoch_seconds,
        steps_per_epoch=record["steps_in_epoch"], step=self.step)
    self._budget_estimate = record["planned_epochs"]
    if int(self.budget.planned.numpy()) != planned_before:
      self._set_cooldown()

  def _epoch_count(self) -> int:
    if self.budget is not None:
      return int(self.budget.planned.numpy()) or self._budget_estimate
    return int(self.config.training.epochs)

  def _run_epoch(self, train_split, max_steps, interval, stop) -> Dict:
    skip = self.step_in_epoch
    batches = self._batches(train_split, shards.epoch_seed(int(self.config.training.seed),
                                                           self.epoch), shuffle=True)
    if not batches:
      raise TrainingError(f"the training split of epoch {self.epoch + 1} is empty")
    if skip:
      logging.info("resuming epoch %d after its first %d batches", self.epoch + 1, skip)
    self._planned, last = loop.start_progress(
        self._progress, epoch=self.epoch, epoch_steps=len(batches), skip=skip, step=self.step,
        max_steps=max_steps, epochs=self._epoch_count())
    epoch_metrics, seconds_before = ((self.epoch_sums, self.epoch_seconds) if skip
                                     else (losses.TokenMetrics(), 0.0))
    pending = []  # the device sums of the steps not yet read
    epoch_start = redrawn = time.monotonic()
    scalars = loop.TrainScalars(self._summaries, self.log_every_steps, epoch_start)
    done = skip
    for index in range(skip, last):
      step_sums = self.train_step(batches[index])
      self._step += 1
      pending.append((self.step, step_sums))
      done = index + 1
      step, now = self.step, time.monotonic()
      logging_due = scalars.due(step)
      saving_due = step - (self._last_saved[0] if self._last_saved else 0) >= interval
      if not (logging_due or saving_due or done == last or stop.received is not None
              or now - redrawn >= progress_lib.REDRAW_SECONDS):
        continue
      for pending_step, (loss_sum, tokens, correct) in jax.device_get(pending):
        if not math.isfinite(float(loss_sum)):
          raise loop.non_finite_loss(loss_sum / max(float(tokens), 1.0), pending_step,
                                     self.epoch, self._latest_checkpoint())
        epoch_metrics.add(loss_sum, tokens, correct)
        scalars.metrics.add(loss_sum, tokens, correct)
      pending = []
      self.step_in_epoch = done
      self.epoch_sums, self.epoch_seconds = epoch_metrics, seconds_before + now - epoch_start
      learning_rate = self.learning_rate()
      redrawn = now
      self._progress.update(done, **{"loss": epoch_metrics.loss, "acc": epoch_metrics.accuracy,
                                     "lr": learning_rate,
                                     "tok/s": epoch_metrics.tokens / max(self.epoch_seconds,
                                                                         1e-9)})
      if logging_due:
        scalars.write(step, learning_rate, now)
      if stop.received is not None:
        break
      if saving_due and done < last:
        self.save_checkpoint()
    self._progress.end()
    seconds = time.monotonic() - epoch_start
    return {
        "epoch": self.epoch + 1, "step": self.step, "complete": done >= len(batches),
        "steps_in_epoch": done,
        "train_loss": epoch_metrics.loss, "train_accuracy": epoch_metrics.accuracy,
        "learning_rate": self.learning_rate(),
        "tokens_per_second": epoch_metrics.tokens / max(seconds_before + seconds, 1e-9),
        "seconds": seconds,  # this run's share (the time budget counts runs apart)
    }

  def _latest_checkpoint(self) -> Optional[Path]:
    dirs = keras_checkpoints.checkpoint_dirs(self.model_dir / keras_checkpoints.CHECKPOINT_SUBDIR)
    return dirs[-1] if dirs else None

  def final_weights(self, path: Path) -> Path:
    """Writes the trained weights to ``path`` (a ``.weights.h5``), whole or not at all."""
    self._write_variables()
    partial = path.with_name(f".{path.name}.partial.weights.h5")
    path.parent.mkdir(parents=True, exist_ok=True)
    self.model.save_weights(str(partial))
    partial.rename(path)
    return path
