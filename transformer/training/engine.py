"""What the training loop (:mod:`transformer.training.loop`) needs of an engine:
``tf_engine.TensorFlowEngine`` and ``jax_engine.JaxEngine`` implement it."""

from typing import Dict, Iterator, List, Optional, Protocol, Tuple

from transformer.model import losses


class EpochBatches(Protocol):
  """One epoch's batches as an engine trains them."""

  length: int  # batches in the whole epoch

  def chunks(self, last: int) -> Iterator[Tuple[int, object]]:
    """``(steps, chunk)`` from the resumed position up to batch ``last``; what
    is compiled ahead is compiled by the time it returns."""


class Engine(Protocol):
  """What :class:`transformer.training.loop.Trainer` needs of an engine."""

  model: object

  @property
  def step(self) -> int:
    """Optimizer steps taken, counted on the host."""

  def learning_rate(self, step: int) -> float:
    """The schedule's rate at ``step``, on the host."""

  def describe(self) -> str:
    """What trains, for the start line ("1 cpu device", "2 replicas")."""

  def epoch_batches(self, train_data, epoch: int, skip: int, length: int) -> EpochBatches:
    """Epoch ``epoch`` (from 0) of ``train_data`` after its first ``skip``
    batches; ``length``, the epoch's batches, is 0 when not known yet."""

  def train(self, chunk):
    """Trains on ``chunk``; returns its sums, not read yet (see :meth:`read`)."""

  def read(self, trained: List) -> List[Tuple[float, float, float]]:
    """``(loss_sum, tokens, correct)`` of each of :meth:`train`'s results."""

  def non_finite(self, trained) -> Tuple[int, float]:
    """The offset in its chunk of the first step whose loss is NaN/Inf, and that loss."""

  def evaluate(self, validation) -> losses.TokenMetrics:
    """The sums over the validation batches, without dropout."""

  def set_cooldown(self, steps: int, end_step: int) -> None:
    """Gives the learning-rate schedule a cooldown (no step is compiled again)."""

  def agree(self, seconds: float) -> float:
    """The mean of every worker's ``seconds``, so that all plan alike."""

  def save(self, state: Dict) -> None:
    """Writes a checkpoint of the model, the optimizer and the loop's ``state``."""

  def poll(self) -> None:
    """Raises a failed background write's error, if any."""

  def finish(self) -> None:
    """Waits for the writes in progress, and removes what only training needed."""

  def restore(self) -> Optional[Dict]:
    """Restores the newest intact checkpoint; returns the loop's state saved with
    it (``epoch_sums`` None when the checkpoint predates them), or None."""

  def latest_checkpoint(self):
    """The newest checkpoint, or None."""
