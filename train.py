r"""Trains the Transformer on TED HRLR Portuguese->English.

Example (the TensorFlow tutorial's model, data and tokenizer: the
``ted_hrlr_translate_pt_en_converter`` folder its ``get_file`` call unzips):

  python train.py --config=configs/tutorial.py \
      --tokenizer=path/to/ted_hrlr_translate_pt_en_converter --model_dir=runs/tutorial

``--data`` may name the TED HRLR archive itself,
``--data=path/to/qi18naacl-dataset.tar.gz``, where it cannot be downloaded
(docs/data.md).

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
without TensorFlow (transformer/training/jax_engine.py), on every local
device with --strategy=mirrored or auto. Its checkpoints' ``model.weights.h5``
is what ``evaluate.py`` (BLEU, ``--export_dir`` for the translator) loads on
the TensorFlow side; train.py itself then exports only
``export/transformer.weights.h5``. See docs/training.md.

The console shows this script's progress; TensorFlow's own log lines (C++
start-up messages, SavedModel details) are hidden unless --verbose (or
TF_CPP_MIN_LOG_LEVEL is set).
"""

from pathlib import Path
import sys

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from transformer import config as config_lib
from transformer.run import runtime
from transformer.data import sources
from transformer.run import script as script_lib
from transformer.run.errors import TrainingError, UsageError, describe_error
from transformer.training import tf_distribute
from transformer.training import run_checks
from transformer.training import launch
from transformer.training.run_checks import RunOptions

REPO_DIR = Path(__file__).resolve().parent


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
    "data", sources.AUTO,
    sources.DATA_HELP + " Under KERAS_BACKEND=jax: a folder written by prepare.py.")
_TOKENIZER = flags.DEFINE_string(
    "tokenizer", "build",
    "'build': learn WordPiece vocabularies from the training pairs with the "
    "config's data.vocabulary / data.vocab_size and cache the tokenizer SavedModel "
    "under --tokenizer_cache_dir (reused when the same data and settings come "
    "again). Otherwise the path of a tokenizer SavedModel with .pt and .en "
    "tokenizers, e.g. path/to/ted_hrlr_translate_pt_en_converter, the folder the "
    "tutorial downloads.")
_TOKENIZER_CACHE_DIR = flags.DEFINE_string(
    "tokenizer_cache_dir", None,
    "Where --tokenizer=build keeps built tokenizers (default: <model_dir>/tokenizers).")
_MODEL_DIR = flags.DEFINE_string(
    "model_dir", None,
    "Output folder (required): checkpoints, logs, config.json, tokenizer_path.txt, "
    "metrics.jsonl, exports. Rerunning with the same folder resumes training.")
_STRATEGY = flags.DEFINE_enum(
    "strategy", "default", list(tf_distribute.STRATEGIES),
    "Distribution strategy: default (one device), mirrored (all local GPUs, or the "
    "CPU), tpu (needs --tpu or a TPU VM), multi_worker (MultiWorkerMirrored, cluster "
    "from TF_CONFIG), auto (tpu if --tpu is given, else mirrored on >= 2 GPUs, else "
    "default).")
_TPU = flags.DEFINE_string(
    "tpu", None,
    "TPU name or grpc:// address (only with --strategy=tpu or auto); 'local' on a TPU VM.")
_MIXED_PRECISION = flags.DEFINE_enum(
    "mixed_precision", "none", list(tf_distribute.MIXED_PRECISION),
    "Mixed precision: none (float32), mixed_float16 (GPUs; dynamic loss scaling), "
    "mixed_bfloat16 (TPUs and recent CPUs/GPUs; no loss scaling).")
_JIT_COMPILE = flags.DEFINE_bool(
    "jit_compile", False,
    "XLA-compile the forward/backward pass (for GPUs; TPUs always compile). XLA compiles "
    "once per batch shape, so batches are then padded to their length bucket's longest "
    "sentence (or to max_tokens without buckets); lab/bench/xla_cpu.py measures it on a CPU.")
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
    "log_every_steps", 100,
    "Write TensorBoard training scalars every N steps; where stdout is not a terminal (a log "
    "file, a pipe), also a progress line every N steps or 60 seconds, whichever comes first.")
_COMPILATION_CACHE = flags.DEFINE_string(
    "compilation_cache", runtime.COMPILATION_CACHE_AUTO,
    "Under KERAS_BACKEND=jax: where compiled steps are kept for the next run or resume, "
    "which then starts in seconds instead of compiling each batch shape again. 'auto': "
    "$JAX_COMPILATION_CACHE_DIR if set, else ~/.cache/transformer-pt-en/jax "
    "($XDG_CACHE_HOME instead of ~/.cache when set); 'off'; or a folder.")
_VERBOSE = flags.DEFINE_bool("verbose", False,
                             "Also show TensorFlow's own log lines (C++ and Python), or "
                             "JAX's under KERAS_BACKEND=jax.")


def resolve_sources() -> None:
  """--data=auto made the local copy or 'tfds', said in one line; a named
  --data or --tokenizer that does not exist is a UsageError
  (:mod:`transformer.data.sources`)."""
  try:
    data, message = sources.data_source(_DATA.value)
    sources.check_tokenizer(_TOKENIZER.value)
  except sources.SourceError as e:
    raise UsageError(str(e)) from e
  flags.FLAGS.data = data
  if message:
    logging.info(message)


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


def main(argv):
  runtime.plain_log_lines(_VERBOSE.value)
  if len(argv) > 1:
    raise UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  if not _MODEL_DIR.value:
    raise UsageError("--model_dir is required")
  config = load_config()
  model_dir = Path(_MODEL_DIR.value).resolve()
  resolve_sources()
  options = RunOptions(
      data=_DATA.value, tokenizer=_TOKENIZER.value, tokenizer_cache_dir=_TOKENIZER_CACHE_DIR.value,
      strategy=_STRATEGY.value, tpu=_TPU.value, mixed_precision=_MIXED_PRECISION.value,
      jit_compile=_JIT_COMPILE.value, train_examples=_TRAIN_EXAMPLES.value,
      validation_examples=_VALIDATION_EXAMPLES.value,
      eval_bleu_every_epochs=_EVAL_BLEU_EVERY_EPOCHS.value, bleu_examples=_BLEU_EXAMPLES.value,
      bleu_method=_BLEU_METHOD.value, export=_EXPORT.value, log_every_steps=_LOG_EVERY_STEPS.value,
      compilation_cache=_COMPILATION_CACHE.value, verbose=_VERBOSE.value)
  run_checks.check_run(config, options, model_dir)
  if run_checks.on_shards(options):
    launch.train_on_shards(config, options, model_dir)
    return

  # TensorFlow is imported only now, so that flag errors come back at once.
  tf = runtime.import_tensorflow(options.verbose)
  # Deferred: ted imports TensorFlow, which the flag checks and the JAX run start without.
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  try:
    launch.train_with_tensorflow(config, options, model_dir, tf)
  except (ted.DataError, OSError) as e:  # malformed or unreadable files, a full disk
    raise TrainingError(str(e)) from e
  except (tf.errors.OpError, MemoryError) as e:  # e.g. out of memory
    raise TrainingError(describe_error(e)) from e


def run(argv):
  # SIGTERM too stops in one line where no StopSignals block (training, the
  # export) finishes the work first: during start-up and the final BLEU.
  script_lib.run_main(main, argv, "train.py", errors=lambda: (UsageError, TrainingError),
                      stopped_line=say_interrupted)


def say_interrupted(interrupted: KeyboardInterrupt) -> str:
  """The line for a SIGTERM or SIGINT (a plain KeyboardInterrupt: SIGINT)."""
  by = "SIGTERM" if script_lib.signal_number(interrupted) != 2 else "Ctrl-C"
  return f"error: interrupted by {by}; rerun the same command to resume from the last checkpoint"


if __name__ == "__main__":
  flags.mark_flags_as_required(["model_dir"])
  app.run(run, flags_parser=runtime.flags_parser("train.py", describe=config_error))
