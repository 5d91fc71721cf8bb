"""train.py's two launches, after its checks: on TensorFlow, or from prepared shards on JAX.

:func:`train_with_tensorflow`: the TED pairs, the tokenizers, the run folder's
lock, a :class:`~transformer.training.tf_engine.TensorFlowTrainer`, then the
export and BLEU (:mod:`transformer.training.finish`). :func:`train_on_shards`:
the same from a ``prepare.py`` folder on JAX, without TensorFlow; BLEU and the
translator then come from ``evaluate.py``.
"""

import contextlib
from pathlib import Path

from absl import logging

from transformer.data import sources
from transformer.run import files
from transformer.run import progress
from transformer.run import run_folder
from transformer.run import runtime
from transformer.data import shards
from transformer.run import stop_signals
from transformer.run.errors import TrainingError, UsageError, describe_error
from transformer.training import tf_distribute
from transformer.training import finish
from transformer.training import run_checks
from transformer.training.run_checks import RunOptions


def plan_line(config, options: RunOptions, bleu_sentences: int) -> str:
  """What the run will do, said once at its start."""
  training = config.training
  if int(training.train_steps):
    plan = f"training to step {training.train_steps}"
  elif training.time_budget_minutes:
    plan = (f"training whole epochs for {training.time_budget_minutes:g} minutes (at least one, "
            "however long it takes)")
  else:
    plan = f"training to epoch {training.epochs}"
  exported = ("writing the weights (BLEU and the translator: evaluate.py)"
              if run_checks.on_shards(options) else "exporting the translator")
  then = [exported] if options.export else []
  if bleu_sentences:
    then.append(f"scoring validation BLEU ({options.bleu_method}) on "
                f"{progress.plural(bleu_sentences, 'sentence')}")
  return "this run: " + plan + (", then " + " and ".join(then) if then else "")


def train_with_tensorflow(config, options: RunOptions, model_dir: Path, tf) -> None:
  """Everything after the flag checks: data, tokenizers, training, export, BLEU."""
  # Deferred: these import TensorFlow, which runtime.import_tensorflow set up; not in the JAX process.
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  from transformer.data import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top
  from transformer.inference.evaluation import load_pairs  # pylint: disable=g-import-not-at-top
  from transformer.training.tf_engine import TensorFlowTrainer  # pylint: disable=g-import-not-at-top

  strategy = tf_distribute.get_strategy(options.strategy, options.tpu)
  chief = tf_distribute.is_chief(strategy)
  train_pairs, _ = load_pairs(options.data, "train", options.train_examples)
  validation_pairs, _ = load_pairs(options.data, "validation")
  # The validation loss's pairs (--validation_examples); BLEU says its own count.
  loss_pairs = validation_pairs[:options.validation_examples or None]
  logging.info("%d training pairs, %d validation pairs", len(train_pairs), len(loss_pairs))
  for split, pairs in (("training", train_pairs), ("validation", validation_pairs)):
    if not pairs:
      raise UsageError(f"--data={options.data}: the {split} split is empty")

  if options.tokenizer == "build":
    cache_dir = Path(options.tokenizer_cache_dir or model_dir / "tokenizers")
    # Another run beside this one may have built the same tokenizer.
    other_runs = [path.parent / "tokenizers" for path in model_dir.parent.glob(
        f"*/{run_folder.TRAINED_WITH_FILE}") if path.parent != model_dir]
    tokenizer_path = Path(tokenizers_lib.get_or_build_tokenizers(
        train_pairs, cache_dir, vocab_size=config.data.vocab_size,
        vocabulary=config.data.vocabulary, tutorial=sources.TUTORIAL_TOKENIZER,
        other_caches=other_runs)).resolve()
  else:
    tokenizer_path = Path(options.tokenizer).resolve()
  try:
    tokenizers = tokenizers_lib.load_tokenizers(tokenizer_path)
  except (tokenizers_lib.TokenizerError, OSError) as e:  # OSError: an unreadable SavedModel
    raise UsageError(f"--tokenizer={options.tokenizer}: {e}") from e
  input_vocab_size, target_vocab_size = tokenizers_lib.vocab_sizes(tokenizers)
  run_checks.check_vocabulary_sizes(config, {"pt": input_vocab_size, "en": target_vocab_size},
                                    f"the tokenizer {tokenizer_path}")

  if chief:
    files.lock_run_folder(model_dir)
  mismatch = run_folder.vocabulary_mismatch(model_dir,
                                          tokenizers_lib.vocabulary_hash(tokenizers))
  if mismatch and any(run_folder.checkpoint_dir(model_dir).glob("ckpt-*.index")):
    raise UsageError(f"--tokenizer={options.tokenizer}: {mismatch}, or a new --model_dir")

  with out_of_memory_said("building the model", "a smaller configuration (config.model)"):
    trainer = TensorFlowTrainer(
        config, input_vocab_size=input_vocab_size, target_vocab_size=target_vocab_size,
        model_dir=model_dir, strategy=strategy, mixed_precision=options.mixed_precision,
        jit_compile=options.jit_compile, log_every_steps=options.log_every_steps)
  trainer.restore()
  if chief:  # only now: a refused run leaves the folder's files as they were
    finish.record_run_files(model_dir, config, tokenizer_path,
                            tokenizers_lib.vocabulary_hash(tokenizers), trainer="tensorflow",
                            data=options.data)

  # XLA compiles a step per batch shape: under --jit_compile and on TPUs the
  # batches are padded to their bucket's length, and TPUs, which need static
  # shapes, also drop each bucket's last partial batch.
  drop_remainder = isinstance(strategy, tf.distribute.TPUStrategy)
  static_shapes = drop_remainder or options.jit_compile

  # Tokenized once; each epoch's pipeline reads the same in-memory cache.
  tokenized_train = pipeline.tokenize_pairs(ted.pairs_to_dataset(train_pairs), tokenizers,
                                            config.data.max_tokens).cache()

  def make_train_dataset(epoch):
    return pipeline.training_batches(tokenized_train, config, epoch,
                                     drop_remainder=drop_remainder, static_shapes=static_shapes)

  validation_dataset = pipeline.evaluation_batches(
      loss_pairs, tokenizers, config.data,
      drop_remainder=drop_remainder, static_shapes=static_shapes)

  bleu_pairs = {-1: validation_pairs, 0: []}.get(
      options.bleu_examples, validation_pairs[:options.bleu_examples])
  summaries = trainer.summaries
  bleu = finish.Bleu(trainer.model, tokenizers, config, model_dir, bleu_pairs, chief, summaries,
                     options.bleu_method)

  logging.info(plan_line(config, options, len(bleu_pairs) if bleu.available else 0))

  def epoch_end(epoch, record):
    every = options.eval_bleu_every_epochs
    if every and bleu.available and record["complete"] and epoch % every == 0:
      return {"bleu": bleu(f"validation_epoch{epoch}", record["step"])}
    return {}

  result = trainer.fit(make_train_dataset, validation_dataset, epoch_end_callback=epoch_end)
  finish.exit_if_stopped(result, model_dir)

  logging.info(progress.run_summary(result.step, result.start_step, result.history))
  final = {"final": True, "step": result.step}
  translator = None
  # A rerun of a finished command redoes only what is missing at this step.
  exported = run_folder.exported_step(run_folder.export_dir(model_dir))
  if options.export and chief and exported == result.step:
    logging.info("%s already holds step %d: not exported again", run_folder.export_dir(model_dir),
                 result.step)
  elif options.export and chief:
    with stop_signals.StopSignals(finishing="the export") as stop:
      translator, paths = finish.export(trainer, tokenizers, config, model_dir)
    final.update(paths)
    if stop.received is not None:
      finish.stopped_during_export(stop.received, result.step, model_dir)
  if bleu.available and bleu.recorded(result.step):
    logging.info("validation BLEU at step %d is in %s: not computed again", result.step,
                 model_dir / run_folder.METRICS_FILE)
  elif bleu.available:
    final["bleu"] = bleu("validation", result.step, translator)
  if len(final) > 2:
    summaries.append_metrics(final)


@contextlib.contextmanager
def out_of_memory_said(doing: str, remedy: str):
  """Out of memory while ``doing`` (XLA's RESOURCE_EXHAUSTED, TensorFlow's
  ResourceExhaustedError, a MemoryError) as one TrainingError line."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except  (jax.errors.JaxRuntimeError and kin)
    if not (isinstance(e, MemoryError) or "RESOURCE_EXHAUSTED" in str(e)
            or type(e).__name__ == "ResourceExhaustedError"):
      raise
    raise TrainingError(f"out of memory while {doing} ({describe_error(e)}); try {remedy}, "
                   "or free memory") from e


def train_on_shards(config, options: RunOptions, model_dir: Path) -> None:
  """Training from prepared shards on Keras and JAX, without TensorFlow."""
  runtime.hide_jax_logs(options.verbose)
  runtime.use_compilation_cache(options.compilation_cache)
  # Deferred: JAX is kept out of the TensorFlow process, whose start it would slow.
  from transformer.training import jax_engine  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  manifest = shards.read_manifest(options.data)
  try:
    files.lock_run_folder(model_dir)
    mismatch = run_folder.vocabulary_mismatch(model_dir, manifest["tokenizer_vocabulary_sha256"])
    if mismatch and any(run_folder.checkpoint_dir(model_dir).glob("step-*")):
      raise UsageError(f"--data={options.data}: {mismatch}'s shards, or a new --model_dir")
    splits = {}
    for split, limit in (("train", options.train_examples),
                         ("validation", options.validation_examples)):
      splits[split] = shards.load_split(options.data, split).take(limit).trimmed(
          config.data.max_tokens)
      if not len(splits[split]):  # pylint: disable=g-explicit-length-test
        raise UsageError(f"--data={options.data}: the {split} split is empty")
    logging.info("%d training pairs, %d validation pairs (prepared shards)",
                 len(splits["train"]), len(splits["validation"]))
    if int(config.training.length_groups) > 1:
      logging.info("training.length_groups=%d is the TensorFlow step's; under JAX the "
                   "batches' padding to few shapes does its work", config.training.length_groups)
    devices = jax.devices() if options.strategy in ("mirrored", "auto") else jax.devices()[:1]
    with out_of_memory_said("building the model", "a smaller configuration (config.model)"):
      trainer = jax_engine.JaxTrainer(
          config, input_vocab_size=manifest["vocab_sizes"]["pt"],
          target_vocab_size=manifest["vocab_sizes"]["en"], model_dir=model_dir,
          devices=devices, mixed_precision=options.mixed_precision,
          log_every_steps=options.log_every_steps)
    trainer.restore()
    logging.info(plan_line(config, options, 0))
    finish.record_run_files(model_dir, config, Path(manifest["tokenizer"]),
                            manifest["tokenizer_vocabulary_sha256"], trainer="jax",
                            data=options.data)
    with out_of_memory_said("training", "smaller batches (config.data.tokens_per_batch, or "
                            "config.data.batch_size without it) or a smaller config.model"):
      result = trainer.fit(splits["train"], splits["validation"])
    finish.exit_if_stopped(result, model_dir)
    logging.info(progress.run_summary(result.step, result.start_step, result.history))
    if options.export:
      export_dir = run_folder.export_dir(model_dir)
      weights = trainer.engine.final_weights(export_dir / "transformer.weights.h5")
      logging.info("wrote %s (step %d). BLEU and the translator SavedModel come from the "
                   "TensorFlow side: python evaluate.py --model_dir=%s --export_dir=%s",
                   weights, result.step, model_dir, export_dir / run_folder.EXPORT_TRANSLATOR)
  except shards.ShardError as e:
    raise TrainingError(str(e)) from e
  except OSError as e:
    raise TrainingError(describe_error(e)) from e
