"""Exported translator SavedModel and .keras saving (transformer/inference/export.py).

translate.py, which reads them: tests/scripts/."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer.inference import export

MAX_POSITION = 64  # short_config's
LONG_SENTENCE = " ".join(["palavra"] * 10_000)
BAD_INPUTS = ["", "   \t ", "✈✈ 漢字 ☃", LONG_SENTENCE, "e quando melhoramos a procura ."]


def subprocess_env():
  """The environment without PYTHONPATH, so the project cannot be imported."""
  return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def exported(short_config, make_model, tutorial_tokenizers, tmp_path_factory):
  """(export dir, in-memory Translator, loaded SavedModel) for an untrained tiny model."""
  from transformer.data.tokenizers import vocab_sizes  # pylint: disable=g-import-not-at-top
  config = short_config()
  keras.utils.set_random_seed(0)
  model = make_model(config, vocab_sizes(tutorial_tokenizers))
  export_dir = tmp_path_factory.mktemp("export") / "translator"
  translator = export.export_translator(model, tutorial_tokenizers, export_dir,
                                        config.decoding)
  return export_dir, translator, tf.saved_model.load(str(export_dir))


def as_text(strings):
  return [s.decode("utf-8") for s in strings.numpy()]


@pytest.mark.slow
def test_saved_model_translates_bad_inputs_one_string_each(exported):
  _, _, loaded = exported
  for translate in (loaded.translate, loaded.translate_greedy):
    together = translate(tf.constant(BAD_INPUTS))
    assert together.dtype == tf.string and together.shape == (len(BAD_INPUTS),)
    # Every sentence alone gives what it gives within the mixed batch.
    for sentence, translation in zip(BAD_INPUTS, as_text(together)):
      assert as_text(translate(tf.constant([sentence]))) == [translation]
  served = loaded.signatures["serving_default"](sentences=tf.constant(BAD_INPUTS))
  assert as_text(served["output_0"]) == as_text(loaded.translate(tf.constant(BAD_INPUTS)))


def test_saved_model_matches_in_memory_translator(exported):
  _, translator, loaded = exported
  sentences = tf.constant(BAD_INPUTS[-1:] + ["mas e se estes fatores fossem ativos ?"])
  assert as_text(loaded.translate(sentences)) == as_text(translator.translate(sentences))
  assert (as_text(loaded.translate_greedy(sentences))
          == as_text(translator.translate_greedy(sentences)))


def test_attention_output_shapes_and_trimmed_source(short_config, exported):
  _, _, loaded = exported
  result = loaded.translate_with_attention(tf.constant(BAD_INPUTS))
  batch = len(BAD_INPUTS)
  source_tokens, tokens, attention = (result["source_tokens"], result["tokens"],
                                      result["attention"])
  assert result["translation"].shape == (batch,)
  assert source_tokens.shape == (batch, MAX_POSITION)  # The 10,000-word sentence, cut.
  assert source_tokens[3, 0] == b"[START]" and source_tokens[3, -1] == b"[END]"
  assert source_tokens[0, :3].numpy().tolist() == [b"[START]", b"[END]", b"[PAD]"]
  assert b"[UNK]" in source_tokens[2].numpy().tolist()
  out_len = tokens.shape[1]
  assert result["token_ids"].shape == (batch, out_len) and out_len <= MAX_POSITION
  assert attention.shape == (batch, short_config().model.num_heads, out_len, MAX_POSITION)
  # Each position's attention is a distribution over the real source tokens only.
  np.testing.assert_allclose(tf.reduce_sum(attention, -1), 1.0, atol=1e-5)
  np.testing.assert_array_equal(attention[0, :, :, 2:], 0.0)
  assert (as_text(result["translation"])
          == as_text(loaded.translate(tf.constant(BAD_INPUTS))))


@pytest.mark.slow
def test_loads_in_fresh_python_with_only_tensorflow(exported, tmp_path):
  export_dir, translator, _ = exported
  script = f"""
import json, sys
import tensorflow as tf
import tensorflow_text
translator = tf.saved_model.load({str(export_dir)!r})
sentences = tf.constant({BAD_INPUTS[-2:]!r})
result = {{
    "beam": [s.decode() for s in translator.translate(sentences).numpy()],
    "served": [s.decode() for s in translator.signatures["serving_default"](
        sentences=sentences)["output_0"].numpy()],
    "project_imported": any(m.startswith(("transformer", "configs")) for m in sys.modules),
}}
print(json.dumps(result))
"""
  run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=subprocess_env(),
                       capture_output=True, text=True, timeout=300, check=False)
  assert run.returncode == 0, run.stderr[-3000:]
  result = json.loads(run.stdout.strip().splitlines()[-1])
  expected = as_text(translator.translate(tf.constant(BAD_INPUTS[-2:])))
  assert result == {"beam": expected, "served": expected, "project_imported": False}


def test_keras_file_reloads_with_identical_outputs(make_model, short_config, tmp_path):
  keras.utils.set_random_seed(0)
  model = make_model(short_config(), (50, 40))
  path = export.save_keras_model(model, tmp_path / "model.keras")
  reloaded = keras.models.load_model(path)
  inputs = (tf.constant([[2, 5, 6, 7, 3], [2, 9, 3, 0, 0]]), tf.constant([[2, 11, 12], [2, 13, 0]]))
  np.testing.assert_array_equal(model(inputs, training=False), reloaded(inputs, training=False))
  assert reloaded.get_config()["max_position"] == MAX_POSITION


def test_save_keras_model_wants_the_keras_suffix(make_model, short_config, tmp_path):
  with pytest.raises(ValueError, match=r"\.keras"):
    export.save_keras_model(make_model(short_config(), (50, 40)), tmp_path / "model.h5")
