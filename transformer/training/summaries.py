"""What a training run records for later: TensorBoard scalars and ``metrics.jsonl``.

Under ``model_dir``, written by the chief only under multi-worker: TensorBoard
scalars in ``logs/<name>`` (the loop in :mod:`transformer.training.trainer` writes
``logs/train`` every ``log_every_steps`` steps and ``logs/validation`` every
epoch; train.py adds the validation BLEU there, a ``bleu`` scalar beside the
loss and accuracy), and one JSON line per epoch in :data:`METRICS_FILE`.
"""

import json
from pathlib import Path
from typing import Dict, Optional

import tensorflow as tf

METRICS_FILE = "metrics.jsonl"


def _scalar_metadata() -> bytes:
  # What tensorboard.summary.scalar attaches: the "scalars" plugin's marker.
  from tensorflow.core.framework import summary_pb2  # pylint: disable=g-import-not-at-top
  metadata = summary_pb2.SummaryMetadata()
  metadata.plugin_data.plugin_name = "scalars"
  metadata.plugin_data.content = b""
  return metadata.SerializeToString()


def write_scalar(name: str, value: float, step: int) -> None:
  """``tf.summary.scalar`` without needing the tensorboard package installed.

  Writes the same event TensorBoard's scalar summary writes (a float32 tensor
  tagged for the "scalars" plugin), to the default summary writer.
  """
  tf.summary.write(name, tf.constant(value, tf.float32), step=step,
                   metadata=_scalar_metadata())


class Summaries:
  """The run's TensorBoard writers (one per name, made on first use) and metrics file.

  Args:
    model_dir: the run's folder (a ``Path``); None writes nothing (tests).
    is_chief: whether this process writes (see :func:`transformer.training.distribute.is_chief`).
  """

  def __init__(self, model_dir: Optional[Path], *, is_chief: bool):
    self._dir = model_dir if is_chief else None
    self._writers = {}

  def write_scalars(self, name: str, step: int, scalars: Dict[str, Optional[float]]) -> None:
    """Writes ``scalars`` (None values skipped) at ``step`` to ``logs/<name>``, then flushes."""
    if self._dir is None:
      return
    if name not in self._writers:
      self._writers[name] = tf.summary.create_file_writer(str(self._dir / "logs" / name))
    writer = self._writers[name]
    with writer.as_default(step=step):
      for key, value in scalars.items():
        if value is not None:
          write_scalar(key, value, step)
    writer.flush()

  def append_metrics(self, record: Dict) -> None:
    """Appends ``record`` as one JSON line (keys sorted) to :data:`METRICS_FILE`."""
    if self._dir is None:
      return
    with open(self._dir / METRICS_FILE, "a", encoding="utf-8") as f:
      f.write(json.dumps(record, sort_keys=True) + "\n")

  def flush(self) -> None:
    for writer in self._writers.values():
      writer.flush()
