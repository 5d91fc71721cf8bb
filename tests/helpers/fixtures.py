"""The shared pytest fixtures: tiny configurations and models, random batches,
trainers, the real data and tokenizers.

A plugin (``pytest_plugins`` in ``tests/conftest.py`` and ``lab/tests/conftest.py``)
so that the library's tests and the lab's use one definition of each. The real data
lives beside the project at ``../shared/data`` (see its README); tests that need it
skip, saying why, when it is absent.
"""

import itertools
import fcntl
import os
from pathlib import Path
import shutil
import tempfile
import time

import pytest

from transformer.config import SHARED_DATA_DIR

# The project modules import TensorFlow, so fixtures import them lazily to keep
# collection fast for tests that do not need it.


def pytest_configure(config):
  """Each test process (each xdist worker, not the controller) gives its JAX
  runs and their child processes a compilation cache of their own for the
  session (train.py's --compilation_cache=auto takes $JAX_COMPILATION_CACHE_DIR):
  the tiny model's shapes compile once per worker, two workers never write one
  entry at once, and the user's ~/.cache is neither read nor filled. A
  JAX_COMPILATION_CACHE_DIR set by the user is kept."""
  controller = getattr(config, "workerinput", None) is None and config.getoption(
      "dist", "no") != "no"
  if controller or "JAX_COMPILATION_CACHE_DIR" in os.environ:
    return
  folder = tempfile.mkdtemp(prefix="transformer-tests-jax-cache-")
  os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
  config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


# What a skipped test's reason tells the user to put where the real data was not found.
_TED_FILES = "the files of datasets/pt_to_en/ in qi18naacl-dataset.tar.gz (docs/data.md)"
_TUTORIAL_TOKENIZER = "the tutorial's ted_hrlr_translate_pt_en_converter folder"


def _require(path: Path, what: str, instead: str) -> Path:
  if not path.exists():
    pytest.skip(f"{what} not found at {path}; to run this test, put {instead} there")
  return path


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
  """``../shared/data`` relative to the project root; skips when absent."""
  return _require(SHARED_DATA_DIR, "shared data folder",
                  f"ted_hrlr_pt_to_en/ ({_TED_FILES}) and tutorial_tokenizer/ "
                  f"({_TUTORIAL_TOKENIZER})")


@pytest.fixture(scope="session")
def ted_data_dir(shared_data_dir) -> Path:
  """The TED HRLR pt->en files (pt.train en.train pt.dev ...)."""
  return _require(shared_data_dir / "ted_hrlr_pt_to_en", "TED HRLR pt-en data", _TED_FILES)


@pytest.fixture(scope="session")
def tutorial_tokenizer_path(shared_data_dir) -> Path:
  """The tutorial's ted_hrlr_translate_pt_en_converter SavedModel."""
  return _require(shared_data_dir / "tutorial_tokenizer", "tutorial tokenizer SavedModel",
                  _TUTORIAL_TOKENIZER)


@pytest.fixture(scope="session")
def tutorial_tokenizers(tutorial_tokenizer_path):
  """The tutorial's converter, loaded."""
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  return tokenizers.load_tokenizers(tutorial_tokenizer_path)


@pytest.fixture(scope="session")
def train_pairs(ted_data_dir):
  """The 51,785 training pairs in TFDS order."""
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  return ted.local_split_pairs(ted_data_dir, "train")


def cache_dir(config, tmp_path_factory, name: str) -> Path:
  """The folder ``name`` in pytest's cache, kept across sessions; a fresh
  temporary folder when the cache plugin is off (``-p no:cacheprovider``),
  where ``config`` has no ``cache``."""
  cache = getattr(config, "cache", None)
  if cache is None:
    return tmp_path_factory.mktemp(name)
  return Path(cache.mkdir(name))


@pytest.fixture(scope="session")
def tokenizer_cache_dir(request, tmp_path_factory) -> Path:
  """Where built tokenizers are kept (see :func:`cache_dir`)."""
  return cache_dir(request.config, tmp_path_factory, "transformer_tokenizers")


@pytest.fixture(scope="session")
def guide_tokenizers_build(tokenizer_cache_dir, train_pairs):
  """Our tokenizers built with the subword guide's settings on the full train split.

  The build takes about a minute of one core, so it is cached in pytest's cache folder
  and reused across sessions: ``pytest --cache-clear`` forces a rebuild (and
  ``-p no:cacheprovider`` builds into a temporary folder).

  Returns:
    (path of the SavedModel, seconds the call took: the build time on a
    rebuild, about zero when cached).
  """
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  start = time.time()
  # The test workers share the cache: one builds, the others wait for it
  # rather than build too and replace the folder another is reading.
  with open(tokenizer_cache_dir / ".build.lock", "w", encoding="utf-8") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    path = tokenizers.get_or_build_tokenizers(train_pairs, tokenizer_cache_dir, vocab_size=8000,
                                              vocabulary="separate")
  return path, time.time() - start


@pytest.fixture(scope="session")
def guide_tokenizers(guide_tokenizers_build):
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  return tokenizers.load_tokenizers(guide_tokenizers_build[0])


# The tiny model the tests build and train. Factories, so that tests and
# fixtures of any scope can vary what they need.


@pytest.fixture(scope="session")
def tiny_config():
  """``tiny_config(**model_fields)``: a fresh configs/tiny.py config with those
  ``config.model`` fields set (``dropout_rate=0.0`` where runs must agree)."""
  from configs import tiny  # pylint: disable=g-import-not-at-top

  def make(**model_fields):
    config = tiny.get_config()
    for name, value in model_fields.items():
      config.model[name] = value
    return config
  return make


@pytest.fixture(scope="session")
def short_config(tiny_config):
  """``short_config(**model_fields)``: ``tiny_config`` with 64 positions and
  outputs at most 5 tokens longer than their input, so that decoding is quick."""
  def make(**model_fields):
    config = tiny_config(max_position=64, **model_fields)
    config.decoding.extra_length = 5
    return config
  return make


@pytest.fixture(scope="session")
def make_model(tiny_config):
  """``make_model(config=None, vocab_sizes=(30, 30), **model_fields)``: a built
  Transformer of ``config.model`` (by default ``tiny_config(**model_fields)``),
  its weights drawn from Keras' seed as it stands (``keras.utils.set_random_seed``
  first for the same weights)."""
  from transformer.model import Transformer  # pylint: disable=g-import-not-at-top

  def make(config=None, vocab_sizes=(30, 30), **model_fields):
    if config is None:
      config = tiny_config(**model_fields)
    else:
      assert not model_fields, "set the fields on the config passed"
    model = Transformer.from_model_config(config.model, *vocab_sizes)
    model.build(((None, None), (None, None)))  # (source ids, target ids), any lengths
    return model
  return make


@pytest.fixture(scope="session")
def random_batch():
  """``random_batch(seed=0, rows=3, source_length=7, target_length=6, vocab=30,
  lowest=4)``: (source ids, target ids), int32 arrays drawn uniformly from
  ``lowest .. vocab - 1`` (4: past [PAD], [UNK], [START], [END]) by one
  generator, source first; no padding (tests that need some zero the tail)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  def make(seed=0, rows=3, source_length=7, target_length=6, vocab=30, lowest=4):
    rng = np.random.default_rng(seed)
    return (rng.integers(lowest, vocab, (rows, source_length)).astype(np.int32),
            rng.integers(lowest, vocab, (rows, target_length)).astype(np.int32))
  return make


@pytest.fixture(scope="session")
def random_dataset(random_batch):
  """``random_dataset(batch_size, **random_batch_args)``: random pairs as the
  pipeline gives training batches, ``((source, target[:, :-1]), target[:, 1:])``
  of int64 ids, ``batch_size`` pairs a batch (the pairs: ``random_batch``'s)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def make(batch_size, **random_batch_args):
    source, target = (ids.astype("int64") for ids in random_batch(**random_batch_args))
    return tf.data.Dataset.from_tensor_slices(
        ((source, target[:, :-1]), target[:, 1:])).batch(batch_size)
  return make


@pytest.fixture(scope="session")
def uneven_batch():
  """(source, decoder input, labels): 7 rows of very different lengths (source
  1-17 tokens, target 2-14), int64 ids 1..49 zero-padded to the longest, the
  labels one token after the decoder input as the pipeline makes them: a batch
  that length groups split unevenly."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def ragged_batch(lengths, seed):
    """Rows of ids 1..49 of the given lengths, zero-padded to the longest."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((len(lengths), max(lengths)), np.int64)
    for row, length in enumerate(lengths):
      ids[row, :length] = rng.integers(1, 50, length)
    return ids

  source = ragged_batch([3, 17, 5, 9, 1, 12, 4], seed=1)
  target = ragged_batch([6, 2, 14, 8, 3, 11, 5], seed=2)
  return tf.constant(source), tf.constant(target[:, :-1]), tf.constant(target[:, 1:])


@pytest.fixture(scope="session")
def make_trainer():
  """``make_trainer(config, vocab_sizes, model_dir=None, **options)``: the
  TensorFlowTrainer train.py would make of ``config``, without a progress bar (``options``:
  the TensorFlowTrainer's other keywords, e.g. ``jit_compile``)."""
  from transformer.training.tf_engine import TensorFlowTrainer  # pylint: disable=g-import-not-at-top

  def make(config, vocab_sizes, model_dir=None, **options):
    return TensorFlowTrainer(config, input_vocab_size=vocab_sizes[0],
                            target_vocab_size=vocab_sizes[1], model_dir=model_dir,
                            progress=False, **options)
  return make


@pytest.fixture(scope="session")
def tiny_translator_dir(tutorial_tokenizers, tiny_config, make_model, tmp_path_factory) -> Path:
  """An exported translator SavedModel of an untrained configs/tiny.py model
  (seeded), with the tutorial's tokenizers: for command-line tests."""
  import keras  # pylint: disable=g-import-not-at-top
  from transformer.inference import export  # pylint: disable=g-import-not-at-top
  from transformer.data import tokenizers  # pylint: disable=g-import-not-at-top
  config = tiny_config()
  keras.utils.set_random_seed(0)
  model = make_model(config, tokenizers.vocab_sizes(tutorial_tokenizers))
  export_dir = tmp_path_factory.mktemp("tiny_translator") / "translator"
  export.export_translator(model, tutorial_tokenizers, export_dir, config.decoding)
  return export_dir


def fixed_epoch_clock(seconds):
  """A stand-in for the loop's ``EpochClock`` under which the n-th epoch clocked
  (from 1; a resumed epoch is clocked again) takes ``seconds(n)`` of training."""
  from transformer.training import summaries  # pylint: disable=g-import-not-at-top
  count = itertools.count(1)

  class Clock(summaries.EpochClock):

    def __init__(self, seconds_before=0.0):
      super().__init__(seconds_before)
      self._seconds = seconds(next(count))

    def run_seconds(self, now=None):
      return self._seconds
  return Clock
