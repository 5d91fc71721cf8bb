"""The JAX engine and :class:`JaxTrainer`: Keras on JAX from shards, no TensorFlow (paper §5).

The TensorFlow engine's model, schedule, smoothing, dropout and loss; its checkpoints'
``model.weights.h5`` loads there (``evaluate.py``); several devices split each batch's rows.
Not here: ``training.length_groups`` (the padded shapes of
:func:`transformer.data.shards.epoch_batches` do its work), ``mixed_float16`` (no loss scaling)."""

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import jax
import keras
import numpy as np

from transformer.data import shards
from transformer.model import losses
from transformer.model import optimization
from transformer.model import Transformer
from transformer.run import files
from transformer.run.progress import plural
from transformer.training import jax_checkpointing
from transformer.training import jax_stacks
from transformer.training import jax_steps
from transformer.training import loop


class JaxEngine:
  """The loop's :class:`transformer.training.engine.Engine` under JAX, on NumPy batches;
  ``devices`` default to the first, ``mixed_precision`` is "none" or "mixed_bfloat16"."""

  def __init__(self, config, *, input_vocab_size: int, target_vocab_size: int,
               model_dir: Path, devices=None, mixed_precision: str = "none"):
    if mixed_precision not in ("none", "mixed_bfloat16"):
      raise ValueError(f"mixed precision {mixed_precision!r} is not supported under JAX; "
                       "use none or mixed_bfloat16")
    self.config = config
    self.devices = list(devices or jax.devices()[:1])
    distribution = (keras.distribution.DataParallel(devices=self.devices)
                    if len(self.devices) > 1 else None)
    keras.distribution.set_distribution(distribution)
    keras.mixed_precision.set_global_policy(
        "float32" if mixed_precision == "none" else mixed_precision)
    jax_steps.set_random_seed(int(config.training.seed))
    self.model = Transformer.from_model_config(config.model, input_vocab_size, target_vocab_size)
    self.model.build(((None, None), (None, None)))
    self.optimizer = optimization.make_optimizer(config)
    # make_optimizer's WarmupInverseSquareRoot: its cooldown is the step's input.
    self._schedule = self.optimizer._learning_rate  # pylint: disable=protected-access
    self.optimizer.build(self.model.trainable_variables)
    self._steps = jax_steps.DeviceSteps(
        self.model, self.optimizer, self._schedule, self.devices, distribution,
        float(config.training.label_smoothing), int(config.training.steps_per_dispatch))
    self._step = 0
    self.checkpoints = jax_checkpointing.Checkpoints(
        model_dir, self.model, self.optimizer, config.training.keep_checkpoints)

  @property
  def step(self) -> int:
    """Counted on the host: the optimizer's counter would wait for the devices."""
    return self._step

  def learning_rate(self, step: int) -> float:
    return self._schedule.rate_on_host(step)

  def describe(self) -> str:
    return plural(len(self.devices), f"{self.devices[0].platform} device")

  def _batches(self, split: shards.Split, seed: int, shuffle: bool):
    return shards.epoch_batches(split, self.config.data, seed=seed, shuffle=shuffle,
                                rows_multiple=len(self.devices))

  def epoch_batches(self, train_data: shards.Split, epoch: int, skip: int,
                    length: int) -> jax_stacks.EpochStacks:
    del length  # known from the batches themselves
    seed = shards.epoch_seed(int(self.config.training.seed), epoch)
    batches = jax_stacks.grouped_by_shape(self._batches(train_data, seed, shuffle=True))
    return jax_stacks.EpochStacks(batches, skip, self._steps)

  def train(self, chunk):
    steps, stack = chunk
    self._step += steps
    return (steps,) + self._steps.train_stack(stack)

  def read(self, trained: List) -> List[Tuple[float, float, float]]:
    return [tuple(float(value) for value in sums)
            for sums in jax.device_get([sums for _, sums, _ in trained])]

  def non_finite(self, trained) -> Tuple[int, float]:
    steps, _, step_losses = trained
    step_losses = np.asarray(jax.device_get(step_losses))[:steps]
    bad = int(np.argmin(np.isfinite(step_losses)))
    return bad, float(step_losses[bad])

  def evaluate(self, validation: shards.Split) -> losses.TokenMetrics:
    return self._steps.evaluate(self._batches(validation, 0, shuffle=False))

  def set_cooldown(self, steps: int, end_step: int) -> None:
    self._steps.set_cooldown(steps, end_step)

  def agree(self, seconds: float) -> float:
    return seconds  # one process

  def save(self, state: Dict) -> None:
    values = jax.device_get(self._steps.values)  # the next stack donates the device buffers
    self.checkpoints.save(self.step, lambda: self._steps.write_variables(values),
                          values[2], values[1], state)

  def restore(self) -> Optional[Dict]:
    state = self.checkpoints.restore()
    if state is not None:
      self._steps.read_variables()
      self._step = int(self.optimizer.iterations.numpy())
    return state

  def latest_checkpoint(self) -> Optional[Path]:
    return self.checkpoints.latest()

  def poll(self) -> None:
    self.checkpoints.poll()

  def finish(self) -> None:
    self.checkpoints.wait()

  def final_weights(self, path: Path) -> Path:
    """Writes the trained weights to ``path`` (a ``.weights.h5``), whole or not at all."""
    self.checkpoints.wait()
    self._steps.write_variables()
    with files.staged(path) as partial:
      self.model.save_weights(str(partial))
    return path


class JaxTrainer(loop.Trainer):
  """:class:`transformer.training.loop.Trainer` over a :class:`JaxEngine`."""

  def __init__(self, config, *, input_vocab_size: int, target_vocab_size: int,
               model_dir: Path, log_every_steps: int = 100, progress: bool = True,
               **engine_options):
    engine = JaxEngine(config, input_vocab_size=input_vocab_size,
                       target_vocab_size=target_vocab_size, model_dir=Path(model_dir),
                       **engine_options)
    super().__init__(config, engine, model_dir=Path(model_dir),
                     log_every_steps=log_every_steps, progress=progress)
