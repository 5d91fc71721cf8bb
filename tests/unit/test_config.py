"""Named configurations and the errors for bad ones."""

import json

import pytest

import configs.base
import configs.big
import configs.cpu_2h
import configs.tiny
import configs.tutorial
from transformer.training import budget
from transformer.config import ConfigError, resume_differences, validate_config
from transformer.model.optimization import WarmupInverseSquareRoot, cooldown_mismatch


@pytest.mark.parametrize("module", [configs.tiny, configs.tutorial, configs.base, configs.big,
                                    configs.cpu_2h])
def test_named_configs_are_valid(module):
  validate_config(module.get_config())


def test_tutorial_config_is_the_tutorials_choices():
  model = configs.tutorial.get_config().model
  assert (model.num_layers, model.d_model, model.dff, model.num_heads) == (4, 128, 512, 8)
  assert (model.head_width, model.positional_layout, model.output_weights) == (
      "full", "concatenated", "untied")
  assert model.layer_norm_epsilon == 1e-3  # Keras' LayerNormalization default
  assert configs.tutorial.get_config().training.label_smoothing == 0.0


def test_base_config_is_the_papers_choices():
  config = configs.base.get_config()
  assert (config.model.num_layers, config.model.d_model, config.model.dff,
          config.model.num_heads) == (6, 512, 2048, 8)
  assert (config.model.head_width, config.model.positional_layout,
          config.model.output_weights) == ("split", "interleaved", "shared")
  assert config.training.label_smoothing == 0.1
  assert config.model.attention_dropout_rate == 0.0
  assert config.model.layer_norm_epsilon == 1e-6  # tensor2tensor's


def _peak_learning_rate(config) -> float:
  """The §5.3 schedule's rate at the end of the warm-up, where it peaks."""
  training = config.training
  schedule = WarmupInverseSquareRoot(config.model.d_model, training.warmup_steps,
                                     training.learning_rate_scale)
  return float(schedule(training.warmup_steps - 1))  # iteration w - 1 is step w


def test_cpu_2h_config_keeps_every_choice_the_paper_fixes():
  config = configs.cpu_2h.get_config()
  assert (config.model.head_width, config.model.positional_layout) == ("split", "interleaved")
  assert config.model.output_weights in ("tied", "shared")
  assert config.model.residual_dropout_on_attention and config.model.dropout_rate > 0
  assert config.model.scale_embeddings and config.model.scale_attention_logits
  assert config.training.label_smoothing == 0.1
  assert config.data.tokens_per_batch > 0  # §5.1 token-budget batches
  assert _peak_learning_rate(config) == pytest.approx(1.5e-3, rel=0.01)  # lab/results/cpu_2h_lr15
  # The cooldown ends at the last step: 656 batches of 2,048 tokens per epoch of
  # the TED training split (lab/results/cpu_2h_cooldown/metrics.jsonl).
  assert config.training.cooldown_steps > 0
  assert cooldown_mismatch(config.training, steps_per_epoch=656) is None


def test_cpu_2h_sized_by_the_clock_trains_the_same_model_with_a_time_budget():
  by_epochs, by_clock = configs.cpu_2h.get_config(), configs.cpu_2h.get_config("clock")
  validate_config(by_clock)
  assert by_clock.training.time_budget_minutes == 115.0
  assert budget.cooldown_epochs(12, by_clock.training.cooldown_fraction) == 4
  for section in ("model", "data"):
    assert by_clock[section].to_dict() == by_epochs[section].to_dict()
  assert _peak_learning_rate(by_clock) == pytest.approx(2e-3, rel=0.001)  # lab/results/cpu_2h_clock_lr20
  with pytest.raises(ValueError, match="choose 'epochs' or 'clock'"):
    configs.cpu_2h.get_config("minutes")


@pytest.mark.parametrize("section, field, value, message", [
    ("model", "num_heads", 7, r"config\.model\.d_model: d_model=32 is not divisible by num_heads=7"),
    ("model", "d_model", -4, r"config\.model\.d_model: must be > 0"),
    ("model", "num_layers", 0, r"config\.model\.num_layers: must be > 0"),
    ("model", "positional_layout", "spiral", r"config\.model\.positional_layout: unknown value 'spiral'"),
    ("model", "head_width", "wide", r"config\.model\.head_width: unknown value 'wide'"),
    ("model", "output_weights", "shared", r"config\.model\.output_weights: 'shared'.*joint"),
    ("model", "dropout_rate", 1.5, r"config\.model\.dropout_rate: must be in \[0, 1\)"),
    ("model", "layer_norm_epsilon", 0.0, r"config\.model\.layer_norm_epsilon: must be > 0, got 0\.0"),
    ("model", "layer_norm_epsilon", -1e-3, r"config\.model\.layer_norm_epsilon: must be > 0"),
    ("data", "tokens_per_batch", 10, r"config\.data\.tokens_per_batch: 10 cannot hold"),
    ("training", "label_smoothing", -0.1, r"config\.training\.label_smoothing"),
    ("training", "learning_rate_scale", 0.0, r"config\.training\.learning_rate_scale: must be > 0"),
    ("training", "steps_per_dispatch", 0, r"config\.training\.steps_per_dispatch: must be > 0"),
])
def test_bad_fields_raise_a_clear_error(section, field, value, message):
  config = configs.tiny.get_config()
  config[section][field] = value
  with pytest.raises(ConfigError, match=message):
    validate_config(config)


@pytest.mark.parametrize("field, value, message", [
    ("num_heads", 7, r"config\.model\.d_model: d_model=32 is not divisible by num_heads=7"),
    ("positional_layout", "spiral", r"config\.model\.positional_layout: unknown value 'spiral'"),
    ("positional_encoding", "rotary", r"config\.model\.positional_encoding: unknown value"),
    ("head_width", "wide", r"config\.model\.head_width: unknown value 'wide'"),
    ("embedding_initializer", "xavier", r"config\.model\.embedding_initializer: unknown"),
    ("dropout_rate", 1.5, r"config\.model\.dropout_rate: must be in \[0, 1\)"),
    ("layer_norm_epsilon", 0.0, r"config\.model\.layer_norm_epsilon: must be > 0, got 0\.0"),
    ("key_dim", -2, r"config\.model\.key_dim: must be >= 0"),
])
def test_a_bad_model_field_is_one_error_on_every_route(field, value, message):
  """One check of the model's settings: the configuration (validate_config),
  the model built from it (from_model_config) and the model built directly
  (Transformer's keyword arguments, config.model's names) say the same."""
  from transformer.model import Transformer  # pylint: disable=g-import-not-at-top
  config = configs.tiny.get_config()
  config.model[field] = value
  with pytest.raises(ConfigError, match=message):
    validate_config(config)
  with pytest.raises(ConfigError, match=message):
    Transformer.from_model_config(config.model, 30, 30)
  with pytest.raises(ConfigError, match=message):
    Transformer(input_vocab_size=30, target_vocab_size=30, **config.model.to_dict())


def test_an_unknown_head_width_is_named_before_the_divisibility_it_would_decide():
  from transformer.model.settings import validate_model  # pylint: disable=g-import-not-at-top
  with pytest.raises(ConfigError, match=r"config\.model\.head_width: unknown value 'wide'"):
    validate_model({"d_model": 32, "num_heads": 7, "head_width": "wide"})


def test_shared_output_weights_need_equal_vocabularies_when_built():
  from transformer.model import Transformer  # pylint: disable=g-import-not-at-top
  model_config = configs.base.get_config().model
  model_config.update(dict(num_layers=1, d_model=16, dff=16, num_heads=2))
  with pytest.raises(ConfigError, match=r"config\.model\.output_weights: 'shared' needs one "
                     r"joint vocabulary, got input_vocab_size=30 and target_vocab_size=31"):
    Transformer.from_model_config(model_config, 30, 31)


def test_resume_counts_a_field_added_after_the_run_began_as_its_default():
  current = json.loads(configs.tiny.get_config().to_json_best_effort())
  stored = json.loads(json.dumps(current))
  del stored["model"]["layer_norm_epsilon"]  # a config.json from before the field
  assert resume_differences(stored, current, built_tokenizer=False) == []
  current["model"]["layer_norm_epsilon"] = 1e-3
  assert resume_differences(stored, current, built_tokenizer=False) == [
      "field model.layer_norm_epsilon was 1e-06, now 0.001"]
  current["data"]["vocab_size"] = 123  # counts only when the tokenizer is built
  assert len(resume_differences(stored, current, built_tokenizer=False)) == 1
  assert len(resume_differences(stored, current, built_tokenizer=True)) == 2
