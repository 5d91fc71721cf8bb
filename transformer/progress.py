"""What a training run shows on the terminal: a progress bar per epoch and one
summary line per epoch (the tutorial's ``fit`` shows Keras' progress bar too).

Only the chief shows anything under multi-worker; the Trainer decides.
"""

import sys
from typing import Dict, Optional

import keras
import tensorflow as tf


def epoch_summary(record: Dict) -> str:
  """One line for an epoch's metrics record (the terminal's per-epoch summary).

  E.g. ``epoch 3 (step 1200): train loss 4.1230 acc 0.3120 | val loss 3.9000
  acc 0.3400 | 12345 tok/s | 95.2 s``; the validation part only when the record
  has one.
  """
  parts = [f"epoch {record['epoch']} (step {record['step']}): train loss "
           f"{record['train_loss']:.4f} acc {record['train_accuracy']:.4f}"]
  if "val_loss" in record:
    parts.append(f"val loss {record['val_loss']:.4f} acc {record['val_accuracy']:.4f}")
  parts.append(f"{record['tokens_per_second']:.0f} tok/s")
  parts.append(f"{record['seconds']:.1f} s")
  return " | ".join(parts)


class EpochProgress:
  """A ``keras.utils.Progbar`` per epoch and :func:`epoch_summary` after it.

  Args:
    enabled: show anything at all; when False every method does nothing.
  """

  def __init__(self, enabled: bool):
    self.enabled = enabled
    self._bar = None

  def start(self, epoch: int, skip: int, steps_per_epoch: Optional[int],
            dataset: tf.data.Dataset) -> None:
    """Prints the epoch's header and opens its bar.

    Args:
      epoch: completed epochs (0 for the first).
      skip: batches of this epoch already done (a resumed epoch).
      steps_per_epoch: batches per epoch, or None until one epoch has ended.
      dataset: the epoch's remaining batches, counted when ``steps_per_epoch``
        is None.
    """
    if not self.enabled:
      return
    print(f"Epoch {epoch + 1}" + (f" (resumed at batch {skip})" if skip else ""),
          flush=True)
    # Until an epoch has ended its length is unknown: one pass over this
    # epoch's batches (the same on every pass) counts them, for the ETA.
    target = steps_per_epoch or skip + int(dataset.reduce(
        tf.constant(0, tf.int64), lambda count, _: count + 1))
    self._bar = keras.utils.Progbar(target,
                                    stateful_metrics=["loss", "accuracy", "lr", "tok/s"],
                                    unit_name="step",
                                    interval=0.05 if sys.stdout.isatty() else 30.0)

  def update(self, done: int, *, loss: float, accuracy: float, learning_rate: float,
             tokens_per_second: float) -> None:
    """Moves the bar to batch ``done`` of the epoch; the values are the epoch's so far."""
    if self._bar is not None:
      self._bar.update(done, [("loss", loss), ("accuracy", accuracy), ("lr", learning_rate),
                              ("tok/s", tokens_per_second)])

  def end(self) -> None:
    """Closes the epoch's bar (ends its line)."""
    if self._bar is not None:
      print(flush=True)
      self._bar = None

  def summary(self, record: Dict) -> None:
    """Prints :func:`epoch_summary` of the epoch's metrics record."""
    if self.enabled:
      print(epoch_summary(record), flush=True)
