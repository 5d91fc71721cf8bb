"""Prepared shards (transformer/data/shards.py): written whole, read back or refused
with the file named, and batched as the tf.data pipeline batches."""

import json

import ml_collections
import numpy as np
import pytest

from transformer.data import buckets
from transformer.data import shards


def random_pairs(count, seed=0, max_length=40):
  rng = np.random.default_rng(seed)
  def sentence():
    return rng.integers(4, 500, rng.integers(2, max_length)).astype(np.int32)
  return [sentence() for _ in range(count)], [sentence() for _ in range(count)]


def data_config(**fields):
  config = ml_collections.ConfigDict(dict(max_tokens=32, batch_size=8, tokens_per_batch=0,
                                          bucketing=False))
  config.update(fields)
  return config


def write(tmp_path, pt, en, vocab_size=1000):
  vocabularies = {language: [f"t{i}" for i in range(vocab_size)] for language in ("pt", "en")}
  return shards.write_prepared(tmp_path / "prepared", {"train": (pt, en)}, vocabularies,
                               {"max_tokens": 64}, "ab" * 32)


def test_written_split_reads_back_as_int16_ids(tmp_path):
  pt, en = random_pairs(50)
  prepared = write(tmp_path, pt, en)
  assert np.load(prepared / "train.pt.npy").dtype == np.int16
  split = shards.load_split(prepared, "train")
  assert len(split) == 50
  assert all(np.array_equal(a, b) for a, b in zip(split.pt + split.en, pt + en))
  manifest = shards.read_manifest(prepared)
  assert manifest["splits"]["train"]["pt_tokens"] == sum(map(len, pt))
  assert (prepared / "tokenizer_vocabulary_sha256.txt").read_text().strip() == "ab" * 32
  assert not list(tmp_path.glob(".prepared*")), "staging folders left behind"


def test_ids_are_int32_when_the_vocabulary_does_not_fit_int16(tmp_path):
  pt, en = random_pairs(3)
  assert np.load(write(tmp_path, pt, en, vocab_size=40000) / "train.en.npy").dtype == np.int32


def test_a_file_cut_short_is_refused_naming_the_folder(tmp_path):
  prepared = write(tmp_path, *random_pairs(20))
  ids = np.load(prepared / "train.en.npy")
  np.save(prepared / "train.en.npy", ids[:-5])
  with pytest.raises(shards.ShardError, match="do not match manifest.json"):
    shards.load_split(prepared, "train")
  (prepared / "manifest.json").write_text("{")
  with pytest.raises(shards.ShardError, match="manifest.json: not a readable manifest"):
    shards.load_split(prepared, "train")


def test_both_batchings_bucket_boundaries():
  """One rule, two recipes: the tf.data pipeline's buckets grow by 10% from
  length 8 (by at least 1), the JAX batches' are 16 long."""
  growing = buckets.bucket_boundaries(128, **buckets.GROWING_BUCKETS)
  assert growing == [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 24, 26, 28, 30, 33,
                     36, 39, 42, 46, 50, 55, 60, 66, 72, 79, 86, 94, 103, 113, 124]
  assert buckets.bucket_max_lengths(growing, 128)[-3:] == [112, 123, 128]
  fixed_step = buckets.bucket_boundaries(128, **buckets.FIXED_STEP_BUCKETS)
  assert fixed_step == [17, 33, 49, 65, 81, 97, 113]
  assert buckets.bucket_boundaries(64, **buckets.FIXED_STEP_BUCKETS) == [17, 33, 49]
  assert buckets.bucket_boundaries(16, **buckets.FIXED_STEP_BUCKETS) == []


def unpadded(batches):
  """Each batch as the set of its (source, target) pairs with padding cut, the
  target rebuilt from decoder inputs and labels."""
  result = []
  for (source, target_input), labels in batches:
    rows = set()
    for s, t, l in zip(np.asarray(source), np.asarray(target_input), np.asarray(labels)):
      if not l.any():
        continue  # a row of padding
      length = int(np.count_nonzero(l))
      rows.add((tuple(s[s != 0]), tuple(t[:1]) + tuple(l[:length])))
    result.append(frozenset(rows))
  return result


@pytest.mark.parametrize("fields", [dict(), dict(bucketing=True), dict(tokens_per_batch=96)])
def test_batches_hold_the_sentences_tf_data_batches_together(fields):
  """``padded_batch`` as in the pipeline; with buckets, ``bucket_by_sequence_length``
  on buckets 16 long (the pipeline's call, with JAX's buckets)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  pt, en = random_pairs(120, seed=1)
  config = data_config(**fields)
  split = shards.Split(pt, en).trimmed(config.max_tokens)
  dataset = tf.data.Dataset.from_generator(
      lambda: (((p, e[:-1]), e[1:]) for p, e in zip(split.pt, split.en)), output_signature=(
          (tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32)),
          tf.TensorSpec([None], tf.int32)))
  if config.bucketing or config.tokens_per_batch:
    boundaries, lengths = [17], [16, 32]  # the buckets (0, 16] and (16, 32] of max_tokens 32
    expected = dataset.bucket_by_sequence_length(
        lambda inputs, labels: tf.maximum(tf.shape(inputs[0])[0], tf.shape(labels)[0]),
        boundaries, [config.tokens_per_batch // n if config.tokens_per_batch
                     else config.batch_size for n in lengths])
  else:
    expected = dataset.padded_batch(config.batch_size)
  batches = shards.epoch_batches(split, config, shuffle=False, rows_multiple=3)
  assert sorted(map(sorted, unpadded(batches))) == sorted(map(sorted, unpadded(expected)))
  for (source, target_input), labels in batches:
    # Few shapes: lengths a multiple of LENGTH_MULTIPLE (or max_tokens), rows a
    # multiple of the devices and within the token budget.
    assert source.shape == target_input.shape == labels.shape
    assert source.shape[1] % shards.LENGTH_MULTIPLE == 0 or source.shape[1] == config.max_tokens
    assert source.shape[0] % 3 == 0
    if config.tokens_per_batch:
      assert (source.shape[0] - 2) * source.shape[1] <= config.tokens_per_batch


def test_an_epoch_has_the_same_batches_for_the_same_seed_and_others_for_another():
  split = shards.Split(*random_pairs(64, seed=2))
  def labels(seed):
    return [l.tolist() for _, l in shards.epoch_batches(split, data_config(), seed=seed)]
  assert labels(shards.epoch_seed(0, 1)) == labels(shards.epoch_seed(0, 1))
  assert labels(shards.epoch_seed(0, 1)) != labels(shards.epoch_seed(0, 2))


def test_the_manifest_names_what_was_prepared(tmp_path):
  manifest = json.loads((write(tmp_path, *random_pairs(4)) / "manifest.json").read_text())
  assert manifest["vocab_sizes"] == {"pt": 1000, "en": 1000}
  assert manifest["format"] == shards.FORMAT_VERSION and manifest["max_tokens"] == 64
