"""The errors of training, and the one line an error is reported in.

``train.py`` and ``evaluate.py`` report a :class:`TrainingError` as one error
line instead of a traceback; :func:`describe_error` is that line's cause.
"""


class TrainingError(RuntimeError):
  """Training cannot continue."""


def describe_error(error: BaseException) -> str:
  """``Type: first line of the message`` (TensorFlow's messages run to pages)."""
  lines = str(error).strip().splitlines()
  return f"{type(error).__name__}: {lines[0] if lines else ''}"


class NonFiniteLossError(TrainingError):
  """The loss became NaN or Inf; nothing was saved after the last good checkpoint."""


class CheckpointError(TrainingError):
  """A checkpoint is missing, corrupt, or does not fit this model (either trainer's)."""
