"""The base error of training, shared by :mod:`transformer.training` and
:mod:`transformer.checkpointing` (which :mod:`transformer.training` imports, so the
class cannot live there). ``train.py`` and ``evaluate.py`` report it as a run error
instead of a traceback.
"""


class TrainingError(RuntimeError):
  """Training cannot continue."""
