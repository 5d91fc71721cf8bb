"""What a training run records for later: TensorBoard scalars and ``metrics.jsonl``.

Under ``model_dir``, written by the chief only under multi-worker: TensorBoard
scalars in ``logs/<name>`` (the loop in :mod:`transformer.training.tf_engine` writes
``logs/train`` every ``log_every_steps`` steps and ``logs/validation`` every
epoch; train.py adds the validation BLEU there, a ``bleu`` scalar beside the
loss and accuracy), and one JSON line per epoch in :data:`METRICS_FILE`.

Both engines write the scalars through :class:`EventFileScalars` (the
``tensorboard`` package's record writer, no TensorFlow), one writer per log
folder; TensorBoard reads them as it reads ``tf.summary``'s.
"""

import json
import os
from pathlib import Path
import socket
import time
from typing import Dict, Optional

from absl import logging

from transformer.model import losses
from transformer.run import run_folder
from transformer.run.files import write_text_atomically

METRICS_FILE = run_folder.METRICS_FILE


class EventFileScalars:
  """Scalars in a TensorBoard event file of ``logdir``, without TensorFlow.

  The events ``tf.summary.scalar`` writes (a float32 tensor tagged for the
  "scalars" plugin), framed by the ``tensorboard`` package's pure-Python
  ``RecordWriter``. The package's own ``EventFileWriter`` is not used: it
  imports TensorFlow whenever TensorFlow is installed.
  """

  def __init__(self, logdir: Path):
    # Deferred: not at the start of every script that imports this module.
    # pylint: disable=g-import-not-at-top
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter
    self._event_pb2, self._summary_pb2 = event_pb2, summary_pb2
    logdir.mkdir(parents=True, exist_ok=True)
    now = time.time()
    # The name TensorBoard looks for; pid and a counter keep two writers apart.
    name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.{id(self)}.v2"
    self._file = open(logdir / name, "wb")  # pylint: disable=consider-using-with
    self._records = RecordWriter(self._file)
    self._write(event_pb2.Event(wall_time=now, file_version="brain.Event:2"))

  def _write(self, event) -> None:
    self._records.write(event.SerializeToString())

  def write(self, step: int, scalars: Dict[str, float]) -> None:
    summary = self._summary_pb2.Summary()
    for name, value in scalars.items():
      entry = summary.value.add(tag=name)
      entry.metadata.plugin_data.plugin_name = "scalars"
      entry.tensor.dtype = 1  # DT_FLOAT
      entry.tensor.tensor_shape.SetInParent()  # a scalar
      entry.tensor.float_val.append(float(value))
    self._write(self._event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

  def flush(self) -> None:
    self._records.flush()


def scalars_missing() -> Optional[str]:
  """Why :class:`EventFileScalars` cannot be used here, or None."""
  try:
    # Deferred: looked for once a run writes, not at the start of every script importing this.
    # pylint: disable=g-import-not-at-top,unused-import
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer import record_writer
  except ImportError as e:
    return (f"the tensorboard package cannot be imported ({e}); pip install tensorboard "
            "to get them")
  return None


class Summaries:
  """The run's TensorBoard writers (one per name, made on first use) and metrics file.

  Args:
    model_dir: the run's folder (a ``Path``); None writes nothing (tests).
    is_chief: whether this process writes (see :func:`transformer.training.tf_distribute.is_chief`).
  """

  def __init__(self, model_dir: Optional[Path], *, is_chief: bool):
    self._dir = model_dir if is_chief else None
    self._writers = {}
    # A machine with Keras and JAX alone (an accelerator's) trains without scalars.
    self._scalars_off = scalars_missing() if self._dir is not None else None
    if self._scalars_off:
      logging.warning("no TensorBoard scalars: %s", self._scalars_off)

  def write_scalars(self, name: str, step: int, scalars: Dict[str, Optional[float]]) -> None:
    """Writes ``scalars`` (None values skipped) at ``step`` to ``logs/<name>``, then flushes."""
    if self._dir is None or self._scalars_off:
      return
    if name not in self._writers:
      self._writers[name] = EventFileScalars(self._dir / run_folder.LOGS_SUBDIR / name)
    self._writers[name].write(step, {k: v for k, v in scalars.items() if v is not None})
    self._writers[name].flush()

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
    lines cut short (:func:`transformer.run.run_folder.read_metrics` says which):
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
