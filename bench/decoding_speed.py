"""Decoding speed: the tutorial's uncached loop against cached, batched decoding.

  PYTHONPATH=. python bench/decoding_speed.py --num_sentences 16 --output_length 32

Builds the ``tutorial`` configuration's model (untrained weights: speed does not
depend on them) with the tutorial's tokenizer, takes the first N validation
sentences and decodes them with

* uncached greedy, one sentence at a time (the tutorial's ``Translator``: the
  whole model re-runs on the growing output at every step),
* cached greedy, one sentence at a time,
* cached greedy, batched,
* beam search (beam 4, α = 0.6), cached and batched.

[END] is made impossible so that every sentence produces exactly
``--output_length`` tokens under every method: the comparison is per token.
Each function is traced once before timing. Prints sentences/second,
milliseconds per output token of the result (beam search does beam × the work
per token) and the speed-up over the uncached baseline of the same run.
"""

from pathlib import Path
import time

from absl import app
from absl import flags
import tensorflow as tf

from configs import tutorial
from transformer import data
from transformer import decoding
from transformer.model import Transformer
from transformer.tokenizers import load_tokenizers, vocab_sizes

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

_NUM_SENTENCES = flags.DEFINE_integer("num_sentences", 16, "Validation sentences decoded.")
_OUTPUT_LENGTH = flags.DEFINE_integer("output_length", 32, "Tokens produced per sentence.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 16, "Sentences per batch (batched methods).")
_DATA_DIR = flags.DEFINE_string("data_dir", str(SHARED_DATA / "ted_hrlr_pt_to_en"),
                                "TED HRLR pt-en files.")
_TOKENIZER = flags.DEFINE_string("tokenizer", str(SHARED_DATA / "tutorial_tokenizer"),
                                 "Tokenizer SavedModel.")


class WithoutEnd:
  """The model with [END] given probability 0: every output runs to its limit."""

  def __init__(self, model):
    self.model = model

  def _forbid_end(self, logits):
    return logits + tf.one_hot(decoding.END_ID, tf.shape(logits)[-1], on_value=-1e9,
                               off_value=0.0)

  def __call__(self, inputs, training=False):
    return self._forbid_end(self.model(inputs, training=training))

  def encode(self, source_ids, training=False):
    return self.model.encode(source_ids, training=training)

  def initial_cache(self, context, max_length):
    return self.model.initial_cache(context, max_length)

  def decode_step(self, ids, index, cache, source_mask):
    logits, cache, weights = self.model.decode_step(ids, index, cache, source_mask)
    return self._forbid_end(logits), cache, weights


def time_method(decode, batches):
  """Seconds to decode every batch (after one untimed call that traces)."""
  decode(*batches[0])
  start = time.perf_counter()
  for source_ids, max_lengths in batches:
    decode(source_ids, max_lengths).numpy()
  return time.perf_counter() - start


def main(argv):
  del argv
  config = tutorial.get_config()
  tokenizers = load_tokenizers(_TOKENIZER.value)
  model = Transformer.from_model_config(config.model, *vocab_sizes(tokenizers))
  model.build(((None, None), (None, None)))
  never_ends = WithoutEnd(model)

  sentences = [pt for pt, _ in data.local_split_pairs(_DATA_DIR.value, "validation")]
  sentences = sentences[:_NUM_SENTENCES.value]
  num, length = len(sentences), _OUTPUT_LENGTH.value

  def make_batches(size):
    batches = []
    for start in range(0, num, size):
      ids = tokenizers.pt.tokenize(tf.constant(sentences[start:start + size])).to_tensor()
      ids = tf.cast(ids, tf.int32)
      batches.append((ids, tf.fill([tf.shape(ids)[0]], length)))
    return batches

  singles, batched = make_batches(1), make_batches(_BATCH_SIZE.value)
  spec = (tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32))

  def graph(fn):
    return tf.function(fn, input_signature=spec, autograph=False)

  beam = config.decoding.beam_size
  methods = [
      ("uncached greedy, 1 sentence (tutorial)", singles,
       graph(lambda s, l: decoding.greedy_decode_uncached(never_ends, s, l))),
      ("cached greedy, 1 sentence", singles,
       graph(lambda s, l: decoding.greedy_decode(never_ends, s, l))),
      (f"cached greedy, batch {_BATCH_SIZE.value}", batched,
       graph(lambda s, l: decoding.greedy_decode(never_ends, s, l))),
      (f"beam {beam}, batch {_BATCH_SIZE.value}", batched,
       graph(lambda s, l: decoding.beam_search(never_ends, s, l, beam,
                                               config.decoding.length_penalty)[0])),
  ]
  print(f"tutorial model, {num} validation sentences, {length} output tokens each, "
        f"{tf.config.threading.get_intra_op_parallelism_threads() or 'default'} threads")
  print(f"{'method':<40} {'sent/s':>8} {'ms/token':>9} {'speed-up':>9}")
  baseline = None
  for name, batches, decode in methods:
    seconds = time_method(decode, batches)
    baseline = baseline or seconds
    print(f"{name:<40} {num / seconds:8.2f} {1000 * seconds / (num * length):9.2f} "
          f"{baseline / seconds:8.1f}x")


if __name__ == "__main__":
  app.run(main)
