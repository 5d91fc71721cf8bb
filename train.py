r"""Trains the Transformer on TED HRLR Portuguese->English.

Example (the TensorFlow tutorial's model, data and tokenizer):

  python train.py --config=configs/tutorial.py \
      --tokenizer=../shared/data/tutorial_tokenizer --model_dir=runs/tutorial

Any configuration field can be overridden, e.g. ``--config.model.d_model=256``,
``--config.training.epochs=5``, ``--config.training.train_steps=1000``,
``--config.data.batch_size=32``, ``--config.training.seed=1`` (fields and
defaults: transformer/config.py).

Everything goes under --model_dir: ``config.json`` (the resolved config),
``tokenizer_path.txt`` and ``tokenizer_vocabulary_sha256.txt`` (the tokenizer
and its identity), ``checkpoints/``, TensorBoard logs ``logs/train`` and
``logs/validation``, ``metrics.jsonl`` (one line per epoch), BLEU outputs under
``bleu/``, the exported translator under ``export/`` (``export_info.json``: its
step) and ``train.lock`` (held by the running train.py, with its PID).

Rerunning the same command resumes from the newest intact checkpoint (same
step, optimizer state, learning rate and dropout random state); see
docs/reliability.md for what faults (kills, a full disk, a second run on the
same folder) leave behind. Exit status: 0 when training finished;
1 on an error (bad flags, a corrupt or mismatched checkpoint, a NaN/Inf loss);
128 + N when stopped by signal N after writing a checkpoint (143 for SIGTERM,
130 for Ctrl-C) so that schedulers see an unfinished run. Errors are one
``train.py: error: ...`` line on stderr.

Under ``KERAS_BACKEND=jax``, ``--data`` is a folder written by ``prepare.py``
(token ids and the tokenizer's identity) and training runs on Keras and JAX
without TensorFlow (transformer/training/keras_loop.py), on every local
device with --strategy=mirrored or auto. Its checkpoints' ``model.weights.h5``
is what ``evaluate.py`` (BLEU, ``--export_dir`` for the translator) loads on
the TensorFlow side; train.py itself then exports only
``export/transformer.weights.h5``. See docs/training.md.

The console shows this script's progress; TensorFlow's own log lines (C++
start-up messages, SavedModel details) are hidden unless --verbose (or
TF_CPP_MIN_LOG_LEVEL is set).
"""

import atexit
import json
from pathlib import Path
import sys

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from transformer import config as config_lib
from transformer import files
from transformer import progress
from transformer import run_folder
from transformer import runtime
from transformer import shards
from transformer import sources
from transformer import stop_signals
from transformer.training import distribute
from transformer.errors import TrainingError, describe_error

REPO_DIR = Path(__file__).resolve().parent


def exit_if_stopped(result, model_dir: Path) -> None:
  """Exits with 128 + N and one line when signal N stopped the training, which
  saved a checkpoint first (either trainer's ``TrainResult``)."""
  if result.interrupted_by is None:
    return
  import signal  # pylint: disable=g-import-not-at-top
  name = signal.Signals(result.interrupted_by).name
  print(f"train.py: stopped by {name} at step {result.step}; checkpoint saved in "
        f"{model_dir / 'checkpoints'}; rerun the same command to resume", file=sys.stderr)
  sys.exit(128 + result.interrupted_by)


def config_error(argv, error: Exception) -> str:
  """The one line for a config override or file that failed while the flags
  were defined or parsed: a typo'd field with the closest ones, else the error."""
  overrides = [arg.split("=", 1)[0][len("--config."):] for arg in argv
               if arg.startswith("--config.")]
  unknown = [message for message in map(config_lib.unknown_field, overrides) if message]
  if unknown:
    return unknown[0]
  if isinstance(error, flags.Error):  # e.g. --config.model.num_layers=abc, --config=f.py:bad
    return runtime.flag_error_line(error)
  return f"--config: cannot load the configuration ({describe_error(error)})"


try:  # The default file is loaded, and the overrides applied, right here.
  _CONFIG = config_flags.DEFINE_config_file(
      "config", str(REPO_DIR / "configs" / "tutorial.py"),
      "Configuration file (configs/tiny.py, tutorial.py, base.py, big.py). Override any "
      "field with --config.<section>.<field>=value, e.g. --config.model.d_model=256, "
      "--config.training.epochs=5, --config.training.train_steps=1000 (> 0 overrides "
      "epochs), --config.data.batch_size=32, --config.training.seed=1.",
      lock_config=True)
except Exception as e:  # pylint: disable=broad-except  (whatever the override raised)
  sys.exit(f"train.py: error: {config_error(sys.argv, e)}")
_DATA = flags.DEFINE_string(
    "data", str(config_lib.SHARED_DATA_DIR / "ted_hrlr_pt_to_en"),
    "Where the data comes from: a folder with pt.train en.train pt.dev en.dev (the "
    "original TED HRLR files, read in TFDS order), or 'tfds' to use "
    "tensorflow_datasets (needs internet or a TFDS cache). A folder that does not "
    "exist is replaced by 'tfds', saying so. Under KERAS_BACKEND=jax: a folder written "
    "by prepare.py.")
_TOKENIZER = flags.DEFINE_string(
    "tokenizer", "build",
    "'build': learn WordPiece vocabularies from the training pairs with the "
    "config's data.vocabulary / data.vocab_size and cache the tokenizer SavedModel "
    "under --tokenizer_cache_dir (reused when the same data and settings come "
    "again). Otherwise the path of a tokenizer SavedModel with .pt and .en "
    "tokenizers, e.g. the tutorial's ted_hrlr_translate_pt_en_converter at "
    "../shared/data/tutorial_tokenizer; a path that does not exist is replaced by "
    "'build', saying so.")
_TOKENIZER_CACHE_DIR = flags.DEFINE_string(
    "tokenizer_cache_dir", None,
    "Where --tokenizer=build keeps built tokenizers (default: <model_dir>/tokenizers).")
_MODEL_DIR = flags.DEFINE_string(
    "model_dir", None,
    "Output folder (required): checkpoints, logs, config.json, tokenizer_path.txt, "
    "metrics.jsonl, exports. Rerunning with the same folder resumes training.")
_STRATEGY = flags.DEFINE_enum(
    "strategy", "default", list(distribute.STRATEGIES),
    "Distribution strategy: default (one device), mirrored (all local GPUs, or the "
    "CPU), tpu (needs --tpu or a TPU VM), multi_worker (MultiWorkerMirrored, cluster "
    "from TF_CONFIG), auto (tpu if --tpu is given, else mirrored on >= 2 GPUs, else "
    "default).")
_TPU = flags.DEFINE_string(
    "tpu", None,
    "TPU name or grpc:// address (only with --strategy=tpu or auto); 'local' on a TPU VM.")
_MIXED_PRECISION = flags.DEFINE_enum(
    "mixed_precision", "none", list(distribute.MIXED_PRECISION),
    "Mixed precision: none (float32), mixed_float16 (GPUs; dynamic loss scaling), "
    "mixed_bfloat16 (TPUs and recent CPUs/GPUs; no loss scaling).")
_JIT_COMPILE = flags.DEFINE_bool(
    "jit_compile", False,
    "XLA-compile the forward/backward pass (for GPUs; TPUs always compile). XLA compiles "
    "once per batch shape, so batches are then padded to their length bucket's longest "
    "sentence (or to max_tokens without buckets); bench/xla_cpu.py measures it on a CPU.")
_TRAIN_EXAMPLES = flags.DEFINE_integer(
    "train_examples", 0,
    "Use only the first N training pairs (in TFDS order), e.g. for smoke runs; 0: all.")
_VALIDATION_EXAMPLES = flags.DEFINE_integer(
    "validation_examples", 0,
    "Use only the first N validation pairs for the per-epoch validation loss; 0: all.")
_EVAL_BLEU_EVERY_EPOCHS = flags.DEFINE_integer(
    "eval_bleu_every_epochs", 0,
    "Also compute validation BLEU every N epochs (0: only at the end).")
_BLEU_EXAMPLES = flags.DEFINE_integer(
    "bleu_examples", -1,
    "Validation pairs translated for BLEU: -1 all, 0 no BLEU, N the first N.")
_BLEU_METHOD = flags.DEFINE_enum(
    "bleu_method", "beam", ["beam", "greedy"],
    "Decoding for BLEU: beam (paper §6.1, config.decoding) or greedy (faster).")
_EXPORT = flags.DEFINE_bool(
    "export", True,
    "At the end, export the translator SavedModel to <model_dir>/export/translator "
    "and the .keras model to <model_dir>/export/.")
_LOG_EVERY_STEPS = flags.DEFINE_integer(
    "log_every_steps", 100, "Write TensorBoard training scalars every N steps.")
_VERBOSE = flags.DEFINE_bool("verbose", False,
                             "Also show TensorFlow's own log lines (C++ and Python), or "
                             "JAX's under KERAS_BACKEND=jax.")


class UsageError(ValueError):
  """A bad or contradictory command line, found before any work."""


class RunError(RuntimeError):
  """Bad data or files, or a run that cannot go on (e.g. a corrupt checkpoint)."""


def use_stand_ins() -> None:
  """A --data or --tokenizer path that does not exist (a clone without
  ../shared) becomes 'tfds' or 'build' (:mod:`transformer.sources`), said in
  one line."""
  try:
    data, tokenizer, message = sources.stand_ins(_DATA.value, _TOKENIZER.value)
  except sources.SourceError as e:
    raise UsageError(str(e)) from e
  if message:
    flags.FLAGS.data, flags.FLAGS.tokenizer = data, tokenizer
    logging.info(message)


def check_flags(config, model_dir: Path) -> None:
  """Every check that needs no TensorFlow; raises UsageError."""
  try:
    config_lib.validate_config(config)
  except config_lib.ConfigError as e:
    raise UsageError(f"invalid configuration: {e}") from e
  try:
    distribute.check_strategy_flags(_STRATEGY.value, _TPU.value, _MIXED_PRECISION.value)
  except distribute.StrategyError as e:
    raise UsageError(str(e)) from e
  if on_shards():
    check_shard_flags(config)  # refuses them under the TensorFlow backend
  elif runtime.keras_backend() != "tensorflow":
    raise UsageError(f"under KERAS_BACKEND={runtime.keras_backend()} train.py trains from "
                     f"prepared shards, and --data={_DATA.value} is not a prepare.py folder; "
                     "run prepare.py first (docs/training.md), or use KERAS_BACKEND=tensorflow")
  elif _DATA.value == "tfds":
    import importlib.util  # pylint: disable=g-import-not-at-top
    if importlib.util.find_spec("tensorflow_datasets") is None:
      raise UsageError("--data=tfds needs tensorflow-datasets (pip install -e ., which "
                       "brings it); or pass the folder of the TED HRLR "
                       "files, e.g. ../shared/data/ted_hrlr_pt_to_en")
  else:
    data_dir = Path(_DATA.value)
    missing = [name for name in ("pt.train", "en.train", "pt.dev", "en.dev")
               if not (data_dir / name).is_file()]
    if missing:
      raise UsageError(f"--data={_DATA.value}: not a folder with the TED HRLR files "
                       f"(missing {', '.join(missing)}); pass the folder or 'tfds'")
  if _TOKENIZER.value != "build" and not on_shards():
    tok = Path(_TOKENIZER.value)
    if not (tok / "saved_model.pb").is_file():
      raise UsageError(f"--tokenizer={_TOKENIZER.value}: no tokenizer SavedModel there "
                       "(no saved_model.pb); pass the path of one, e.g. "
                       "../shared/data/tutorial_tokenizer, or --tokenizer=build")
  for flag, low in ((_TRAIN_EXAMPLES, 0), (_VALIDATION_EXAMPLES, 0),
                    (_EVAL_BLEU_EVERY_EPOCHS, 0), (_BLEU_EXAMPLES, -1), (_LOG_EVERY_STEPS, 1)):
    if flag.value < low:
      raise UsageError(f"--{flag.name} must be >= {low}, got {flag.value}")
  if _EVAL_BLEU_EVERY_EPOCHS.value and _BLEU_EXAMPLES.value == 0:
    raise UsageError("--eval_bleu_every_epochs needs BLEU, but --bleu_examples=0 disables it")
  if model_dir.exists() and not model_dir.is_dir():
    raise UsageError(f"--model_dir={model_dir} exists and is not a folder")
  # Resuming with a different model would fail at restore; say why up front.
  config_file = model_dir / run_folder.CONFIG_FILE
  checkpoint_dir = model_dir / "checkpoints"
  tensorflow_checkpoints = ((checkpoint_dir / "checkpoint").is_file()
                            or any(checkpoint_dir.glob("ckpt-*.index")))
  keras_checkpoints = any(checkpoint_dir.glob("step-*"))
  if tensorflow_checkpoints if on_shards() else keras_checkpoints:
    raise UsageError(f"{checkpoint_dir} holds checkpoints of the "
                     f"{'TensorFlow' if on_shards() else 'Keras-on-JAX'} trainer; this command "
                     "would train with the other one: use a new --model_dir")
  if config_file.is_file() and (tensorflow_checkpoints or keras_checkpoints):
    stored = read_stored_config(config_file)
    current = json.loads(config.to_json_best_effort())
    differences = config_lib.resume_differences(stored, current, _TOKENIZER.value == "build")
    if differences:
      raise UsageError(f"checkpoint in {model_dir} was trained with a different config: "
                       + "; ".join(differences) + "; use a new --model_dir")
    stored_tokenizer = model_dir / run_folder.TOKENIZER_PATH_FILE
    if _TOKENIZER.value != "build" and stored_tokenizer.is_file() and not on_shards():
      old = stored_tokenizer.read_text(encoding="utf-8").strip()
      if old != str(Path(_TOKENIZER.value).resolve()):
        raise UsageError(f"checkpoint in {model_dir} was trained with the tokenizer {old}, "
                         f"now {Path(_TOKENIZER.value).resolve()}; use a new --model_dir")


def on_shards() -> bool:
  """Whether --data is a prepare.py folder: training on Keras and JAX without
  TensorFlow (:func:`check_shard_flags` makes sure of the backend)."""
  return shards.is_prepared(_DATA.value)


def check_shard_flags(config) -> None:
  """The checks of a run from prepared shards (see :func:`on_shards`); raises UsageError."""
  if runtime.keras_backend() != "jax":
    raise UsageError(f"--data={_DATA.value} is a prepare.py folder, which trains under "
                     f"KERAS_BACKEND=jax (now {runtime.keras_backend()}); set it, or pass the "
                     "folder of the TED HRLR files")
  try:
    manifest = shards.read_manifest(_DATA.value)
  except shards.ShardError as e:
    raise UsageError(str(e)) from e
  refused = {
      "--strategy": _STRATEGY.value in ("tpu", "multi_worker"),
      "--mixed_precision": _MIXED_PRECISION.value == "mixed_float16",
      "--eval_bleu_every_epochs": _EVAL_BLEU_EVERY_EPOCHS.value > 0,
  }
  for flag, refuse in refused.items():
    if refuse:
      raise UsageError(f"{flag} is not available under JAX (docs/training.md: default, mirrored "
                       "or auto; none or mixed_bfloat16; BLEU with evaluate.py afterwards)")
  if config.data.max_tokens > manifest["max_tokens"]:
    raise UsageError(f"config.data.max_tokens={config.data.max_tokens} but {_DATA.value} was "
                     f"prepared with max_tokens={manifest['max_tokens']}; prepare it again with "
                     "this config")
  tokenizer = manifest["tokenizer"]
  if _TOKENIZER.value != "build" and str(Path(_TOKENIZER.value).resolve()) != tokenizer:
    raise UsageError(f"--tokenizer={_TOKENIZER.value}, but {_DATA.value} was prepared with the "
                     f"tokenizer {tokenizer}; drop --tokenizer (the shards name theirs)")
  sizes = manifest["vocab_sizes"]
  if config.model.output_weights == "shared" and sizes["pt"] != sizes["en"]:
    raise UsageError(f"config.model.output_weights='shared' needs one joint vocabulary, but "
                     f"{_DATA.value} has {sizes['pt']} pt and {sizes['en']} en tokens")


def read_stored_config(config_file: Path) -> dict:
  """A run's ``config.json``; UsageError if it holds no configuration."""
  try:
    return run_folder.read_run_config(config_file)
  except run_folder.RunFolderError as e:
    raise UsageError(f"{e}; restore it, or delete it to resume with this command's "
                     "configuration") from e


def load_config():
  """The --config configuration; UsageError if its file did not give one."""
  config = _CONFIG.value
  try:
    config.get("model")
  except OSError as e:  # ml_collections reports a config file it could not load on first use.
    raise UsageError(f"--config: {str(e).strip().splitlines()[-1].strip()}") from e
  except AttributeError as e:  # get_config() returned something else than a ConfigDict
    raise UsageError(f"--config: get_config() returned a {type(config).__name__}, not an "
                     "ml_collections.ConfigDict") from e
  return config


def _take(pairs, n):
  return pairs[:n] if n else pairs


def load_pairs(split: str, limit: int):
  """(pt, en) string pairs of `split` as a Python list, the first `limit` (0: all)."""
  from transformer import data  # pylint: disable=g-import-not-at-top
  if _DATA.value == "tfds":
    dataset = data.load_split("tfds", split)
    if limit:
      dataset = dataset.take(limit)
    return [(pt.decode("utf-8"), en.decode("utf-8"))
            for pt, en in dataset.as_numpy_iterator()]
  return _take(data.local_split_pairs(_DATA.value, split), limit)


def main(argv):
  if len(argv) > 1:
    raise UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  if not _MODEL_DIR.value:
    raise UsageError("--model_dir is required")
  config = load_config()
  model_dir = Path(_MODEL_DIR.value).resolve()
  use_stand_ins()
  check_flags(config, model_dir)
  if on_shards():
    train_on_shards(config, model_dir)
    return

  # TensorFlow is imported only now, so that flag errors come back at once.
  tf = runtime.import_tensorflow(_VERBOSE.value)
  from transformer import data  # pylint: disable=g-import-not-at-top
  try:
    train(config, model_dir, tf)
  except (data.DataError, TrainingError, OSError) as e:
    # Malformed or unreadable files, a corrupt or mismatched checkpoint, a NaN
    # loss, a full disk, a folder in use by another run.
    raise RunError(str(e)) from e
  except (tf.errors.OpError, MemoryError) as e:  # e.g. out of memory
    raise RunError(describe_error(e)) from e


def train(config, model_dir: Path, tf):
  """Everything after the flag checks: data, tokenizers, training, export, BLEU."""
  from transformer.checkpoint_files import CHECKPOINT_SUBDIR  # pylint: disable=g-import-not-at-top
  from transformer import data  # pylint: disable=g-import-not-at-top
  from transformer import pipeline  # pylint: disable=g-import-not-at-top
  from transformer.training import summaries as summaries_lib  # pylint: disable=g-import-not-at-top
  from transformer import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top
  from transformer.training.trainer import Trainer  # pylint: disable=g-import-not-at-top

  strategy = distribute.get_strategy(_STRATEGY.value, _TPU.value)
  chief = distribute.is_chief(strategy)
  train_pairs = load_pairs("train", _TRAIN_EXAMPLES.value)
  validation_pairs = load_pairs("validation", 0)
  logging.info("%d training pairs, %d validation pairs", len(train_pairs),
               len(validation_pairs))
  for split, pairs in (("training", train_pairs), ("validation", validation_pairs)):
    if not pairs:
      raise UsageError(f"--data={_DATA.value}: the {split} split is empty")

  if _TOKENIZER.value == "build":
    cache_dir = Path(_TOKENIZER_CACHE_DIR.value or model_dir / "tokenizers")
    tokenizer_path = Path(tokenizers_lib.get_or_build_tokenizers(
        train_pairs, cache_dir, vocab_size=config.data.vocab_size,
        vocabulary=config.data.vocabulary)).resolve()
  else:
    tokenizer_path = Path(_TOKENIZER.value).resolve()
  try:
    tokenizers = tokenizers_lib.load_tokenizers(tokenizer_path)
  except (tokenizers_lib.TokenizerError, OSError) as e:  # OSError: an unreadable SavedModel
    raise UsageError(f"--tokenizer={_TOKENIZER.value}: {e}") from e
  input_vocab_size, target_vocab_size = tokenizers_lib.vocab_sizes(tokenizers)
  if config.model.output_weights == "shared" and input_vocab_size != target_vocab_size:
    raise UsageError(f"config.model.output_weights='shared' needs one joint vocabulary, but "
                     f"the tokenizer {tokenizer_path} has {input_vocab_size} pt and "
                     f"{target_vocab_size} en tokens")

  if chief:
    model_dir.mkdir(parents=True, exist_ok=True)
    # Held until the process ends, however it ends; removed when Python ends
    # it (finished, stopped by a signal, an error), so that the next run finds
    # no stale lock. A killed run's lock is stale, and taken over.
    lock = files.RunLock(model_dir)
    atexit.register(lock.release)  # first: a Ctrl-C right after acquire() is an exit too
    lock.acquire()
  mismatch = tokenizers_lib.vocabulary_mismatch(model_dir, tokenizers)
  if mismatch and any((model_dir / CHECKPOINT_SUBDIR).glob("ckpt-*.index")):
    raise UsageError(f"--tokenizer={_TOKENIZER.value}: {mismatch}, or a new --model_dir")

  try:
    trainer = Trainer(
        config, input_vocab_size=input_vocab_size, target_vocab_size=target_vocab_size,
        model_dir=model_dir, strategy=strategy, mixed_precision=_MIXED_PRECISION.value,
        jit_compile=_JIT_COMPILE.value, log_every_steps=_LOG_EVERY_STEPS.value)
  except (tf.errors.ResourceExhaustedError, MemoryError) as e:
    raise RunError(f"out of memory while building the model ({describe_error(e)}); try a smaller "
                   "configuration (config.model) or free memory") from e
  trainer.restore()
  if chief:  # only now: a refused run leaves the folder's files as they were
    record_run_files(model_dir, config, tokenizer_path,
                     tokenizers_lib.vocabulary_hash(tokenizers))

  # XLA compiles a step per batch shape: under --jit_compile and on TPUs the
  # batches are padded to their bucket's length, and TPUs, which need static
  # shapes, also drop each bucket's last partial batch.
  drop_remainder = isinstance(strategy, tf.distribute.TPUStrategy)
  static_shapes = drop_remainder or _JIT_COMPILE.value

  # Tokenized once; each epoch's pipeline reads the same in-memory cache.
  tokenized_train = pipeline.tokenize_pairs(data.pairs_to_dataset(train_pairs), tokenizers,
                                            config.data.max_tokens).cache()

  def make_train_dataset(epoch):
    return pipeline.training_batches(tokenized_train, config, epoch,
                                     drop_remainder=drop_remainder, static_shapes=static_shapes)

  validation_dataset = pipeline.evaluation_batches(
      _take(validation_pairs, _VALIDATION_EXAMPLES.value), tokenizers, config.data,
      drop_remainder=drop_remainder, static_shapes=static_shapes)

  bleu_pairs = {-1: validation_pairs, 0: []}.get(
      _BLEU_EXAMPLES.value, validation_pairs[:_BLEU_EXAMPLES.value])
  summaries = summaries_lib.Summaries(model_dir, is_chief=chief)
  bleu = Bleu(trainer.model, tokenizers, config, model_dir, bleu_pairs, chief, summaries)

  def epoch_end(epoch, record):
    every = _EVAL_BLEU_EVERY_EPOCHS.value
    if every and bleu.available and record["complete"] and epoch % every == 0:
      return {"bleu": bleu(f"validation_epoch{epoch}", record["step"])}
    return {}

  result = trainer.fit(make_train_dataset, validation_dataset, epoch_end_callback=epoch_end)
  exit_if_stopped(result, model_dir)

  logging.info(progress.run_summary(result.step, result.start_step, result.history))
  final = {"final": True, "step": result.step}
  translator = None
  # A rerun of a finished command redoes only what is missing at this step.
  if _EXPORT.value and chief and exported_step(model_dir) == result.step:
    logging.info("%s already holds step %d: not exported again", model_dir / "export",
                 result.step)
  elif _EXPORT.value and chief:
    with stop_signals.StopSignals(finishing="the export") as stop:
      translator, paths = export(trainer, tokenizers, config, model_dir)
    final.update(paths)
    if stop.received is not None:
      stopped_during_export(stop.received, result.step, model_dir)
  if bleu.available and bleu.recorded(result.step):
    logging.info("validation BLEU at step %d is in %s: not computed again", result.step,
                 model_dir / run_folder.METRICS_FILE)
  elif bleu.available:
    final["bleu"] = bleu("validation", result.step, translator)
  if len(final) > 2:
    summaries.append_metrics(final)


def train_on_shards(config, model_dir: Path) -> None:
  """Training from prepared shards on Keras and JAX, with no TensorFlow
  imported (transformer/training/keras_loop.py)."""
  runtime.hide_jax_logs(_VERBOSE.value)
  from transformer.training import keras_loop  # pylint: disable=g-import-not-at-top  (JAX, Keras)
  import jax  # pylint: disable=g-import-not-at-top
  manifest = shards.read_manifest(_DATA.value)
  model_dir.mkdir(parents=True, exist_ok=True)
  try:
    # As in train(): held until the process ends, removed when Python ends it.
    lock = files.RunLock(model_dir)
    atexit.register(lock.release)
    lock.acquire()
    recorded = model_dir / run_folder.VOCABULARY_HASH_FILE
    if (recorded.is_file() and any((model_dir / "checkpoints").glob("step-*"))
        and recorded.read_text(encoding="utf-8").strip()
        != manifest["tokenizer_vocabulary_sha256"]):
      raise UsageError(f"{_DATA.value} was tokenized with another tokenizer than the run in "
                       f"{model_dir} ({recorded.name}); use that run's shards or a new "
                       "--model_dir")
    splits = {}
    for split, limit in (("train", _TRAIN_EXAMPLES.value),
                         ("validation", _VALIDATION_EXAMPLES.value)):
      splits[split] = shards.load_split(_DATA.value, split).take(limit).trimmed(
          config.data.max_tokens)
      if not len(splits[split]):  # pylint: disable=g-explicit-length-test
        raise UsageError(f"--data={_DATA.value}: the {split} split is empty")
    logging.info("%d training pairs, %d validation pairs (prepared shards)",
                 len(splits["train"]), len(splits["validation"]))
    if int(config.training.length_groups) > 1:
      logging.info("training.length_groups=%d is the TensorFlow step's; under JAX the "
                   "batches' padding to few shapes does its work", config.training.length_groups)
    devices = jax.devices() if _STRATEGY.value in ("mirrored", "auto") else jax.devices()[:1]
    trainer = keras_loop.Trainer(
        config, input_vocab_size=manifest["vocab_sizes"]["pt"],
        target_vocab_size=manifest["vocab_sizes"]["en"], model_dir=model_dir, devices=devices,
        mixed_precision=_MIXED_PRECISION.value, log_every_steps=_LOG_EVERY_STEPS.value)
    trainer.restore()
    record_run_files(model_dir, config, Path(manifest["tokenizer"]),
                     manifest["tokenizer_vocabulary_sha256"])
    result = trainer.fit(splits["train"], splits["validation"])
    exit_if_stopped(result, model_dir)
    logging.info(progress.run_summary(result.step, result.start_step, result.history))
    if _EXPORT.value:
      weights = trainer.final_weights(model_dir / "export" / "transformer.weights.h5")
      logging.info("wrote %s (step %d). BLEU and the translator SavedModel come from the "
                   "TensorFlow side: python evaluate.py --model_dir=%s --export_dir=%s",
                   weights, result.step, model_dir, model_dir / "export" / "translator")
  except (keras_loop.TrainingError, shards.ShardError, OSError) as e:
    raise RunError(str(e) if not isinstance(e, OSError) else describe_error(e)) from e


class Bleu:
  """Validation BLEU through the translator, when there are pairs to score."""

  def __init__(self, model, tokenizers, config, model_dir, pairs, chief, summaries):
    self.model, self.tokenizers, self.config = model, tokenizers, config
    self.model_dir, self.pairs = model_dir, pairs
    self.available = bool(pairs) and chief
    self.summaries = summaries
    self._in_memory_translator = None  # one for every epoch: traced once

  def recorded(self, step) -> bool:
    """Whether a final record at ``step`` holds the BLEU of these pairs and method."""
    metrics, scores = (self.model_dir / run_folder.METRICS_FILE,
                       self.model_dir / "bleu" / f"validation.{_BLEU_METHOD.value}.json")
    if not (metrics.is_file() and scores.is_file()):
      return False
    finals = [r for r in run_folder.read_metrics(metrics)
              if r.get("final") and r["step"] == step and "bleu" in r]
    try:
      scored = json.loads(scores.read_text(encoding="utf-8"))["num_sentences"]
    except (ValueError, KeyError):
      return False
    return bool(finals) and scored == len(self.pairs)

  def __call__(self, split_name, step, translator=None):
    """BLEU of `translator` (default: an in-memory one over the current model) on
    the validation pairs; writes <model_dir>/bleu/<split_name>.<method>.{txt,json}
    and the score at `step` to TensorBoard's logs/validation, beside the losses."""
    from transformer import evaluation  # pylint: disable=g-import-not-at-top
    from transformer import export as export_lib  # pylint: disable=g-import-not-at-top
    if translator is None:
      if self._in_memory_translator is None:
        self._in_memory_translator = export_lib.Translator(self.tokenizers, self.model,
                                                           self.config.decoding)
      translator = self._in_memory_translator
    method = _BLEU_METHOD.value
    with progress.announced(f"translating {len(self.pairs)} validation sentences "
                            f"({method}) for BLEU"):
      result = evaluation.evaluate_bleu(evaluation.translator_batch_fn(translator, method),
                                        self.pairs, self.model_dir / "bleu", split_name,
                                        method, reference_tokenizer=self.tokenizers.en)
    logging.info("%s BLEU (%s, %d sentences): %.2f", split_name, method,
                 result["num_sentences"], result["bleu"])
    self.summaries.write_scalars("validation", step, {"bleu": result["bleu"]})
    return result["bleu"]


def record_run_files(model_dir: Path, config, tokenizer_path: Path,
                     vocabulary_hash: str) -> None:
  """Writes config.json, tokenizer_path.txt and the vocabularies' hash, each atomically."""
  for name, text in ((run_folder.CONFIG_FILE, config.to_json_best_effort(indent=2)),
                     (run_folder.TOKENIZER_PATH_FILE, str(tokenizer_path)),
                     (run_folder.VOCABULARY_HASH_FILE, vocabulary_hash)):
    files.write_text_atomically(model_dir / name, text + "\n")


def stopped_during_export(signum: int, step: int, model_dir: Path) -> None:
  """Exits 128 + ``signum`` after a signal that came during a finished export."""
  import signal  # pylint: disable=g-import-not-at-top
  print(f"train.py: stopped by {signal.Signals(signum).name} during the export, which was "
        f"finished first: {model_dir / 'export'} holds step {step}; BLEU was not computed",
        file=sys.stderr)
  sys.exit(128 + signum)


def exported_step(model_dir: Path):
  """The step of the export in ``model_dir/export`` (its export_info.json), or None."""
  from transformer import export as export_lib  # pylint: disable=g-import-not-at-top
  try:
    info = json.loads((model_dir / "export" / export_lib.EXPORT_INFO_FILE).read_text())
    return info["step"]
  except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: export again
    return None


def export(trainer, tokenizers, config, model_dir):
  """Exports the translator SavedModel and the .keras model into export/, swapped
  in whole (:func:`transformer.export.begin_swap`); returns the in-memory
  translator and the paths. A failed write (a full disk) keeps the old export."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer import export as export_lib  # pylint: disable=g-import-not-at-top
  export_dir = model_dir / "export"
  staging = export_lib.begin_swap(export_dir)
  try:
    with progress.announced(f"exporting the .keras model and the translator to {export_dir}"):
      export_lib.save_keras_model(trainer.model, staging / "transformer.keras")
      translator = export_lib.export_translator(trainer.model, tokenizers,
                                                staging / "translator", config.decoding)
      export_lib.finish_swap(staging, export_dir, trainer.step)
  except (OSError, tf.errors.OpError) as e:
    raise RunError(f"cannot write the export to {staging}: {describe_error(e)}; "
                   f"{export_dir} is left as it was, and the trained model is in "
                   f"{trainer.latest_checkpoint()}. Free space and rerun the same command "
                   "to export") from e
  translator_dir, keras_path = export_dir / "translator", export_dir / "transformer.keras"
  logging.info("exported %s and %s (step %d)", translator_dir, keras_path, trainer.step)
  return translator, {"export": str(translator_dir), "keras_model": str(keras_path)}


def run(argv):
  # SIGTERM too stops in one line where no StopSignals block (training, the
  # export) finishes the work first: during start-up and the final BLEU.
  stop_signals.interrupt_on_signals(say_interrupted)
  try:
    main(argv)
  except (UsageError, RunError) as e:
    sys.exit(f"train.py: error: {e}")
  except KeyboardInterrupt as e:
    say_interrupted(e)
    sys.exit(128 + getattr(e, "signum", 2))  # as a shell reports it


def say_interrupted(interrupted: KeyboardInterrupt) -> None:
  """The line for a SIGTERM or SIGINT (a plain KeyboardInterrupt: SIGINT)."""
  by = "SIGTERM" if getattr(interrupted, "signum", 2) != 2 else "Ctrl-C"
  print(f"train.py: error: interrupted by {by}; rerun the same command to resume from the "
        "last checkpoint", file=sys.stderr, flush=True)


if __name__ == "__main__":
  flags.mark_flags_as_required(["model_dir"])
  app.run(run, flags_parser=runtime.flags_parser("train.py", describe=config_error))
