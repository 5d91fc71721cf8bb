"""Configuration: every field the library reads, its default, and validation.

Named configurations in ``configs/`` start from :func:`default_config` and change
what differs. They are ``ml_collections.ConfigDict`` objects, so that ``train.py``
takes ``--config=configs/tutorial.py --config.model.d_model=256`` (the
convention of Google research code). Where the tutorial and the paper differ,
the field that selects between them says so. The model's fields live with the
model, in :mod:`transformer.model.settings`.
"""

import difflib
import json
from pathlib import Path
from typing import Optional

import ml_collections

from transformer.model.settings import ConfigError, paper_settings, validate_model
from transformer.model.settings import require, require_choice, require_count, require_rate

# Where the commands look for the data (README, Quick start) by default.
SHARED_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
# The TED HRLR folder's file suffix of each TFDS split name (pt.dev, en.dev...).
SPLIT_FILE_SUFFIX = {"train": "train", "validation": "dev", "test": "test"}


def default_config() -> ml_collections.ConfigDict:
  """The paper's base model (Table 3, row "base") with the tutorial's data set-up."""
  config = ml_collections.ConfigDict()

  config.model = ml_collections.ConfigDict(paper_settings())

  config.data = ml_collections.ConfigDict()
  # Longest tokenized sentence kept (tokens, [START]/[END] included).
  config.data.max_tokens = 128
  # Sentences per batch, used when tokens_per_batch is 0.
  config.data.batch_size = 64
  # Paper §5.1: batches of about 25,000 source + 25,000 target tokens (0: batch_size).
  config.data.tokens_per_batch = 0
  # Group sentences of similar length before batching (paper §5.1); with batch_size
  # batches it slows learning per step (lab/results/learning_parity/).
  config.data.bucketing = False
  # Explicit length buckets, e.g. (24, 48, 80, 128), the last max_tokens: batches
  # padded to their bucket's length, one shape a bucket (docs/data.md).
  config.data.bucket_lengths = ()
  config.data.shuffle_buffer = 20000
  # "separate": one WordPiece vocabulary per language (tutorial).
  # "joint": one vocabulary over both languages (needed by output_weights="shared").
  config.data.vocabulary = "separate"
  config.data.vocab_size = 8000

  config.training = ml_collections.ConfigDict()
  # §5.3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).
  config.training.warmup_steps = 4000
  # Multiplies the whole §5.3 schedule (1.0 in the paper); the peak learning
  # rate is learning_rate_scale * (d_model * warmup_steps)^-0.5.
  config.training.learning_rate_scale = 1.0
  # Not in the paper: if > 0, the rate falls linearly to zero over the last
  # cooldown_steps updates before cooldown_end_step (the run's last step, set
  # explicitly so that a shorter rerun keeps the schedule).
  config.training.cooldown_steps = 0
  config.training.cooldown_end_step = 0
  # Not in the paper: if > 0, as many whole epochs (at most `epochs`) as fit in
  # this many minutes, the rate falling to zero over the last cooldown_fraction
  # of them (transformer/training/budget.py).
  config.training.time_budget_minutes = 0.0
  config.training.cooldown_fraction = 0.0
  config.training.adam_beta_1 = 0.9
  config.training.adam_beta_2 = 0.98
  config.training.adam_epsilon = 1e-9
  # §5.4: label smoothing eps_ls = 0.1. The tutorial uses none (0.0).
  config.training.label_smoothing = 0.1
  config.training.epochs = 20
  # If > 0, stop after this many optimizer steps (overrides epochs).
  config.training.train_steps = 0
  # Steps from one checkpoint to the next; an epoch's end also saves one.
  config.training.checkpoint_every_steps = 1000
  config.training.keep_checkpoints = 5
  config.training.seed = 0
  # Compute each batch as this many sub-batches of similar length, each cut to
  # its longest sentence (transformer/training/tf_step.py): the same gradient on
  # fewer padded positions.
  config.training.length_groups = 1
  # JAX trainer only: optimizer steps per call of the compiled function (a
  # jax.lax.scan over batches of one shape), to pay the host's cost per call once.
  config.training.steps_per_dispatch = 1

  config.decoding = ml_collections.ConfigDict()
  # §6.1: beam size 4, length penalty alpha 0.6, output length input + 50.
  config.decoding.beam_size = 4
  config.decoding.length_penalty = 0.6
  config.decoding.extra_length = 50
  return config


def validate_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Checks every field; raises ConfigError naming the first bad one."""
  validate_model(config.model.to_dict())
  require_choice("data.vocabulary", config.data.vocabulary, ("separate", "joint"))
  require(config.model.output_weights != "shared" or config.data.vocabulary == "joint",
          "model.output_weights",
          "'shared' (three-way weight sharing) needs data.vocabulary='joint'")
  for name in ("max_tokens", "batch_size", "vocab_size"):
    require_count(f"data.{name}", config.data[name])
  require_count("data.tokens_per_batch", config.data.tokens_per_batch, allow_zero=True)
  require(config.data.tokens_per_batch == 0
          or config.data.tokens_per_batch >= config.data.max_tokens,
          "data.tokens_per_batch",
          f"{config.data.tokens_per_batch} cannot hold one sentence of "
          f"max_tokens={config.data.max_tokens}")
  _validate_bucket_lengths(config.data)
  require(config.data.max_tokens <= config.model.max_position, "data.max_tokens",
          f"{config.data.max_tokens} exceeds model.max_position={config.model.max_position}")
  training = config.training
  require_count("training.warmup_steps", training.warmup_steps)
  require(training.learning_rate_scale > 0, "training.learning_rate_scale",
          f"must be > 0, got {training.learning_rate_scale}")
  require_count("training.cooldown_steps", training.cooldown_steps, allow_zero=True)
  require_count("training.cooldown_end_step", training.cooldown_end_step, allow_zero=True)
  require(training.cooldown_steps == 0
          or training.cooldown_end_step >= training.cooldown_steps,
          "training.cooldown_end_step",
          f"{training.cooldown_end_step} must be >= cooldown_steps="
          f"{training.cooldown_steps} (the step the rate reaches zero)")
  require_count("training.epochs", training.epochs)
  require_count("training.train_steps", training.train_steps, allow_zero=True)
  require(training.time_budget_minutes >= 0, "training.time_budget_minutes",
          f"must be >= 0, got {training.time_budget_minutes}")
  require(0 <= training.cooldown_fraction < 1, "training.cooldown_fraction",
          f"must be in [0, 1), got {training.cooldown_fraction}")
  if training.time_budget_minutes:
    require(training.train_steps == 0 and training.cooldown_steps == 0,
            "training.time_budget_minutes",
            "plans the run's length and its cooldown itself; set training.train_steps "
            "and training.cooldown_steps to 0")
  for name in ("checkpoint_every_steps", "keep_checkpoints", "length_groups",
               "steps_per_dispatch"):
    require_count(f"training.{name}", training[name])
  require_rate("training.label_smoothing", training.label_smoothing)
  require_count("decoding.beam_size", config.decoding.beam_size)
  require_count("decoding.extra_length", config.decoding.extra_length, allow_zero=True)
  require(config.decoding.length_penalty >= 0, "decoding.length_penalty",
          f"must be >= 0, got {config.decoding.length_penalty}")
  return config


def _validate_bucket_lengths(data) -> None:
  lengths = tuple(data.bucket_lengths)
  if not lengths:
    return
  require(all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in lengths)
          and all(a < b for a, b in zip(lengths, lengths[1:])), "data.bucket_lengths",
          f"must be positive whole numbers in increasing order, got {lengths}")
  require(lengths[-1] == data.max_tokens, "data.bucket_lengths",
          f"the last, {lengths[-1]}, must be data.max_tokens={data.max_tokens}: sentences are "
          "trimmed to max_tokens and the longest bucket must hold them, no longer")


# Fields that shape the model's weights (and every model.* one): a checkpoint
# cannot be resumed with other values.
_VOCAB_FIELDS = ("data.vocabulary", "data.vocab_size")
# Fields whose state is checkpointed (the time budget's plan).
_RUN_FIELDS = ("training.time_budget_minutes", "training.cooldown_fraction")


def _flatten(d, prefix=""):
  out = {}
  for key, value in d.items():
    name = f"{prefix}{key}"
    if isinstance(value, dict):
      out.update(_flatten(value, name + "."))
    else:
      out[name] = value
  return out


def resume_differences(stored: dict, current: dict, built_tokenizer: bool):
  """Fields that must not change on resume and did: ["field a.b was 1, now 2", ...]
  between a run's ``config.json`` (``stored``; a field absent counts as its
  default, the behaviour before it) and ``current``; the vocabulary fields count
  only when the tokenizer is built from them."""
  defaults = _flatten(json.loads(default_config().to_json_best_effort()))
  old, new = {**defaults, **_flatten(stored)}, _flatten(current)
  names = [n for n in sorted(set(old) | set(new))
           if n.startswith("model.") or n in _RUN_FIELDS
           or (built_tokenizer and n in _VOCAB_FIELDS)]
  return [f"field {n} was {old.get(n, '<absent>')!r}, now {new.get(n, '<absent>')!r}"
          for n in names if old.get(n) != new.get(n)]


def unknown_field(name: str) -> Optional[str]:
  """None if ``name`` ("training.train_steps") is a configuration field, else
  a message naming it and the closest fields (difflib), for a typo'd override."""
  fields = sorted(_flatten(json.loads(default_config().to_json_best_effort())))
  if name in fields or any(f.startswith(name + ".") for f in fields):
    return None
  closest = difflib.get_close_matches(name, fields, n=3, cutoff=0.6)
  hint = (f"did you mean {' or '.join(closest)}?" if closest
          else "the fields are listed in transformer/config.py")
  return f"--config.{name}: no such configuration field; {hint}"
