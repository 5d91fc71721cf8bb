"""What a training run records for later: TensorBoard scalars and ``metrics.jsonl``.

Under ``model_dir``, written by the chief only under multi-worker: TensorBoard
scalars in ``logs/<name>`` (the loop in :mod:`transformer.training.trainer` writes
``logs/train`` every ``log_every_steps`` steps and ``logs/validation`` every
epoch; train.py adds the validation BLEU there, a ``bleu`` scalar beside the
loss and accuracy), and one JSON line per epoch in :data:`METRICS_FILE`.
"""

import json
import os
from pathlib import Path
from typing import Dict, Optional

from absl import logging
import tensorflow as tf

from transformer import run_folder
from transformer.training.checkpointing import write_text_atomically

METRICS_FILE = run_folder.METRICS_FILE


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
    """Appends ``record`` as one JSON line (keys sorted) to :data:`METRICS_FILE`,
    after removing a last line cut short by a kill (its record is written
    again: see :meth:`keep_records_up_to`), so that no record is glued onto it."""
    if self._dir is None:
      return
    path = self._dir / METRICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)  # before the first checkpoint makes it
    with open(path, "a+b") as f:
      f.seek(0)
      written = f.read()
      if written and not written.endswith(b"\n"):
        whole = written.rfind(b"\n") + 1
        logging.warning("%s: removing its line %d, cut short by a kill during its append",
                        path, written.count(b"\n") + 1)
        f.truncate(whole)
      f.write((json.dumps(record, sort_keys=True) + "\n").encode("utf-8"))
      f.flush()
      os.fsync(f.fileno())

  def keep_records_up_to(self, step: int, epoch: int) -> None:
    """Drops from :data:`METRICS_FILE` the records of training after the
    checkpoint just restored (at ``step``, ``epoch`` epochs completed), and
    lines cut short (:func:`transformer.run_folder.read_metrics` says which):
    the resumed run writes those records again, once.

    A kill between an epoch's record and the checkpoint that closes the epoch
    leaves the record and the older checkpoint that the epoch's end is redone from.
    """
    path = None if self._dir is None else self._dir / METRICS_FILE
    if path is None or not path.is_file():
      return
    records = run_folder.read_metrics(path)
    # Where each record ends: (step, epochs completed then); a final record's
    # (step, -1) comes after its last epoch's.
    def end(record):
      if "epoch" not in record:
        return (record["step"], -1)
      return (record["step"], record["epoch"] - (not record.get("complete", True)))
    kept = [r for r in records if end(r) <= (step, epoch)]
    dropped = [r for r in records if end(r) > (step, epoch)]
    if dropped:
      logging.warning("%s: dropping the records of %s, written after the checkpoint at step "
                      "%d: they are written again as the run goes on", path,
                      ", ".join(f"epoch {r['epoch']}" if "epoch" in r else "the final step"
                                for r in dropped), step)
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept)
    if text != path.read_text(encoding="utf-8", errors="replace"):
      write_text_atomically(path, text)

  def flush(self) -> None:
    for writer in self._writers.values():
      writer.flush()
