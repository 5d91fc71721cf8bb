"""The JAX backend of :func:`transformer.inference.evaluation.evaluate`, with no
TensorFlow import: a ``prepare.py`` folder's ids decoded by
:class:`~transformer.inference.jax_decoding.JaxDecoder`, turned back into text
from its ``vocab.en.txt``; ``whole_word`` reads its ``references.<split>.en.txt``;
both checked against the manifest.
"""

from typing import List

from transformer.data import shards
from transformer.data import ted
from transformer.data.detokenize import Detokenizer
from transformer.inference.evaluation import DecodeBatch, DataError, Restored
from transformer.inference.evaluation import padded, restore_run
from transformer.inference.jax_decoding import JaxDecoder
from transformer.run.run_folder import PathLike


class PreparedData:
  """``split`` of ``prepared_dir``, its first ``limit`` sentences (0: all)."""

  def __init__(self, prepared_dir: PathLike, split: str, limit: int = 0):
    self.split = split
    self._manifest = shards.read_manifest(prepared_dir)
    if split not in self._manifest["splits"]:
      raise DataError(missing_split(prepared_dir, split))
    # Checked before any decoding: an edited token changes every hypothesis.
    self.detokenize = Detokenizer.from_file(shards.checked_file(prepared_dir, "vocab.en.txt"))
    whole_split = shards.load_split(prepared_dir, split)
    self.ids, self.split_size = whole_split.take(limit), len(whole_split)
    self.references = raw_references(prepared_dir, split, len(self.ids))

  def restore(self, model_dir: PathLike, average_last: int = 0) -> Restored:
    sizes = self._manifest["vocab_sizes"]
    return restore_run(model_dir, self._manifest["tokenizer_vocabulary_sha256"],
                       (sizes["pt"], sizes["en"]), "the prepared folder's ids", average_last)

  @staticmethod
  def decoder(model, method: str, decoding_config, batch_size: int) -> DecodeBatch:
    decoder = JaxDecoder(model, method, **decoding_config.to_dict())
    # batch_size rows and a multiple of LENGTH_MULTIPLE ids: jax.jit compiles a
    # few shapes only; rows of padding decode nothing.
    return lambda batch: decoder(padded(batch, batch_size, shards.LENGTH_MULTIPLE))[0][:len(batch)]


def raw_references(prepared_dir: PathLike, split: str, count: int) -> List[str]:
  """The first ``count`` English sentences of ``split`` as in the data: the
  folder's copy or, for a folder prepared before it kept one, its TED files."""
  kept = shards.read_references(prepared_dir, split)
  if kept is not None:
    return kept[:count]
  data = shards.read_manifest(prepared_dir).get("data")
  if not data or data == "tfds":
    raise DataError(
        f"{prepared_dir} holds no {split} references (the whole_word scoring's) and names no "
        "TED files to read them from; run prepare.py again to keep them in the folder")
  try:
    pairs = ted.local_split_pairs(data, split)
  except (DataError, OSError) as e:
    raise DataError(
        f"the whole_word scoring reads the references from the TED files the folder was "
        f"prepared from, {data} (the folder predates the references kept in "
        f"it: prepare it again to carry them): {e}") from e
  return [en for _, en in pairs[:count]]


def missing_split(prepared_dir: PathLike, split: str) -> str:
  """The line for a folder prepared before prepare.py wrote the test split."""
  return (f"{prepared_dir} holds no {split} split (prepared by an older prepare.py, which "
          f"wrote train and validation only); run prepare.py again with the same flags to "
          f"write it")


