"""What a training run records: TensorBoard scalars and ``metrics.jsonl``, and the epoch's clock.

Under ``model_dir``, by the chief only: scalars in ``logs/train`` and ``logs/validation``
(with train.py's ``bleu``), one JSON line per epoch in ``metrics.jsonl``."""

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


def _tensorboard():
  """``(event_pb2, summary_pb2, RecordWriter)`` of the ``tensorboard`` package;
  ImportError on a machine without it (an accelerator's: Keras and JAX alone)."""
  # Deferred: not at the start of every script that imports this module.
  # pylint: disable=g-import-not-at-top
  from tensorboard.compat.proto import event_pb2
  from tensorboard.compat.proto import summary_pb2
  from tensorboard.summary.writer.record_writer import RecordWriter
  return event_pb2, summary_pb2, RecordWriter


class EventFileScalars:
  """``tf.summary.scalar``'s events in a file of ``logdir``, by the ``tensorboard``
  package's pure-Python ``RecordWriter`` (its ``EventFileWriter`` imports TensorFlow)."""

  def __init__(self, logdir: Path):
    self._event_pb2, self._summary_pb2, record_writer = _tensorboard()
    logdir.mkdir(parents=True, exist_ok=True)
    now = time.time()
    # The name TensorBoard looks for; pid and a counter keep two writers apart.
    name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.{id(self)}.v2"
    self._file = open(logdir / name, "wb")  # pylint: disable=consider-using-with
    self._records = record_writer(self._file)
    self._records.write(
        self._event_pb2.Event(wall_time=now, file_version="brain.Event:2").SerializeToString())

  def write(self, step: int, scalars: Dict[str, float]) -> None:
    summary = self._summary_pb2.Summary()
    for name, value in scalars.items():
      entry = summary.value.add(tag=name)
      entry.metadata.plugin_data.plugin_name = "scalars"
      entry.tensor.dtype = 1  # DT_FLOAT
      entry.tensor.tensor_shape.SetInParent()  # a scalar
      entry.tensor.float_val.append(float(value))
    event = self._event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary)
    self._records.write(event.SerializeToString())

  def flush(self) -> None:
    self._records.flush()


class Summaries:
  """The run's TensorBoard writers (one per name, made on first use) and metrics
  file in ``model_dir``; nowhere when it is None or this process is not the chief.
  Without the ``tensorboard`` package: one warning, and no scalars."""

  def __init__(self, model_dir: Optional[Path], *, is_chief: bool):
    self._dir = model_dir if is_chief else None
    self._logs = None if self._dir is None else self._dir / run_folder.LOGS_SUBDIR
    self._writers = {}
    if self._logs is not None:
      try:
        _tensorboard()
      except ImportError as e:
        logging.warning("no TensorBoard scalars: the tensorboard package cannot be imported "
                        "(%s); pip install tensorboard to get them", e)
        self._logs = None

  def write_scalars(self, name: str, step: int, scalars: Dict[str, Optional[float]]) -> None:
    """Writes ``scalars`` (None values skipped) at ``step`` to ``logs/<name>``, then flushes."""
    if self._logs is None:
      return
    if name not in self._writers:
      self._writers[name] = EventFileScalars(self._logs / name)
    self._writers[name].write(step, {k: v for k, v in scalars.items() if v is not None})
    self._writers[name].flush()

  def append_metrics(self, record: Dict) -> None:
    """Appends ``record`` as one JSON line to ``metrics.jsonl``, after removing
    a last line cut short by a kill, so that no record is glued onto it."""
    if self._dir is None:
      return
    path = self._dir / run_folder.METRICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)  # before the first checkpoint makes it
    with open(path, "a+b") as f:
      f.seek(0)
      written = f.read()
      if written and not written.endswith(b"\n"):
        logging.warning("%s: removing its line %d, cut short by a kill during its append",
                        path, written.count(b"\n") + 1)
        f.truncate(written.rfind(b"\n") + 1)
      f.write((json.dumps(record, sort_keys=True) + "\n").encode("utf-8"))
      f.flush()
      os.fsync(f.fileno())

  def keep_records_up_to(self, step: int, epoch: int) -> None:
    """Drops from ``metrics.jsonl`` the records after the checkpoint just
    restored (at ``step``, ``epoch`` epochs completed) and lines cut short: the
    resumed run writes them again, once."""
    path = None if self._dir is None else self._dir / run_folder.METRICS_FILE
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


class TrainScalars:
  """The training scalars: the sums of the steps since the last write (``metrics``),
  written every ``every`` steps with the rate and the tokens per second since then."""

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
    self.start, self.seconds_before = time.monotonic(), seconds_before

  @staticmethod
  def now() -> float:
    return time.monotonic()

  def run_seconds(self, now: Optional[float] = None) -> float:
    """This run's seconds of the epoch, until ``now`` (default: the present)."""
    return max((self.now() if now is None else now) - self.start, 1e-9)

  def epoch_seconds(self, now: Optional[float] = None) -> float:
    """The epoch's seconds across a resume, until ``now``."""
    return self.seconds_before + self.run_seconds(now)
