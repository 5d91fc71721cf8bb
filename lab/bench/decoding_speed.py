r"""The exported translator's speed on the CPU: the keras.ops decoding against the old TensorFlow one.

  PYTHONPATH=. python lab/bench/decoding_speed.py \
      --output=lab/bench/results/decoding_speed.json
  # about 5 minutes on a free 2-core CPU

``transformer/inference/decoding.py`` was rewritten in backend-neutral
``keras.ops``; the TensorFlow decoding it replaced is kept as a test oracle
(``tests/helpers/tf_decoding.py``). This script builds one model
(``--config``'s shapes, the tutorial tokenizer's vocabularies, seeded random
weights: the outputs run to their length limit, the slowest case, alike for
both) and exports two translator SavedModels in one process: ``new``, the
project's :func:`transformer.inference.export.export_translator`, and ``old``,
a module whose ``translate`` and ``translate_greedy`` tokenize, decode with
the oracle and detokenize as the translator does. Both are loaded back and
each is called once untimed; then the two alternate, old/new then new/old,
``--rounds`` times on the first ``--sentences`` validation sentences in
batches of ``--batch_size``. Each figure is the fastest round's seconds, in
wall time and in this process's CPU time (on shared cores the CPU time is the
steadier: other processes' use of the cores lengthens the wall time only), and
the median over rounds of old over new in CPU time (each round's pair ran back
to back, so under the same load).

The JSON holds the machine, what else was running at the start and the end
(the cores may be shared), and per method both arms' seconds and old over new
(above 1: the new decoding is faster); both give the same translations.
"""

import json
from pathlib import Path
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from lab.bench import machine  # pylint: disable=g-import-not-at-top,wrong-import-position

_DATA_DIR, _TOKENIZER, _THREADS = machine.define_input_flags()
_CONFIG = flags.DEFINE_string("config", "tutorial", "A configs/ module: the model's shapes.")
_SENTENCES = flags.DEFINE_integer("sentences", 64, "Validation sentences translated per round.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sentences per call.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "old/new rounds.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON output file.")


def old_translator(tokenizers, model, decoding_config):
  """A SavedModel-ready module translating with the oracle (the old decoding)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from helpers import tf_decoding  # pylint: disable=g-import-not-at-top
  from transformer.inference import decoding  # pylint: disable=g-import-not-at-top
  sentences = tf.TensorSpec([None], tf.string)

  class OldTranslator(tf.Module):

    def __init__(self):
      super().__init__()
      self.tokenizers, self.transformer = tokenizers, model

    def _text(self, sentences, method):
      ids = self.tokenizers.pt.tokenize(sentences).to_tensor()
      ids = tf.cast(decoding.trim_source(ids, model.max_position), tf.int32)
      limits = decoding.output_length_limits(ids, decoding_config.extra_length,
                                             model.max_position)
      if method == "greedy":
        tokens = tf_decoding.greedy_decode(self.transformer, ids, limits)
      else:
        tokens, _ = tf_decoding.beam_search(self.transformer, ids, limits,
                                            decoding_config.beam_size,
                                            decoding_config.length_penalty)
      return self.tokenizers.en.detokenize(tf.cast(tokens, tf.int64))

    @tf.function(input_signature=[sentences], autograph=False)
    def translate(self, sentences):
      return self._text(sentences, "beam")

    @tf.function(input_signature=[sentences], autograph=False)
    def translate_greedy(self, sentences):
      return self._text(sentences, "greedy")

  return OldTranslator()


def seconds(fn, batches):
  """``(wall seconds, this process's CPU seconds, outputs)`` of translating ``batches``."""
  start, start_cpu = time.perf_counter(), time.process_time()
  outputs = [fn(batch).numpy().tolist() for batch in batches]
  return time.perf_counter() - start, time.process_time() - start_cpu, outputs


def main(argv):
  del argv
  import importlib  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import tokenizers as tokenizers_lib  # pylint: disable=g-import-not-at-top
  from transformer.inference import export  # pylint: disable=g-import-not-at-top
  from transformer.model import Transformer  # pylint: disable=g-import-not-at-top
  machine.set_threads(_THREADS.value)
  started = machine.other_activity()
  print(machine.summary_line(started), flush=True)
  config = importlib.import_module("configs." + _CONFIG.value).get_config()
  tokenizers = tokenizers_lib.load_tokenizers(_TOKENIZER.value)
  keras.utils.set_random_seed(0)
  model = Transformer.from_model_config(config.model, *tokenizers_lib.vocab_sizes(tokenizers))
  model.build(((None, None), (None, None)))
  pairs = ted.local_split_pairs(_DATA_DIR.value, "validation")[:_SENTENCES.value]
  sources = [pt for pt, _ in pairs]
  batches = [tf.constant(sources[i:i + _BATCH_SIZE.value])
             for i in range(0, len(sources), _BATCH_SIZE.value)]
  folder = Path(tempfile.mkdtemp(prefix="decoding_speed_"))
  export.export_translator(model, tokenizers, folder / "new", config.decoding)
  tf.saved_model.save(old_translator(tokenizers, model, config.decoding), str(folder / "old"))
  arms = {name: tf.saved_model.load(str(folder / name)) for name in ("old", "new")}
  result = {"machine": machine.description(), "started": started, "config": _CONFIG.value,
            "sentences": len(sources), "batch_size": _BATCH_SIZE.value, "methods": {}}
  for method, function in (("greedy", "translate_greedy"), ("beam", "translate")):
    fns = {name: getattr(arm, function) for name, arm in arms.items()}
    outputs = {name: seconds(fn, batches[:1])[2] for name, fn in fns.items()}  # untimed
    times = {name: [] for name in fns}
    cpu_times = {name: [] for name in fns}
    for round_index in range(_ROUNDS.value):
      for name in (("old", "new") if round_index % 2 == 0 else ("new", "old")):
        elapsed, cpu, outputs[name] = seconds(fns[name], batches)
        times[name].append(elapsed)
        cpu_times[name].append(cpu)
    best = {name: min(values) for name, values in times.items()}
    best_cpu = {name: min(values) for name, values in cpu_times.items()}
    paired = [old / new for old, new in zip(cpu_times["old"], cpu_times["new"])]
    result["methods"][method] = {"seconds": best, "rounds": times,
                                 "old_over_new": best["old"] / best["new"],
                                 "cpu_seconds": best_cpu, "cpu_rounds": cpu_times,
                                 "cpu_old_over_new": best_cpu["old"] / best_cpu["new"],
                                 "cpu_old_over_new_median": statistics.median(paired),
                                 "same_translations": outputs["old"] == outputs["new"]}
    print(method, json.dumps(result["methods"][method]), flush=True)
  result["ended"] = machine.other_activity()
  print(machine.summary_line(result["ended"]), flush=True)
  if _OUTPUT.value:
    Path(_OUTPUT.value).write_text(json.dumps(result, indent=1, default=list) + "\n",
                                   encoding="utf-8")


if __name__ == "__main__":
  app.run(main)
