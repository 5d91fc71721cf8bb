"""Configuration: every field the library reads, its default, and validation.

Named configurations in ``configs/`` start from :func:`default_config` and change
what differs. Configurations are ``ml_collections.ConfigDict`` objects so that
``train.py`` can take ``--config=configs/tutorial.py --config.model.d_model=256``
(``ml_collections.config_flags``, the convention of Google research code and the
TF Model Garden): a named file plus typed command-line overrides of any field.

Where the TensorFlow tutorial and the paper differ, the field that selects
between them says so.

One name per setting: each ``config.model`` field is the keyword argument of
the same name of ``Transformer`` (``Transformer.from_model_config`` passes the
section as it is) and of every layer that uses it, down to
``PositionalEmbedding`` and ``MultiHeadAttention``; each layer stores its
arguments once and derives ``get_config`` from them. The constructors'
defaults are the tutorial's, so that its lines build its model; this file's
defaults are the paper's. :func:`validate_model` is the one check of the
model's settings, on every route: :func:`validate_config` calls it before
anything is loaded, ``Transformer`` whenever a model is built.
"""

import difflib
import json
import numbers
from pathlib import Path
from typing import Mapping, Optional

import ml_collections

POSITIONAL_LAYOUTS = ("interleaved", "concatenated")
POSITIONAL_ENCODINGS = ("sinusoid", "learned")
HEAD_WIDTHS = ("split", "full")
OUTPUT_WEIGHTS = ("tied", "shared", "untied")
EMBEDDING_INITIALIZERS = ("uniform", "normal")
# Where the commands look for the data by default: beside this repository
# (README, Quick start; the TED HRLR files and the tutorial's tokenizer).
SHARED_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
# The TED HRLR folder's file suffix of each TFDS split name (pt.dev, en.dev...).
SPLIT_FILE_SUFFIX = {"train": "train", "validation": "dev", "test": "test"}


def default_config() -> ml_collections.ConfigDict:
  """The paper's base model (Table 3, row "base") with the tutorial's data set-up."""
  config = ml_collections.ConfigDict()

  config.model = ml_collections.ConfigDict()
  config.model.num_layers = 6
  config.model.d_model = 512
  config.model.num_heads = 8
  config.model.dff = 2048
  # §5.4 residual dropout: applied to every sub-layer output and to the
  # embedding sums.
  config.model.dropout_rate = 0.1
  # Dropout on the attention weights. The paper has none; the tutorial passes
  # dropout_rate to keras.layers.MultiHeadAttention, which drops weights.
  config.model.attention_dropout_rate = 0.0
  # The paper drops out every sub-layer output (§5.4). The tutorial only drops
  # out the feed-forward output (its attention blocks add the raw MHA output).
  config.model.residual_dropout_on_attention = True
  # "split": each head is d_model / num_heads wide (paper §3.2.2, d_k = d_v = 64).
  # "full": each head is d_model wide (the tutorial's key_dim=d_model).
  config.model.head_width = "split"
  # If > 0, every head's query, key and value width (d_k = d_v), whatever
  # head_width says (Table 3, row B varies d_k alone); 0 takes it from head_width.
  config.model.key_dim = 0
  # "interleaved": sin on even channels, cos on odd (paper §3.5, old tutorial).
  # "concatenated": all sines then all cosines (current tutorial).
  config.model.positional_layout = "interleaved"
  # "sinusoid": the fixed encoding of §3.5. "learned": a trainable
  # (max_position, d_model) table added in its place (Table 3, row E; the paper
  # cites Gehring et al. 2017), initialized like the token embeddings.
  config.model.positional_encoding = "sinusoid"
  # Multiplies the positional encoding before it is added (1.0 in the paper).
  # With scale_embeddings=False, d_model^-0.5 keeps the scaled model's ratio of
  # token embedding to position at the unscaled magnitude (lab/bench/table3.py).
  config.model.positional_scale = 1.0
  # §3.4: embeddings are multiplied by sqrt(d_model) before the positional
  # encoding is added. False is the ablation.
  config.model.scale_embeddings = True
  # §3.2.1: attention logits are QKᵀ/sqrt(d_k). False (logits exactly QKᵀ) is
  # the ablation; honoured in training, cached decoding and beam search.
  config.model.scale_attention_logits = True
  # The ε added to the variance in every LayerNormalization (§3.1 names the
  # layer but no ε). 1e-6: the paper's lineage (tensor2tensor). 1e-3: Keras'
  # default, which the tutorial keeps. A config.json without the field means
  # 1e-6 (tests/unit/test_model.py::test_model_config_without_layer_norm_epsilon_*).
  config.model.layer_norm_epsilon = 1e-6
  # Token embedding initializer. "uniform": Keras' Embedding default
  # U(-0.05, 0.05) (the tutorial's). "normal": N(0, sigma = d_model^-0.5), the
  # paper's lineage (tensor2tensor), which makes x sqrt(d_model) unit-variance
  # and tied output logits unit-variance. notebooks/scaling.ipynb measures both.
  config.model.embedding_initializer = "uniform"
  # "tied": pre-softmax projection = decoder embedding transposed (§3.4).
  # "shared": one matrix for source embedding, target embedding and output
  #   (the paper's three-way sharing; needs a joint vocabulary).
  # "untied": a separate Dense layer with bias (current tutorial).
  config.model.output_weights = "tied"
  # Length of the positional-encoding table: the longest sequence the model
  # can ever see (the tutorial uses 2048).
  config.model.max_position = 2048

  config.data = ml_collections.ConfigDict()
  # Longest tokenized sentence kept (tokens, [START]/[END] included).
  config.data.max_tokens = 128
  # Sentences per batch, used when tokens_per_batch is 0.
  config.data.batch_size = 64
  # Paper §5.1: batches of about 25,000 source + 25,000 target tokens.
  # 0 means batches of batch_size sentences.
  config.data.tokens_per_batch = 0
  # Group sentences of similar length before batching (paper §5.1). With
  # batches of batch_size sentences this slows learning per step
  # (lab/results/learning_parity/); training.length_groups saves the padding's cost
  # without it.
  config.data.bucketing = False
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
  # cooldown_steps updates before cooldown_end_step (transformer/model/optimization.py),
  # for runs with a fixed budget. Set the end step to the run's last step; it is
  # not taken from epochs, so a shorter rerun keeps the same schedule.
  config.training.cooldown_steps = 0
  config.training.cooldown_end_step = 0
  # Not in the paper: if > 0, the run trains as many whole epochs (at most
  # `epochs`) as fit in this many minutes of training, and the rate falls to
  # zero over the last cooldown_fraction of them (transformer/training/budget.py); the
  # cooldown is then planned during the run, so cooldown_steps stays 0.
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
  # its longest sentence (transformer/training/step.py): the same gradient on fewer
  # padded positions. Pays with random batches; 1 computes batches as they are.
  config.training.length_groups = 1

  config.decoding = ml_collections.ConfigDict()
  # §6.1: beam size 4, length penalty alpha 0.6, output length input + 50.
  config.decoding.beam_size = 4
  config.decoding.length_penalty = 0.6
  config.decoding.extra_length = 50
  return config


class ConfigError(ValueError):
  """A configuration field has a value the library cannot use."""


def _require(condition: bool, field: str, message: str) -> None:
  if not condition:
    raise ConfigError(f"config.{field}: {message}")


def _positive_int(field: str, value, allow_zero: bool = False) -> None:
  _require(isinstance(value, numbers.Integral) and not isinstance(value, bool),
           field, f"must be an integer, got {value!r}")
  bound = 0 if allow_zero else 1
  _require(value >= bound, field,
           f"must be {'>= 0' if allow_zero else '> 0'}, got {value}")


def _rate(field: str, value) -> None:
  _require(0.0 <= value < 1.0, field, f"must be in [0, 1), got {value}")


def _choice(field: str, value, choices) -> None:
  _require(value in choices, field,
           f"unknown value {value!r}; choose one of {', '.join(choices)}")


def validate_model(settings: Mapping) -> None:
  """The one check of the model's settings; raises ConfigError naming the first bad one.

  ``settings`` maps ``config.model``'s field names, which are also the keyword
  arguments of :class:`transformer.model.Transformer` and of its layers, to
  values; only the settings present (and not None) are checked, so that
  :func:`validate_config` (the whole ``config.model``, before any data is
  read), ``Transformer`` (where the configuration's route and direct
  construction meet) and the embedding layer built alone, as the tutorial
  does, check each setting the same way. ``input_vocab_size`` and
  ``target_vocab_size``, when present, are checked against ``output_weights``.
  """
  given = {name: value for name, value in settings.items() if value is not None}
  for name in ("num_layers", "d_model", "num_heads", "dff", "max_position"):
    if name in given:
      _positive_int(f"model.{name}", given[name])
  # Choices first: the divisibility check below reads head_width.
  for name, choices in (("head_width", HEAD_WIDTHS), ("positional_layout", POSITIONAL_LAYOUTS),
                        ("positional_encoding", POSITIONAL_ENCODINGS)):
    if name in given:
      _choice(f"model.{name}", given[name], choices)
  if {"d_model", "num_heads", "head_width"} <= given.keys():
    _require(given["d_model"] % given["num_heads"] == 0 or given["head_width"] == "full",
             "model.d_model", f"d_model={given['d_model']} is not divisible by "
             f"num_heads={given['num_heads']} (needed by head_width='split')")
  if "d_model" in given:
    _require(given["d_model"] % 2 == 0, "model.d_model",
             f"must be even for the sin/cos positional encoding, got {given['d_model']}")
  for name in ("dropout_rate", "attention_dropout_rate"):
    if name in given:
      _rate(f"model.{name}", given[name])
  if "layer_norm_epsilon" in given:
    _require(given["layer_norm_epsilon"] > 0, "model.layer_norm_epsilon",
             f"must be > 0, got {given['layer_norm_epsilon']}")
  if "positional_scale" in given:
    _require(given["positional_scale"] > 0, "model.positional_scale",
             f"must be > 0, got {given['positional_scale']}")
  if "key_dim" in given:
    _positive_int("model.key_dim", given["key_dim"], allow_zero=True)
  for name, choices in (("output_weights", OUTPUT_WEIGHTS),
                        ("embedding_initializer", EMBEDDING_INITIALIZERS)):
    if name in given:
      _choice(f"model.{name}", given[name], choices)
  if (given.get("output_weights") == "shared"
      and {"input_vocab_size", "target_vocab_size"} <= given.keys()):
    _require(given["input_vocab_size"] == given["target_vocab_size"], "model.output_weights",
             "'shared' needs one joint vocabulary, got "
             f"input_vocab_size={given['input_vocab_size']} and "
             f"target_vocab_size={given['target_vocab_size']}")


def validate_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Checks every field; raises ConfigError naming the first bad one."""
  validate_model(config.model.to_dict())
  _choice("data.vocabulary", config.data.vocabulary, ("separate", "joint"))
  _require(config.model.output_weights != "shared" or config.data.vocabulary == "joint",
           "model.output_weights",
           "'shared' (three-way weight sharing) needs data.vocabulary='joint'")
  for name in ("max_tokens", "batch_size", "vocab_size"):
    _positive_int(f"data.{name}", config.data[name])
  _positive_int("data.tokens_per_batch", config.data.tokens_per_batch, allow_zero=True)
  _require(config.data.tokens_per_batch == 0
           or config.data.tokens_per_batch >= config.data.max_tokens,
           "data.tokens_per_batch",
           f"{config.data.tokens_per_batch} cannot hold one sentence of "
           f"max_tokens={config.data.max_tokens}")
  _require(config.data.max_tokens <= config.model.max_position, "data.max_tokens",
           f"{config.data.max_tokens} exceeds model.max_position={config.model.max_position}")
  training = config.training
  _positive_int("training.warmup_steps", training.warmup_steps)
  _require(training.learning_rate_scale > 0, "training.learning_rate_scale",
           f"must be > 0, got {training.learning_rate_scale}")
  _positive_int("training.cooldown_steps", training.cooldown_steps, allow_zero=True)
  _positive_int("training.cooldown_end_step", training.cooldown_end_step, allow_zero=True)
  _require(training.cooldown_steps == 0
           or training.cooldown_end_step >= training.cooldown_steps,
           "training.cooldown_end_step",
           f"{training.cooldown_end_step} must be >= cooldown_steps="
           f"{training.cooldown_steps} (the step the rate reaches zero)")
  _positive_int("training.epochs", training.epochs)
  _positive_int("training.train_steps", training.train_steps, allow_zero=True)
  _require(training.time_budget_minutes >= 0, "training.time_budget_minutes",
           f"must be >= 0, got {training.time_budget_minutes}")
  _require(0 <= training.cooldown_fraction < 1, "training.cooldown_fraction",
           f"must be in [0, 1), got {training.cooldown_fraction}")
  if training.time_budget_minutes:
    _require(training.train_steps == 0 and training.cooldown_steps == 0,
             "training.time_budget_minutes",
             "plans the run's length and its cooldown itself; set training.train_steps "
             "and training.cooldown_steps to 0")
  for name in ("checkpoint_every_steps", "keep_checkpoints", "length_groups"):
    _positive_int(f"training.{name}", training[name])
  _rate("training.label_smoothing", training.label_smoothing)
  _positive_int("decoding.beam_size", config.decoding.beam_size)
  _positive_int("decoding.extra_length", config.decoding.extra_length, allow_zero=True)
  _require(config.decoding.length_penalty >= 0, "decoding.length_penalty",
           f"must be >= 0, got {config.decoding.length_penalty}")
  return config


# Fields that shape the model's weights: a checkpoint cannot be resumed with
# other values.
_MODEL_SECTIONS = ("model",)
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
  """Fields that must not change on resume and did: ["field a.b was 1, now 2", ...].

  ``stored`` is a run's ``config.json``, ``current`` the configuration it is
  resumed with (both as dicts). The vocabulary fields count only when the
  tokenizer is built from them. A field the library gained after the run began
  is absent from ``stored``; the run was trained with its default (new fields
  default to the behaviour before them), so absent counts as the default.
  """
  defaults = _flatten(json.loads(default_config().to_json_best_effort()))
  old, new = {**defaults, **_flatten(stored)}, _flatten(current)
  names = [n for n in sorted(set(old) | set(new))
           if n.split(".")[0] in _MODEL_SECTIONS or n in _RUN_FIELDS
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
