"""The errors of training, and the one line an error is reported in.

The scripts report a :class:`UsageError` or a :class:`TrainingError` as one
error line instead of a traceback; :func:`describe_error` is that line's cause.
"""


class UsageError(ValueError):
  """A bad or contradictory command line, found before any work."""


class TrainingError(RuntimeError):
  """The work cannot go on: bad data or files, a corrupt checkpoint, a NaN loss, a full disk."""


def describe_error(error: BaseException) -> str:
  """``Type: first line of the message`` (TensorFlow's messages run to pages)."""
  lines = str(error).strip().splitlines()
  return f"{type(error).__name__}: {lines[0] if lines else ''}"


class NonFiniteLossError(TrainingError):
  """The loss became NaN or Inf; nothing was saved after the last good checkpoint."""

  @classmethod
  def at(cls, loss: float, step: int, epoch: int, latest_checkpoint) -> "NonFiniteLossError":
    """The error for a NaN/Inf training ``loss`` at ``step`` of ``epoch`` (from 0)."""
    return cls(
        f"the training loss is {loss} at step {step} (epoch {epoch + 1}); stopping without "
        f"saving. The last good checkpoint is kept: "
        f"{latest_checkpoint or 'none was written yet'}. Lower the learning rate "
        "(config.training.warmup_steps), check the data, or try without mixed precision")


class CheckpointError(TrainingError):
  """A checkpoint is missing, corrupt, or does not fit this model (either trainer's)."""
