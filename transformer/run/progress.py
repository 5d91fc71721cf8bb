"""What a run shows on the console: a live line per epoch on a terminal, one
summary line per epoch everywhere, and a live count of sentences translated.

The live line counts the steps this epoch will really run, says "Epoch 3/20"
(:func:`epoch_label`) and gives an ETA from the steps after the first (mostly
tracing). Its least needed fields are left out whole until it fits the
terminal, so that no number is cut; a log line first clears it. Off a
terminal (a file, a pipe) nothing is drawn: a plain line every
``log_every_steps`` steps or :data:`PLAIN_LINE_SECONDS`, and one line per
epoch. Only the chief shows anything under multi-worker; the Trainer decides.
"""

import contextlib
import logging as python_logging
import math
import shutil
import sys
import time
from typing import Callable, Dict, List, Optional, TextIO, Tuple

from absl import logging

BAR_WIDTH = 24
# The live line is redrawn at most this often (seconds), and on the last step.
REDRAW_SECONDS = 0.1
# Off a terminal, a progress line at least this often (seconds), as Keras' fit(verbose=2).
PLAIN_LINE_SECONDS = 60.0


def epoch_label(epoch: int, planned: Optional[int], estimated: bool = False) -> str:
  """"Epoch 3/20" for epoch 3 of 20 planned, "Epoch 3/~20" while the 20 is a
  time budget's estimate, "Epoch 3" when there is no count yet."""
  if not planned:
    return f"Epoch {epoch}"
  return f"Epoch {epoch}/{'~' if estimated else ''}{planned}"


def position_text(epochs_done: int, step_in_epoch: int) -> str:
  """Where in the data a checkpoint is, with epochs counted from 1 as the
  console counts them: "in epoch 3, after its first 626 batches"."""
  if step_in_epoch:
    return f"in epoch {epochs_done + 1}, after its first {plural(step_in_epoch, 'batch', 'batches')}"
  return f"after epoch {epochs_done}" if epochs_done else "before the first epoch"


def epoch_summary(record: Dict, planned: Optional[int] = None, estimated: bool = False) -> str:
  """An epoch's metrics record as one line, e.g. ``Epoch 3/20 (step 1200): train
  loss 4.1230 acc 0.3120 | val loss 3.9000 acc 0.3400 | 12345 tok/s | 95.2 s``
  (validation and BLEU where the record has them)."""
  parts = [f"{epoch_label(record['epoch'], planned, estimated)} (step {record['step']}): "
           f"train loss {record['train_loss']:.4f} acc {record['train_accuracy']:.4f}"]
  if "val_loss" in record:
    parts.append(f"val loss {record['val_loss']:.4f} acc {record['val_accuracy']:.4f}")
  if "bleu" in record:
    parts.append(f"BLEU {record['bleu']:.2f}")
  parts.append(f"{record['tokens_per_second']:.0f} tok/s")
  parts.append(f"{record['seconds']:.1f} s")
  return " | ".join(parts)


def planned_epochs(epoch: int, epoch_steps: int, skip: int,
                   steps_left: Optional[int], epochs: Optional[int]) -> Optional[int]:
  """How many epochs the run will have touched when it ends: after ``epoch``
  completed ones, the current one's ``epoch_steps`` batches (``skip`` of them
  done before this run), then ``steps_left`` optimizer steps, or without a
  step limit (None) the configured ``epochs``."""
  if steps_left is None:
    return epochs
  after_this = max(0, steps_left - (epoch_steps - skip))
  return epoch + 1 + math.ceil(after_this / max(epoch_steps, 1))


def run_summary(step: int, start_step: int, history: List[Dict]) -> str:
  """The run's last line, e.g. ``training done at step 630: 630 steps in this run
  (epochs 1-2 whole, epoch 3 up to its step 30)``; a finished run's rerun says so."""
  if step == start_step and not history:
    return f"the run had already ended at step {step}: nothing more to train"
  whole = [r["epoch"] for r in history if r["complete"]]
  parts = []
  if whole:
    span = f"{whole[0]}-{whole[-1]}" if len(whole) > 1 else f"{whole[0]}"
    parts.append(f"epoch{'s' if len(whole) > 1 else ''} {span} whole")
  for record in history:
    if not record["complete"]:
      parts.append(f"epoch {record['epoch']} up to its step {record['steps_in_epoch']}")
  what = f" ({', '.join(parts)})" if parts else ""
  return f"training done at step {step}: {plural(step - start_step, 'step')} in this run{what}"


def clock_text(seconds: float) -> str:
  """``m:ss`` or ``h:mm:ss``."""
  minutes, secs = divmod(int(round(seconds)), 60)
  hours, minutes = divmod(minutes, 60)
  return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class LiveLine:
  """One epoch's line on a terminal, redrawn in place: ``label`` ("Epoch 3/20"),
  from ``start`` steps (a resumed epoch) to ``total``, timed by ``clock``."""

  def __init__(self, label: str, start: int, total: int, clock: Callable[[], float]):
    self.label, self.start, self.total, self.clock = label, start, total, clock
    self.opened = clock()
    self._first_done = None  # (steps, time) after the first step of this run

  def text(self, done: int, values: Dict[str, float], width: Optional[int] = None,
           bar: bool = True) -> str:
    """The line at ``done`` steps: counts, bar, elapsed time, ETA and ``values``,
    the least needed left out whole until it fits ``width`` (None: all)."""
    now = self.clock()
    if self._first_done is None:
      self._first_done = (done, now)
    filled = BAR_WIDTH * min(done, self.total) // max(self.total, 1)
    drawn = "=" * filled + (">" if filled < BAR_WIDTH else "") + "." * (BAR_WIDTH - filled - 1)
    shown = [f"{key} {number_text(key, value)}" for key, value in values.items()]
    if shown:
      shown[0] = "| " + shown[0]
    # (place on the line, field), the most needed first.
    places = [(0, self.label), (2, f"{done}/{self.total}"), (5, self._eta(done, now))]
    places += [(6 + i, text) for i, text in enumerate(shown[:2])]
    if self.start:
      places.append((1, f"(resumed at step {self.start})"))
    places += [(4, clock_text(now - self.opened))] + ([(3, f"[{drawn}]")] if bar else [])
    places += [(6 + i, text) for i, text in enumerate(shown) if i >= 2]
    return fit_fields(places, width)

  def _eta(self, done: int, now: float) -> str:
    # The first step traces the graph: its time says nothing about the others.
    first_steps, first_time = self._first_done
    if done >= self.total:
      return "ETA 0:00"
    if done <= first_steps:
      return "ETA ?"
    per_step = (now - first_time) / (done - first_steps)
    return f"ETA {clock_text(per_step * (self.total - done))}"


def number_text(key: str, value: float) -> str:
  """A live value in its key's format: the learning rate in scientific notation
  (it spans decades), tokens/s whole, the rest to 4 decimals."""
  if key == "lr":
    return f"{value:.2e}"
  if key == "tok/s":
    return f"{value:.0f}"
  return f"{value:.4f}"


def fit_fields(places: List[Tuple[int, str]], width: Optional[int]) -> str:
  """The fields of ``places`` (``(place, text)``, the most needed first) in
  place order, the least needed left out until the line fits ``width`` (None:
  all); the first two are kept, cut only where they alone are wider."""
  kept = list(places)
  while width is not None and len(kept) > 2 and len(_joined(kept)) > width:
    kept.pop()
  text = _joined(kept)
  return text if width is None else text[:width]


def _joined(places: List[Tuple[int, str]]) -> str:
  return " ".join(text for _, text in sorted(places))


def plural(count: int, noun: str, nouns: Optional[str] = None) -> str:
  """"1 epoch", "2 epochs"; ``nouns`` where adding an "s" is wrong ("batches")."""
  return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def counted(translate_batch, total: int, stream: Optional[TextIO] = None):
  """``translate_batch`` that shows "translated 64/1193 sentences" on ``stream``
  (stderr) when it is a terminal, redrawn in place."""
  done = 0

  def translate_and_count(sentences):
    nonlocal done
    outputs = translate_batch(sentences)
    done += len(sentences)
    out = stream or sys.stderr
    if out.isatty():
      print(f"\rtranslated {done}/{total} sentences", end="\n" if done >= total else "",
            file=out, flush=True)
    return outputs
  return translate_and_count


class EpochProgress:
  """The live line per epoch (terminals only) and :func:`epoch_summary` after it,
  on ``stream`` (stdout), nothing unless ``enabled``. Off a terminal, a plain
  line every ``log_every_steps`` steps (and :data:`PLAIN_LINE_SECONDS`)."""

  def __init__(self, enabled: bool, stream: Optional[TextIO] = None,
               clock: Callable[[], float] = time.monotonic,
               log_every_steps: Optional[int] = None):
    self.enabled = enabled
    self._stream = stream
    self._clock = clock
    self._every = log_every_steps
    self._plain = None  # off a terminal: (the epoch's line, when and at which step last written)
    self._line = None
    self._width = 0
    self._drawn_at = None
    self._log_handlers = []  # the handlers whose records clear the live line first

  @property
  def stream(self) -> TextIO:
    return self._stream or sys.stdout

  @property
  def live(self) -> bool:
    """Whether the live line is drawn: a terminal, not a file or a pipe."""
    return self.enabled and self.stream.isatty()

  def start(self, label: str, skip: int, total: int) -> None:
    """Opens the epoch's live line at ``skip`` of ``total`` steps."""
    if self.enabled and not self.live and self._every:
      self._plain = [LiveLine(label, skip, total, self._clock), self._clock(), None]
    if self.live:
      self._line = LiveLine(label, skip, total, self._clock)
      self._width = 0
      self._drawn_at = None
      # absl's handler (and any other) hangs on the root logger.
      self._log_handlers = list(python_logging.getLogger().handlers)
      for handler in self._log_handlers:
        handler.addFilter(self._clear_before_log_line)

  def update(self, done: int, step: Optional[int] = None, **values: float) -> None:
    """Redraws the live line at ``done`` steps (at most every REDRAW_SECONDS,
    always on the first and last); off a terminal, a plain line when ``step``
    passed a multiple of ``log_every_steps`` or PLAIN_LINE_SECONDS went by."""
    if self._plain is not None and step is not None:
      self._plain_line(done, step, values)
    if self._line is None:
      return
    now = self._clock()
    if (self._drawn_at is not None and done < self._line.total
        and now - self._drawn_at < REDRAW_SECONDS):
      return
    self._drawn_at = now
    # One column short of the width: a full line would wrap on some terminals.
    text = self._line.text(done, values, width=shutil.get_terminal_size().columns - 1)
    # Spaces, not an escape code, clear what a longer line left behind.
    self.stream.write("\r" + text.ljust(self._width))
    self.stream.flush()
    self._width = len(text)

  def _plain_line(self, done: int, step: int, values: Dict[str, float]) -> None:
    line, written_at, written_step = self._plain
    now = self._clock()
    if written_step is None:  # the epoch's first update: its ETA starts here
      line.text(done, values)
      self._plain[1:] = [now, step]
      return
    if done >= line.total or (step // self._every == written_step // self._every
                              and now - written_at < PLAIN_LINE_SECONDS):
      return  # the epoch's summary line comes next
    print(f"step {step} {line.text(done, values, bar=False)}", file=self.stream, flush=True)
    self._plain[1:] = [now, step]

  def _clear_before_log_line(self, record) -> bool:  # pylint: disable=unused-argument
    """A logging filter that lets every record through after clearing the live line."""
    if self._width:
      self.stream.write("\r" + " " * self._width + "\r")
      self.stream.flush()
      self._width = 0
    return True

  def end(self) -> None:
    """Ends the epoch's live line (the cursor goes to the next line)."""
    for handler in self._log_handlers:
      handler.removeFilter(self._clear_before_log_line)
    self._log_handlers = []
    self._plain = None
    if self._line is not None:
      if self._width:  # else a log line cleared it and left the cursor on a new line
        self.stream.write("\n")
        self.stream.flush()
      self._line = None

  def summary(self, record: Dict, planned: Optional[int], estimated: bool = False) -> None:
    """Prints :func:`epoch_summary` of the epoch's metrics record."""
    if self.enabled:
      print(epoch_summary(record, planned, estimated), file=self.stream, flush=True)


@contextlib.contextmanager
def announced(doing: str, say: Callable[[str], None] = logging.info):
  """Says ``doing`` before a long silent task and how long it took after it."""
  say(f"{doing} ...")
  start = time.monotonic()
  yield
  say(f"{doing}: took {time.monotonic() - start:.1f} s")
