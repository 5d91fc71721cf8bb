"""train.py's checks of its flags, configuration and run folder, before any work: without
TensorFlow, so that a bad command line answers at once, and a run folder that another
configuration, tokenizer or trainer wrote is refused saying why (not failing at restore)."""

import dataclasses
import json
from pathlib import Path
from typing import Optional

from transformer import config as config_lib
from transformer.run import run_folder
from transformer.run import runtime
from transformer.data import shards
from transformer.run.errors import DataError, UsageError
from transformer.training import tf_distribute


@dataclasses.dataclass
class RunOptions:
  """train.py's flags besides --config (see ``python train.py --help``)."""
  data: str
  tokenizer: str
  tokenizer_cache_dir: Optional[str]
  strategy: str
  tpu: Optional[str]
  mixed_precision: str
  jit_compile: bool
  train_examples: int
  validation_examples: int
  eval_bleu_every_epochs: int
  bleu_examples: int
  bleu_method: str
  export: bool
  log_every_steps: int
  compilation_cache: str
  verbose: bool


def check_run(config, options: RunOptions, model_dir: Path) -> None:
  """Every check that needs no TensorFlow; raises UsageError."""
  try:
    config_lib.validate_config(config)
  except config_lib.ConfigError as e:
    raise UsageError(f"invalid configuration: {e}") from e
  tf_distribute.check_strategy_flags(options.strategy, options.tpu, options.mixed_precision)
  if on_shards(options):
    check_shard_flags(config, options)  # refuses them under the TensorFlow backend
  elif options.compilation_cache != runtime.COMPILATION_CACHE_AUTO:
    raise UsageError("--compilation_cache is JAX's: it applies under KERAS_BACKEND=jax with a "
                     "prepare.py folder as --data")
  elif runtime.keras_backend() != "tensorflow":
    raise UsageError(f"under KERAS_BACKEND={runtime.keras_backend()} train.py trains from "
                     f"prepared shards, and --data={options.data} is not a prepare.py folder; "
                     "run prepare.py first (docs/training.md), or use KERAS_BACKEND=tensorflow")
  elif options.data != "tfds":  # tfds without tensorflow-datasets: train.py's sources check
    data_dir = Path(options.data)
    missing = [name for name in ("pt.train", "en.train", "pt.dev", "en.dev")
               if not (data_dir / name).is_file()]
    if missing:
      raise UsageError(f"--data={options.data}: not a folder with the TED HRLR files "
                       f"(missing {', '.join(missing)}); pass the folder or 'tfds'")
  if (options.tokenizer != "build" and not on_shards(options)
      and not (Path(options.tokenizer) / "saved_model.pb").is_file()):
    raise UsageError(f"--tokenizer={options.tokenizer}: no tokenizer SavedModel there "
                     "(no saved_model.pb); pass the path of one, e.g. "
                     "../shared/data/tutorial_tokenizer, or --tokenizer=build")
  for name, low in (("train_examples", 0), ("validation_examples", 0),
                    ("eval_bleu_every_epochs", 0), ("bleu_examples", -1), ("log_every_steps", 1)):
    if getattr(options, name) < low:
      raise UsageError(f"--{name} must be >= {low}, got {getattr(options, name)}")
  if options.eval_bleu_every_epochs and options.bleu_examples == 0:
    raise UsageError("--eval_bleu_every_epochs needs BLEU, but --bleu_examples=0 disables it")
  if model_dir.exists() and not model_dir.is_dir():
    raise UsageError(f"--model_dir={model_dir} exists and is not a folder")
  # Resuming with a different model would fail at restore; say why up front.
  config_file = model_dir / run_folder.CONFIG_FILE
  checkpoint_dir = run_folder.checkpoint_dir(model_dir)
  tensorflow_checkpoints = ((checkpoint_dir / "checkpoint").is_file()
                            or any(checkpoint_dir.glob("ckpt-*.index")))
  keras_checkpoints = any(checkpoint_dir.glob("step-*"))
  # What the folder is, not which checkpoints are left (a folder before the record: those).
  trainer = "jax" if on_shards(options) else "tensorflow"
  try:
    recorded = run_folder.trained_with(model_dir).get("trainer")
  except DataError as e:
    raise UsageError(str(e)) from e
  recorded = recorded or ("jax" if keras_checkpoints else
                          "tensorflow" if tensorflow_checkpoints else trainer)
  if recorded != trainer:
    other = {"tensorflow": "TensorFlow", "jax": "Keras-on-JAX"}[recorded]
    raise UsageError(f"{model_dir} was trained by the {other} trainer; this command would "
                     "train with the other one: use a new --model_dir")
  check_records_have_a_checkpoint(model_dir, tensorflow_checkpoints or keras_checkpoints)
  if config_file.is_file() and (tensorflow_checkpoints or keras_checkpoints):
    try:
      stored = run_folder.read_run_config(config_file)
    except DataError as e:
      raise UsageError(f"{e}; restore it, or delete it to resume with this command's "
                       "configuration") from e
    current = json.loads(config.to_json_best_effort())
    differences = config_lib.resume_differences(stored, current, options.tokenizer == "build")
    if differences:
      raise UsageError(f"checkpoint in {model_dir} was trained with a different config: "
                       + "; ".join(differences) + "; use a new --model_dir")
    stored_tokenizer = model_dir / run_folder.TOKENIZER_PATH_FILE
    if options.tokenizer != "build" and stored_tokenizer.is_file() and not on_shards(options):
      old = stored_tokenizer.read_text(encoding="utf-8").strip()
      if old != str(Path(options.tokenizer).resolve()):
        raise UsageError(f"checkpoint in {model_dir} was trained with the tokenizer {old}, "
                         f"now {Path(options.tokenizer).resolve()}; use a new --model_dir")


def check_records_have_a_checkpoint(model_dir: Path, has_checkpoints: bool) -> None:
  """Refuses a folder whose records outlived its checkpoints (deleted to save
  disk): training from step 0 would replace them. One epoch's record alone is
  a kill before its closing checkpoint, which the run redoes."""
  metrics = model_dir / run_folder.METRICS_FILE
  if has_checkpoints or not metrics.is_file():
    return
  records = run_folder.read_metrics(metrics)
  epochs = [record for record in records if "epoch" in record]
  if len(epochs) > 1 or any(record.get("final") for record in records):
    raise UsageError(
        f"{metrics} holds the records of {len(epochs)} epochs, up to step "
        f"{max(record['step'] for record in records)}, but {run_folder.checkpoint_dir(model_dir)} "
        "has no checkpoint to resume from: training again from step 0 would replace them. "
        f"Delete {metrics.name} to start over in this folder, or use a new --model_dir")


def on_shards(options: RunOptions) -> bool:
  """Whether --data is a prepare.py folder: training on Keras and JAX."""
  return shards.is_prepared(options.data)


def check_shard_flags(config, options: RunOptions) -> None:
  """The checks of a run from prepared shards (see :func:`on_shards`); raises UsageError."""
  if runtime.keras_backend() != "jax":
    raise UsageError(f"--data={options.data} is a prepare.py folder, which trains under "
                     f"KERAS_BACKEND=jax (now {runtime.keras_backend()}); set it, or pass the "
                     "folder of the TED HRLR files")
  try:
    manifest = shards.read_manifest(options.data)
  except DataError as e:
    raise UsageError(str(e)) from e
  refused = {
      "--strategy": options.strategy in ("tpu", "multi_worker"),
      "--mixed_precision": options.mixed_precision == "mixed_float16",
      "--eval_bleu_every_epochs": options.eval_bleu_every_epochs > 0,
  }
  for flag, refuse in refused.items():
    if refuse:
      raise UsageError(f"{flag} is not available under JAX (docs/training.md: default, mirrored "
                       "or auto; none or mixed_bfloat16; BLEU with evaluate.py afterwards)")
  if config.data.max_tokens > manifest["max_tokens"]:
    raise UsageError(f"config.data.max_tokens={config.data.max_tokens} but {options.data} was "
                     f"prepared with max_tokens={manifest['max_tokens']}; prepare it again with "
                     "this config")
  tokenizer = manifest["tokenizer"]
  if options.tokenizer != "build" and str(Path(options.tokenizer).resolve()) != tokenizer:
    raise UsageError(f"--tokenizer={options.tokenizer}, but {options.data} was prepared with the "
                     f"tokenizer {tokenizer}; drop --tokenizer (the shards name theirs)")
  check_vocabulary_sizes(config, manifest["vocab_sizes"], options.data)


def check_vocabulary_sizes(config, sizes, tokenizer) -> None:
  """UsageError unless the ``{"pt", "en"}`` vocabulary ``sizes`` of ``tokenizer``
  fit ``config.model`` (shared output weights need one joint vocabulary)."""
  if config.model.output_weights == "shared" and sizes["pt"] != sizes["en"]:
    raise UsageError(f"config.model.output_weights='shared' needs one joint vocabulary, but "
                     f"{tokenizer} has {sizes['pt']} pt and {sizes['en']} en tokens")

