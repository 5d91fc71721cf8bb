r"""Tokenizes the training, validation and test data once into token-id shards.

  python prepare.py --config=configs/tutorial.py --data=../shared/data/ted_hrlr_pt_to_en \
      --tokenizer=../shared/data/tutorial_tokenizer --output=prepared/tutorial

writes ``--output`` (:mod:`transformer.data.shards` lists its files): NumPy arrays
of token ids, the tokenizer's vocabularies and identity, and ``manifest.json``.
Training then needs no TensorFlow:

  KERAS_BACKEND=jax python train.py --config=configs/tutorial.py \
      --data=prepared/tutorial --model_dir=runs/tutorial_jax

This step needs TensorFlow and tensorflow-text (the tokenizer is a SavedModel
of TensorFlow Text ops); run it once where they are installed and carry the
folder (about 6 MB for the whole pt->en set) to the machine that trains.
Sentences are trimmed to the config's ``data.max_tokens`` (source) and
``max_tokens + 1`` (target), as train.py trims them. ``--tokenizer=build``
learns WordPiece vocabularies as train.py does (``data.vocabulary``,
``data.vocab_size``) and keeps the tokenizer in ``--tokenizer_cache_dir``.
The test split is written too: ``evaluate.py --split=test`` under JAX and
``lab/bench/accelerator/converge.py`` score it from the folder, which keeps
the validation and test references as in the data: it names no file of the
machine that wrote it, so it can be moved anywhere.

The folder is written whole or not at all (a staging folder renamed into
place); rerunning replaces it. Errors are one ``prepare.py: error: ...`` line.
"""

from pathlib import Path

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from transformer import config as config_lib
from transformer.run import progress
from transformer.run import runtime
from transformer.run import script as script_lib
from transformer.data import shards
from transformer.data import sources
from transformer.run.errors import DataError, UsageError, describe_error

REPO_DIR = Path(__file__).resolve().parent
SPLITS = ("train", "validation", "test")

_CONFIG = config_flags.DEFINE_config_file(
    "config", str(REPO_DIR / "configs" / "tutorial.py"),
    "The configuration train.py will use: its data.max_tokens trims the sentences "
    "(train.py may use the same or a smaller one), data.vocabulary and data.vocab_size "
    "build the tokenizer with --tokenizer=build.", lock_config=True)
_DATA = flags.DEFINE_string("data", sources.AUTO, sources.DATA_HELP)
_TOKENIZER = flags.DEFINE_string(
    "tokenizer", "build",
    "A tokenizer SavedModel with .pt and .en tokenizers (e.g. ../shared/data/"
    "tutorial_tokenizer), or 'build' to learn one from the training pairs.")
_TOKENIZER_CACHE_DIR = flags.DEFINE_string(
    "tokenizer_cache_dir", None,
    "Where --tokenizer=build keeps the tokenizer (default: <output>.tokenizers beside "
    "--output). Keep it: evaluate.py and the export read it.")
_OUTPUT = flags.DEFINE_string("output", None, "The folder to write (replaced if it exists).")
_TRAIN_EXAMPLES = flags.DEFINE_integer(
    "train_examples", 0, "Only the first N training pairs (TFDS order); 0: all.")
_VALIDATION_EXAMPLES = flags.DEFINE_integer(
    "validation_examples", 0, "Only the first N validation pairs; 0: all.")
_TEST_EXAMPLES = flags.DEFINE_integer(
    "test_examples", 0, "Only the first N test pairs; 0: all.")
_VERBOSE = flags.DEFINE_bool("verbose", False, "Also show TensorFlow's own log lines.")


def check_flags(config) -> None:
  """Every check that needs no TensorFlow; raises UsageError."""
  try:
    config_lib.validate_config(config)
  except config_lib.ConfigError as e:
    raise UsageError(f"invalid configuration: {e}") from e
  if not _OUTPUT.value:
    raise UsageError("--output is required")
  if Path(_OUTPUT.value).exists() and not shards.is_prepared(_OUTPUT.value):
    raise UsageError(f"--output={_OUTPUT.value} exists and is not a prepared folder; "
                     "choose another path")
  if _TOKENIZER.value != "build" and not (Path(_TOKENIZER.value) / "saved_model.pb").is_file():
    raise UsageError(f"--tokenizer={_TOKENIZER.value}: no tokenizer SavedModel there (no "
                     "saved_model.pb); pass one, e.g. ../shared/data/tutorial_tokenizer, "
                     "or --tokenizer=build")
  try:
    data, message = sources.data_source(_DATA.value)
  except DataError as e:
    raise UsageError(str(e)) from e
  names = [f"{language}.{config_lib.SPLIT_FILE_SUFFIX[split]}"
           for split in SPLITS for language in ("pt", "en")]
  missing = [name for name in names
             if data != sources.TFDS and not (Path(data) / name).is_file()]
  if missing:
    raise UsageError(f"--data={data}: not a folder with the TED HRLR files "
                     f"(missing {', '.join(missing)})")
  flags.FLAGS.data = data
  if message:
    logging.info(message)
  for flag in (_TRAIN_EXAMPLES, _VALIDATION_EXAMPLES, _TEST_EXAMPLES):
    if flag.value < 0:
      raise UsageError(f"--{flag.name} must be >= 0, got {flag.value}")


def tokenized(pairs, tokenizers, max_tokens: int):
  """``(pt_ids, en_ids)``: lists of int arrays, trimmed as the pipeline trims them."""
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  pt_ids, en_ids = [], []
  for pt, en in pipeline.tokenize_pairs(ted.pairs_to_dataset(pairs), tokenizers,
                                        max_tokens).as_numpy_iterator():
    pt_ids.append(pt)
    en_ids.append(en)
  return pt_ids, en_ids


def vocabulary(tokenizer) -> list:
  """The tokenizer's tokens in id order."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  ids = tf.range(tokenizer.get_vocab_size(), dtype=tf.int64)[tf.newaxis]
  return [token.decode("utf-8") for token in tokenizer.lookup(ids)[0].numpy()]


def prepare(config) -> Path:
  """Tokenizes the splits and writes the folder; returns its path."""
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top
  output = Path(_OUTPUT.value).resolve()
  limits = {"train": _TRAIN_EXAMPLES.value, "validation": _VALIDATION_EXAMPLES.value,
            "test": _TEST_EXAMPLES.value}
  pairs = {}
  for split in SPLITS:
    pairs[split] = ted.split_pairs(_DATA.value, split)
    if limits[split]:
      pairs[split] = pairs[split][:limits[split]]
    if not pairs[split]:
      raise UsageError(f"--data={_DATA.value}: the {split} split is empty")
  if _TOKENIZER.value == "build":
    cache_dir = Path(_TOKENIZER_CACHE_DIR.value or output.with_name(output.name + ".tokenizers"))
    tokenizer_path = Path(tokenizers_lib.get_or_build_tokenizers(
        pairs["train"], cache_dir, vocab_size=config.data.vocab_size,
        vocabulary=config.data.vocabulary)).resolve()
  else:
    tokenizer_path = Path(_TOKENIZER.value).resolve()
  try:
    tokenizers = tokenizers_lib.load_tokenizers(tokenizer_path)
  except (DataError, OSError) as e:
    raise UsageError(f"--tokenizer={_TOKENIZER.value}: {e}") from e
  splits = {}
  for split in SPLITS:
    with progress.announced(f"tokenizing {len(pairs[split])} {split} pairs"):
      splits[split] = tokenized(pairs[split], tokenizers, config.data.max_tokens)
  manifest = {
      # Where the tokenizer is on this machine: the TensorFlow side's evaluation of a
      # run trained elsewhere reads it back here (tokenizer_path.txt).
      "tokenizer": str(tokenizer_path),
      # The data's name, not its path: the folder keeps the references it scores
      # with, so moved to another machine it needs nothing of this one.
      "data": _DATA.value if _DATA.value == sources.TFDS else Path(_DATA.value).resolve().name,
      "examples": limits,  # 0: the whole split
      "max_tokens": config.data.max_tokens,
      "truncation": "source: max_tokens ids, target: max_tokens + 1 ids ([START]/[END] "
                    "included)",
      "vocabulary": config.data.vocabulary if _TOKENIZER.value == "build" else None,
      "pad_id": tokenizers_lib.PAD_ID, "start_id": tokenizers_lib.START_ID,
      "end_id": tokenizers_lib.END_ID,
  }
  vocabularies = {"pt": vocabulary(tokenizers.pt), "en": vocabulary(tokenizers.en)}
  references = {split: [en for _, en in pairs[split]] for split in shards.REFERENCE_SPLITS}
  return shards.write_prepared(output, splits, vocabularies, manifest,
                               tokenizers_lib.vocabulary_hash(tokenizers), references)


def main(argv):
  runtime.plain_log_lines(_VERBOSE.value)
  if len(argv) > 1:
    raise UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  config = _CONFIG.value
  check_flags(config)
  runtime.import_tensorflow(_VERBOSE.value)
  try:
    output = prepare(config)
  except (DataError, OSError) as e:
    raise UsageError(describe_error(e) if isinstance(e, OSError) else str(e)) from e
  manifest = shards.read_manifest(output)
  counts = ", ".join(f"{split} {c['pairs']} pairs ({c['en_tokens']} en tokens)"
                     for split, c in manifest["splits"].items())
  logging.info("wrote %s: %s; %s ids", output, counts, manifest["dtype"])


def say_stopped(interrupted: KeyboardInterrupt) -> str:
  return (f"{script_lib.stopped_by(interrupted)}; {_OUTPUT.value} is left as it was; rerun "
          "the same command to prepare it")


def run(argv):
  script_lib.run_main(main, argv, "prepare.py", errors=lambda: (UsageError, DataError),
                      stopped_line=say_stopped)


if __name__ == "__main__":
  app.run(run)
