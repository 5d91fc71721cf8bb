"""The model's settings: ``config.model``'s fields, their defaults, how they resolve, their check.

Each field is the keyword argument of the same name of ``Transformer`` and of every layer
that uses it. The constructors' defaults are the tutorial's, so that its lines build its model;
:func:`paper_settings` (``config.model``'s defaults) are the paper's. Settings left unset
resolve here (:func:`head_size`, :func:`attention_dropout`); :func:`validate_model` is their
one check. This module imports nothing of the package, so that ``model/`` stands alone.
"""

import numbers
from typing import Mapping, Optional

POSITIONAL_LAYOUTS = ("interleaved", "concatenated")
POSITIONAL_ENCODINGS = ("sinusoid", "learned")
HEAD_WIDTHS = ("split", "full")
OUTPUT_WEIGHTS = ("tied", "shared", "untied")
EMBEDDING_INITIALIZERS = ("uniform", "normal")


def paper_settings() -> dict:
  """The paper's base model (Table 3, row "base"): ``config.model``'s defaults."""
  return dict(
      num_layers=6,
      d_model=512,
      num_heads=8,
      dff=2048,
      # §5.4 residual dropout: on every sub-layer output and on the embedding sums.
      dropout_rate=0.1,
      # Dropout on the attention weights. The paper has none; the tutorial passes
      # dropout_rate to keras.layers.MultiHeadAttention, which drops weights.
      attention_dropout_rate=0.0,
      # The paper drops out every sub-layer output (§5.4); the tutorial only the feed-forward's.
      residual_dropout_on_attention=True,
      # "split": each head is d_model / num_heads wide (paper §3.2.2, d_k = d_v = 64).
      # "full": each head is d_model wide (the tutorial's key_dim=d_model).
      head_width="split",
      # If > 0, every head's query, key and value width (d_k = d_v), whatever
      # head_width says (Table 3, row B varies d_k alone); 0 takes it from head_width.
      key_dim=0,
      # "interleaved": sin on even channels, cos on odd (paper §3.5, old tutorial).
      # "concatenated": all sines then all cosines (current tutorial).
      positional_layout="interleaved",
      # "sinusoid": the fixed encoding of §3.5. "learned": a trainable (max_position, d_model)
      # table in its place (Table 3, row E), initialized like the token embeddings.
      positional_encoding="sinusoid",
      # Multiplies the positional encoding before it is added (1.0 in the paper).
      # With scale_embeddings=False, d_model^-0.5 keeps the scaled model's ratio of
      # token embedding to position at the unscaled magnitude (lab/bench/table3.py).
      positional_scale=1.0,
      # §3.4: embeddings × sqrt(d_model) before the positions are added. False: the ablation.
      scale_embeddings=True,
      # §3.2.1: attention logits are QKᵀ/sqrt(d_k). False (logits exactly QKᵀ) is
      # the ablation; honoured in training, cached decoding and beam search.
      scale_attention_logits=True,
      # Every LayerNormalization's ε (§3.1 gives none). 1e-6: the paper's lineage
      # (tensor2tensor). 1e-3: Keras' default, which the tutorial keeps.
      layer_norm_epsilon=1e-6,
      # "uniform": Keras' Embedding default U(-0.05, 0.05) (the tutorial's). "normal":
      # N(0, d_model^-1), the paper's lineage (tensor2tensor); see PositionalEmbedding._table.
      embedding_initializer="uniform",
      # "tied": pre-softmax projection = decoder embedding transposed (§3.4).
      # "shared": one matrix for source embedding, target embedding and output
      #   (the paper's three-way sharing; needs a joint vocabulary).
      # "untied": a separate Dense layer with bias (current tutorial).
      output_weights="tied",
      # Length of the positional-encoding table: the longest sequence (the tutorial's 2048).
      max_position=2048)


def head_size(d_model: int, num_heads: int, head_width: str = "full",
              key_dim: Optional[int] = None) -> int:
  """Every head's width d_k = d_v: ``key_dim`` if > 0 (0 or None: unset), else
  ``d_model / num_heads`` for ``head_width="split"`` (paper §3.2.2) or
  ``d_model`` for ``"full"`` (the tutorial's ``key_dim=d_model``)."""
  if key_dim:
    return key_dim
  return d_model // num_heads if head_width == "split" else d_model


def attention_dropout(dropout_rate: float, attention_dropout_rate: Optional[float]) -> float:
  """The attention weights' dropout; None: ``dropout_rate``, as the tutorial's
  ``MultiHeadAttention(dropout=dropout_rate)``. The paper's is 0."""
  return dropout_rate if attention_dropout_rate is None else attention_dropout_rate


class StoredArguments:
  """A layer's keyword arguments, stored once as attributes of their names;
  ``get_config`` is derived from them. Mixed in before ``keras.layers.Layer``."""

  def store_arguments(self, **arguments) -> None:
    # A tuple: Keras tracks a list attribute as a TrackedList.
    self.argument_names = getattr(self, "argument_names", ()) + tuple(arguments)
    for name, value in arguments.items():
      setattr(self, name, value)

  def arguments_of(self, names) -> dict:
    """The stored arguments called ``names``: what this layer hands to a sub-layer."""
    return {name: getattr(self, name) for name in names}

  def get_config(self):
    return {**super().get_config(), **self.arguments_of(self.argument_names)}


class ConfigError(ValueError):
  """A configuration field has a value the library cannot use."""


def require(condition: bool, field: str, message: str) -> None:
  """Raises :class:`ConfigError` for ``config.<field>`` unless ``condition``."""
  if not condition:
    raise ConfigError(f"config.{field}: {message}")


def require_count(field: str, value, allow_zero: bool = False) -> None:
  """``value`` is an integer > 0 (>= 0 with ``allow_zero``)."""
  require(isinstance(value, numbers.Integral) and not isinstance(value, bool),
          field, f"must be an integer, got {value!r}")
  bound = 0 if allow_zero else 1
  require(value >= bound, field, f"must be {'>= 0' if allow_zero else '> 0'}, got {value}")


def require_rate(field: str, value) -> None:
  require(0.0 <= value < 1.0, field, f"must be in [0, 1), got {value}")


def require_choice(field: str, value, choices) -> None:
  require(value in choices, field,
          f"unknown value {value!r}; choose one of {', '.join(choices)}")


def validate_model(settings: Mapping) -> None:
  """The one check of the model's settings; raises ConfigError naming the first bad one.

  ``settings`` maps ``config.model``'s field names (and the vocabulary sizes) to values;
  only those present and not None are checked, so that ``validate_config``, ``Transformer``
  and a layer built alone, as in the tutorial, check each setting the same way.
  """
  given = {name: value for name, value in settings.items() if value is not None}
  for name in ("num_layers", "d_model", "num_heads", "dff", "max_position"):
    if name in given:
      require_count(f"model.{name}", given[name])
  # Choices first: the divisibility check below reads head_width.
  for name, choices in (("head_width", HEAD_WIDTHS), ("positional_layout", POSITIONAL_LAYOUTS),
                        ("positional_encoding", POSITIONAL_ENCODINGS)):
    if name in given:
      require_choice(f"model.{name}", given[name], choices)
  if {"d_model", "num_heads", "head_width"} <= given.keys():
    require(given["d_model"] % given["num_heads"] == 0 or given["head_width"] == "full",
            "model.d_model", f"d_model={given['d_model']} is not divisible by "
            f"num_heads={given['num_heads']} (needed by head_width='split')")
  if "d_model" in given:
    require(given["d_model"] % 2 == 0, "model.d_model",
            f"must be even for the sin/cos positional encoding, got {given['d_model']}")
  for name in ("dropout_rate", "attention_dropout_rate"):
    if name in given:
      require_rate(f"model.{name}", given[name])
  for name in ("layer_norm_epsilon", "positional_scale"):
    if name in given:
      require(given[name] > 0, f"model.{name}", f"must be > 0, got {given[name]}")
  if "key_dim" in given:
    require_count("model.key_dim", given["key_dim"], allow_zero=True)
  for name, choices in (("output_weights", OUTPUT_WEIGHTS),
                        ("embedding_initializer", EMBEDDING_INITIALIZERS)):
    if name in given:
      require_choice(f"model.{name}", given[name], choices)
  if (given.get("output_weights") == "shared"
      and {"input_vocab_size", "target_vocab_size"} <= given.keys()):
    require(given["input_vocab_size"] == given["target_vocab_size"], "model.output_weights",
            "'shared' needs one joint vocabulary, got "
            f"input_vocab_size={given['input_vocab_size']} and "
            f"target_vocab_size={given['target_vocab_size']}")
