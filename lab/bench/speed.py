"""Speed of the tutorial's code against this project's, in one process (issue #9).

  python lab/bench/speed.py                      # under 15 minutes on one free core
  python lab/bench/speed.py --steps=2 --rounds=1 --decode_sentences=4 \\
      --tutorial_sentences=1 --rss_arms=    # a smoke run

Training (the ``tutorial`` model, the tutorial's tokenizer, the real training
split): the tutorial's model and ``fit`` step (``tests/helpers/tutorial_baseline.py``)
on the tutorial's random ``padded_batch(64)`` batches, against
``transformer.training.tf_engine.TensorFlowTrainer`` with ``configs/tutorial.py`` on the *same*
random batches (model and step alone): once computing each batch as it comes,
and once as ``--length_groups`` sub-batches of similar length
(``transformer/training/tf_step.py``: the same gradient on fewer padded positions); then on
length-bucketed batches of 64 and on token-budget batches (§5.1). Each arm's batches are drawn once and replayed, so
every round sees the same data; every arm first runs its batches once untimed
(tracing), then the arms run in turn, A/B/C/D/A/B/C/D, so that a change in what
else the machine does hits all alike. Each figure comes from the arm's fastest
round (every round is in the JSON): a round can stall outside the measured code
(tf.data's autotuner held up dropping iterators until the pipeline turned it
off, README "Data and tokenizers"), and a stall only ever adds time. Figures: real (non-padding) target
tokens per second, seconds per step, and useful GFLOP/s: the multiply-adds of
the forward pass over real tokens only (projections, attention over real
positions, causal attention counted once per visible pair, feed-forward,
output layer; embeddings and padding count nothing), ×3 for the backward pass,
and that as a fraction of a 2048×2048 float32 ``tf.matmul`` timed in the same
run (the machine's practical peak).

Decoding (same model, weights from the training above, [END] made impossible
so that every method produces exactly ``--output_length`` tokens): the
tutorial's ``Translator`` run eagerly and its ``ExportTranslator``
(``tf.function``), one sentence at a time, the whole decoder re-run per token;
against this project's cached greedy decoding and beam search
(``transformer.inference.decoding``) on batches of ``--batch_size`` sentences, from text
to text like ``transformer.inference.export.Translator``. Same A/B alternation.

Peak resident memory, each in a fresh process: the tutorial's training, ours
(token-budget batches), and the paper's ``base`` model (joint 37,000-token
vocabulary, shared weights) on 25,000-token batches, computed as
``--base_length_groups`` sub-batches one after the other.

Writes one JSON record (machine, versions, what else was running at the start
and the end, every figure, every ratio against its target) to ``--output`` and
prints a table.
"""

import json
import os
from pathlib import Path
import subprocess
import sys
import time

from absl import app
from absl import flags
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lab.bench import machine  # pylint: disable=g-import-not-at-top,wrong-import-position
from tests.helpers import tutorial_baseline  # pylint: disable=g-import-not-at-top,wrong-import-position

_DATA_DIR, _TOKENIZER, _THREADS = machine.define_input_flags()
_TRAIN_PAIRS = flags.DEFINE_integer("train_pairs", 20000,
                                    "Training pairs (TFDS order) the batches are drawn from.")
# Six steps keep the whole benchmark, memory children included, under 15
# minutes on one core (eight took 16.3: lab/bench/README.md).
_STEPS = flags.DEFINE_integer("steps", 6, "Timed training steps per arm and round.")
_ROUNDS = flags.DEFINE_integer("rounds", 2, "A/B rounds, after one untimed warm-up pass.")
_TOKENS_PER_BATCH = flags.DEFINE_integer("tokens_per_batch", 8000,
                                         "Token budget per side of our token-budget arm.")
_LENGTH_GROUPS = flags.DEFINE_integer(
    "length_groups", 8, "training.length_groups of our arm on the tutorial's random batches "
    "(transformer/training/tf_step.py).")
_BASE_LENGTH_GROUPS = flags.DEFINE_integer(
    "base_length_groups", 32, "training.length_groups of the base-model memory measurement "
    "(32: 3.59 GiB, lab/bench/results/speed_base_memory_loop.json).")
_OUTPUT_LENGTH = flags.DEFINE_integer("output_length", 32, "Tokens decoded per sentence.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Sentences per batch, our decoding.")
_DECODE_SENTENCES = flags.DEFINE_integer("decode_sentences", 64,
                                         "Validation sentences per round, our decoding.")
_TUTORIAL_SENTENCES = flags.DEFINE_integer(
    "tutorial_sentences", 8, "Sentences per round, the tutorial's ExportTranslator.")
_EAGER_SENTENCES = flags.DEFINE_integer(
    "eager_sentences", 1, "Sentences per round, the tutorial's eager Translator (0: skip).")
_RSS_ARMS = flags.DEFINE_list("rss_arms", ["tutorial", "ours", "base"],
                              "Arms whose peak memory is measured, each in a fresh process.")
_BASE_STEPS = flags.DEFINE_integer("base_steps", 1, "Training steps of the base-model "
                                   "memory measurement.")
_OUTPUT = flags.DEFINE_string("output", str(machine.REPO_ROOT / "lab" / "bench" / "results" /
                                            "speed.json"), "Where the JSON record goes.")
_RSS_CHILD = flags.DEFINE_enum("rss_child", None, ["tutorial", "ours", "base"],
                               "Internal: train one arm and print its peak memory.")

GIB = 2 ** 30
TARGETS = {
    "training_tokens_per_second_vs_tutorial": (">=", 4.0),
    "training_identical_batches_vs_tutorial": (">=", 1.3),
    "training_fraction_of_matmul": (">=", 0.5),
    # Issue #9: "≥ 20× the tutorial's `Translator`", its Python loop run eagerly.
    # Against its tf.function version (ExportTranslator) the ratio is reported
    # without a target.
    "greedy_sentences_per_second_vs_tutorial_translator": (">=", 20.0),
    "beam_time_over_greedy": ("<=", 4.0),
    "base_25k_peak_rss_gib": ("<=", 4.0),
}


# ----------------------------------------------------------------- batches


def model_dims(model_config):
  """Sizes the FLOP count needs; the heads' total width is h·d_k."""
  key_dim = (model_config.d_model if model_config.head_width == "full"
             else model_config.d_model // model_config.num_heads)
  return dict(layers=model_config.num_layers, d_model=model_config.d_model,
              width=model_config.num_heads * key_dim, dff=model_config.dff)


def training_flops(source_lengths, target_lengths, dims, target_vocab):
  """Useful floating-point operations of one training step: 3 × the forward pass
  over the real tokens of each pair (numpy arrays of real lengths S and T)."""
  s, t = np.asarray(source_lengths, np.float64), np.asarray(target_lengths, np.float64)
  d, w, dff = dims["d_model"], dims["width"], dims["dff"]
  encoder = 8 * s * d * w + 4 * s * s * w + 4 * s * d * dff  # Q K V O, QKᵀ and AV, FFN
  decoder = (8 * t * d * w + 4 * (t * (t + 1) / 2) * w  # causal: visible pairs only
             + 4 * t * d * w + 4 * s * d * w + 4 * t * s * w  # cross: Q O on t, K V on s
             + 4 * t * d * dff)
  forward = dims["layers"] * (encoder + decoder) + 2 * t * d * target_vocab
  return 3 * float(forward.sum())


def batch_stats(batches, dims, target_vocab):
  """Steps, real target tokens, padded target positions and useful FLOPs of a
  replayable dataset of ``((source, target_input), labels)``."""
  steps = tokens = positions = 0
  flops = 0.0
  for (source, _), labels in batches:
    source, labels = source.numpy(), labels.numpy()
    target_lengths = (labels != 0).sum(1)
    steps += 1
    tokens += int(target_lengths.sum())
    positions += labels.size
    flops += training_flops((source != 0).sum(1), target_lengths, dims, target_vocab)
  return {"steps": steps, "target_tokens": tokens, "target_positions": positions,
          "padding_fraction": 1 - tokens / positions, "useful_flops": flops}


def training_arms(config, tokenizers, steps):
  """{name: (which code, replayable dataset)}; the tutorial and ours share the
  random batches."""
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  pairs = ted.local_split_pairs(_DATA_DIR.value, "train")[:_TRAIN_PAIRS.value]
  tokenized = pipeline.tokenize_pairs(ted.pairs_to_dataset(pairs), tokenizers,
                                      config.data.max_tokens).cache()

  def batches(**batching):
    dataset = pipeline.batch_tokenized(tokenized, max_tokens=config.data.max_tokens,
                                       seed=0, **batching).take(steps).cache()
    for _ in dataset:  # fills the cache: every later pass replays the same batches
      pass
    return dataset

  random = batches(batch_size=64)
  return {"tutorial, random 64": ("tutorial", random),
          "ours, same random 64": ("ours", random),
          f"ours, same random 64, {_LENGTH_GROUPS.value} length groups": ("ours grouped", random),
          "ours, bucketed 64": ("ours", batches(batch_size=64, bucketing=True)),
          f"ours, {_TOKENS_PER_BATCH.value} tokens/side": (
              "ours", batches(tokens_per_batch=_TOKENS_PER_BATCH.value))}


def with_length_groups(config, groups):
  """A copy of ``config`` whose steps compute ``groups`` sub-batches of similar
  length (transformer/training/tf_step.py; 1: batches as they come, as the tutorial's)."""
  config = config.copy_and_resolve_references()
  config.training.length_groups = groups
  return config


def arm_config(kind, config):
  """``config`` as an arm of ``kind`` trains: "ours" computes batches as they
  come, "ours grouped" as ``--length_groups`` sub-batches (``configs/tutorial.py``
  itself sets a number of groups, so neither may take it as it is)."""
  return with_length_groups(config, _LENGTH_GROUPS.value if kind == "ours grouped" else 1)


def build(kind, config, input_vocab, target_vocab):
  """The tutorial's compiled model or our TensorFlowTrainer, and ``batches -> None`` that
  trains it on a dataset (its ``fit`` or our ``train_on_batches``)."""
  if kind == "tutorial":
    model = tutorial_baseline.TutorialTransformer.from_model_config(
        config.model, input_vocab, target_vocab)
    tutorial_baseline.compile_as_tutorial(model, config.model.d_model,
                                          config.training.warmup_steps)
    return model, lambda batches: model.fit(batches, epochs=1, verbose=0)
  from transformer.training.tf_engine import TensorFlowTrainer  # pylint: disable=g-import-not-at-top
  trainer = TensorFlowTrainer(config, input_vocab_size=input_vocab, target_vocab_size=target_vocab,
                    progress=False)
  return trainer, trainer.engine.train_on_batches


# ----------------------------------------------------------------- timing


def matmul_gflops(n=2048, repeats=8, trials=3):
  """Best float32 GFLOP/s of an n×n by n×n ``tf.matmul`` over ``trials``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  a, b = tf.random.normal((n, n)), tf.random.normal((n, n))
  matmul = tf.function(tf.matmul)
  matmul(a, b).numpy()
  best = 0.0
  for _ in range(trials):
    start = time.perf_counter()
    for _ in range(repeats):
      matmul(a, b).numpy()
    best = max(best, 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e9)
  return best


def timed(run, *args):
  start = time.perf_counter()
  run(*args)
  return time.perf_counter() - start


def alternate(arms, rounds):
  """Runs ``{name: (callable, args)}`` once untimed, then ``rounds`` times in turn.

  Returns ``{name: [seconds per round]}``.
  """
  for run, args in arms.values():
    run(*args)
  seconds = {name: [] for name in arms}
  for round_index in range(rounds):
    for name, (run, args) in arms.items():
      seconds[name].append(timed(run, *args))
      print(f"  round {round_index + 1}: {name}: {seconds[name][-1]:.2f} s", flush=True)
  return seconds


# ----------------------------------------------------------------- decoding


class WithoutEnd:
  """A model whose logits give [END] probability 0, so that every output runs to
  its length limit. Everything else (``decoder``, ``encode``, ...) is the model's."""

  def __init__(self, model):
    self.model = model

  def __getattr__(self, name):
    return getattr(self.model, name)

  @staticmethod
  def _forbid_end(logits):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from transformer.data.tokenizers import END_ID  # pylint: disable=g-import-not-at-top
    return logits + tf.one_hot(END_ID, tf.shape(logits)[-1], on_value=-1e9, off_value=0.0)

  def __call__(self, inputs, training=False):
    return self._forbid_end(self.model(inputs, training=training))

  def decode_step(self, ids, index, cache, source_mask):
    logits, cache, weights = self.model.decode_step(ids, index, cache, source_mask)
    return self._forbid_end(logits), cache, weights


def decoders(config, tokenizers, ours, tutorial, length):
  """{name: (text → (text, tokens) callable, sentences at a time)}."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from transformer.inference import decoding  # pylint: disable=g-import-not-at-top
  ours, tutorial = WithoutEnd(ours), WithoutEnd(tutorial)

  def text_to_text(decode):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def translate(sentences):
      ids = tf.cast(tokenizers.pt.tokenize(sentences).to_tensor(), tf.int32)
      tokens = decode(ids, tf.fill([tf.shape(ids)[0]], length))
      return tokenizers.en.detokenize(tf.cast(tokens, tf.int64)), tokens
    return translate

  translator = tutorial_baseline.Translator(tokenizers, tutorial)
  exported = tutorial_baseline.ExportTranslator(translator, max_length=length)
  beam = config.decoding.beam_size
  return {
      "tutorial Translator (eager), 1 sentence": (
          lambda s: translator(tf.constant(s[0]), max_length=length)[:2], 1),
      "tutorial ExportTranslator (tf.function), 1 sentence": (
          lambda s: (exported(tf.constant(s[0])), None), 1),
      f"ours greedy, batch {_BATCH_SIZE.value}": (
          text_to_text(lambda ids, n: decoding.greedy_decode(ours, ids, n)),
          _BATCH_SIZE.value),
      f"ours beam {beam}, batch {_BATCH_SIZE.value}": (
          text_to_text(lambda ids, n: decoding.beam_search(
              ours, ids, n, beam, config.decoding.length_penalty)[0]), _BATCH_SIZE.value),
  }


def decode_all(translate, per_call, sentences):
  for start in range(0, len(sentences), per_call):
    text, _ = translate(sentences[start:start + per_call])
    np.asarray(text)


# ----------------------------------------------------------------- memory


def rss_child(kind):
  """Trains one arm in this fresh process and prints its peak memory as JSON.

  ``base``: the paper's base model, whose joint vocabulary has 37,000 entries
  (the tutorial tokenizer's ids, < 7,765, fit in it), on 25,000-token batches.
  """
  from configs import base, tutorial  # pylint: disable=g-import-not-at-top
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data import pipeline  # pylint: disable=g-import-not-at-top
  from transformer.data.tokenizers import load_tokenizers, vocab_sizes  # pylint: disable=g-import-not-at-top
  tokenizers = load_tokenizers(_TOKENIZER.value)
  if kind == "base":
    config = with_length_groups(base.get_config(), _BASE_LENGTH_GROUPS.value)
    pairs = ted.local_split_pairs(_DATA_DIR.value, "train")[:_TRAIN_PAIRS.value]
    batches = pipeline.make_batches(ted.pairs_to_dataset(pairs), tokenizers,
                                    max_tokens=config.data.max_tokens, seed=0,
                                    tokens_per_batch=config.data.tokens_per_batch)
    batches, steps = batches.take(_BASE_STEPS.value), _BASE_STEPS.value
    _, train = build("ours", config, 37000, 37000)
  else:
    config = with_length_groups(tutorial.get_config(), 1)
    name = ("tutorial, random 64" if kind == "tutorial"
            else f"ours, {_TOKENS_PER_BATCH.value} tokens/side")
    batches, steps = training_arms(config, tokenizers, _STEPS.value)[name][1], _STEPS.value
    _, train = build(kind, config, *vocab_sizes(tokenizers))
  start = time.perf_counter()
  train(batches)
  print("RSS_RESULT " + json.dumps({"arm": kind, "peak_rss_bytes": machine.peak_rss_bytes(),
                                    "steps": steps,
                                    "seconds": time.perf_counter() - start}), flush=True)


def measure_rss(kind):
  """Peak memory of one arm in a fresh process (the same flags)."""
  command = [sys.executable, __file__, f"--rss_child={kind}"] + [
      arg for arg in sys.argv[1:] if not arg.startswith("--rss")]
  print(f"  peak memory of {kind} in a fresh process ...", flush=True)
  done = subprocess.run(command, capture_output=True, text=True, check=False)
  lines = [line for line in done.stdout.splitlines() if line.startswith("RSS_RESULT ")]
  if done.returncode or not lines:
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"arm": kind, "error": f"exit status {done.returncode}: {tail}"}
  return json.loads(lines[-1][len("RSS_RESULT "):])


# ----------------------------------------------------------------- report


def verdicts(ratios):
  """{ratio name: {value, target, met}} for every ratio that has a target."""
  out = {}
  for name, (relation, target) in TARGETS.items():
    value = ratios.get(name)
    if value is not None:
      met = value >= target if relation == ">=" else value <= target
      out[name] = {"value": value, "target": f"{relation} {target}", "met": bool(met)}
  return out


def print_table(record):
  print(f"\n{record['machine']['cpu']}, {record['machine']['cores']} cores, "
        f"TensorFlow {record['machine']['tensorflow']}, threads: "
        f"{record['settings']['threads'] or 'one per usable core'}")
  print(f"matmul 2048² float32: {record['matmul_gflops']} GFLOP/s (start, end)")
  print(f"\n{'training arm':<40}{'tokens/s':>10}{'s/step':>8}{'GFLOP/s':>9}"
        f"{'of matmul':>10}{'padding':>9}")
  for name, arm in record["training"].items():
    print(f"{name:<40}{arm['tokens_per_second']:>10.0f}{arm['seconds_per_step']:>8.2f}"
          f"{arm['useful_gflops_per_second']:>9.1f}{arm['fraction_of_matmul']:>10.1%}"
          f"{arm['padding_fraction']:>9.1%}")
  print(f"\n{'decoding ({} tokens each)'.format(record['settings']['output_length']):<52}"
        f"{'sentences/s':>12}")
  for name, arm in record["decoding"].items():
    print(f"{name:<52}{arm['sentences_per_second']:>12.2f}")
  for arm in record["peak_rss"]:
    size = (f"{arm['peak_rss_bytes'] / GIB:.2f} GiB" if "peak_rss_bytes" in arm
            else arm["error"])
    print(f"peak memory, {arm['arm']}: {size}")
  print(f"\n{'ratio':<60}{'value':>8}  target   met")
  for name, value in record["ratios"].items():
    verdict = record["targets"].get(name)
    target = (f"{verdict['target']:<8} {'yes' if verdict['met'] else 'NO'}" if verdict
              else "(none)")
    print(f"{name:<60}{value:>8.2f}  {target}")
  print(f"\nstart: {machine.summary_line(record['activity']['start'])}")
  print(f"end:   {machine.summary_line(record['activity']['end'])}")


def main(argv):
  del argv
  machine.set_threads(_THREADS.value)
  if _RSS_CHILD.value:
    rss_child(_RSS_CHILD.value)
    return
  started = time.time()
  activity_start = machine.other_activity()
  print(machine.summary_line(activity_start), flush=True)
  from configs import tutorial  # pylint: disable=g-import-not-at-top
  from transformer.data import ted  # pylint: disable=g-import-not-at-top
  from transformer.data.tokenizers import load_tokenizers, vocab_sizes  # pylint: disable=g-import-not-at-top

  matmul_start = matmul_gflops()
  config = with_length_groups(tutorial.get_config(), 1)
  tokenizers = load_tokenizers(_TOKENIZER.value)
  input_vocab, target_vocab = vocab_sizes(tokenizers)
  tutorial_model, tutorial_train = build("tutorial", config, input_vocab, target_vocab)
  trainer, our_train = build("ours", config, input_vocab, target_vocab)
  _, grouped_train = build("ours grouped", arm_config("ours grouped", config), input_vocab,
                           target_vocab)
  arms = training_arms(config, tokenizers, _STEPS.value)
  dims = model_dims(config.model)
  stats = {name: batch_stats(batches, dims, target_vocab) for name, (_, batches) in arms.items()}

  print("training ...", flush=True)
  runners = {"tutorial": tutorial_train, "ours": our_train, "ours grouped": grouped_train}
  train_seconds = alternate({name: (runners[kind], (batches,))
                             for name, (kind, batches) in arms.items()}, _ROUNDS.value)

  print("decoding ...", flush=True)
  tutorial_baseline.copy_weights(trainer.model, tutorial_model)
  sentences = [pt for pt, _ in ted.local_split_pairs(_DATA_DIR.value, "validation")]
  counts = [_EAGER_SENTENCES.value, _TUTORIAL_SENTENCES.value, _DECODE_SENTENCES.value,
            _DECODE_SENTENCES.value]
  methods = decoders(config, tokenizers, trainer.model, tutorial_model, _OUTPUT_LENGTH.value)
  decode_arms = {name: (decode_all, (translate, per_call, sentences[:count]))
                 for (name, (translate, per_call)), count in zip(methods.items(), counts)
                 if count}
  decode_seconds = alternate(decode_arms, _ROUNDS.value)
  # The tutorial's loop and ours, same weights: the same tokens.
  first = sentences[:1]
  tutorial_tokens = methods["tutorial Translator (eager), 1 sentence"][0](first)[1]
  greedy_name = f"ours greedy, batch {_BATCH_SIZE.value}"
  our_tokens = methods[greedy_name][0](first)[1]
  same_tokens = bool(np.array_equal(np.asarray(tutorial_tokens)[0, 1:], np.asarray(our_tokens)[0]))
  matmul_end = matmul_gflops()

  peak_rss = [measure_rss(kind) for kind in _RSS_ARMS.value]
  activity_end = machine.other_activity()

  roofline = max(matmul_start, matmul_end)
  training = {}
  for name, seconds in train_seconds.items():
    stat, best = stats[name], float(np.min(seconds))
    gflops = stat["useful_flops"] / best / 1e9
    training[name] = {**stat, "seconds_per_round": seconds, "seconds_per_step": best / stat["steps"],
                      "tokens_per_second": stat["target_tokens"] / best,
                      "useful_gflops_per_second": gflops, "fraction_of_matmul": gflops / roofline}
  decoding_record = {}
  for name, seconds in decode_seconds.items():
    count = len(decode_arms[name][1][2])
    decoding_record[name] = {"sentences": count, "seconds_per_round": seconds,
                             "sentences_per_second": count / float(np.min(seconds))}

  tutorial_tps = training["tutorial, random 64"]["tokens_per_second"]
  ours_names = [name for name in training if name.startswith("ours")]
  best = max(ours_names, key=lambda name: training[name]["tokens_per_second"])
  grouped = next(name for name, (kind, _) in arms.items() if kind == "ours grouped")
  greedy = decoding_record[greedy_name]["sentences_per_second"]
  beam = next(arm for name, arm in decoding_record.items() if name.startswith("ours beam"))
  exported = decoding_record["tutorial ExportTranslator (tf.function), 1 sentence"]
  ratios = {
      "training_tokens_per_second_vs_tutorial": training[best]["tokens_per_second"] / tutorial_tps,
      "training_identical_batches_vs_tutorial":
          training[grouped]["tokens_per_second"] / tutorial_tps,
      "training_identical_batches_ungrouped_vs_tutorial":
          training["ours, same random 64"]["tokens_per_second"] / tutorial_tps,
      "training_fraction_of_matmul": training[best]["fraction_of_matmul"],
      "greedy_sentences_per_second_vs_tutorial_export_translator":
          greedy / exported["sentences_per_second"],
      "beam_time_over_greedy": greedy / beam["sentences_per_second"],
  }
  eager = decoding_record.get("tutorial Translator (eager), 1 sentence")
  if eager:
    ratios["greedy_sentences_per_second_vs_tutorial_translator"] = greedy / eager[
        "sentences_per_second"]
  base = next((arm for arm in peak_rss if arm["arm"] == "base" and "peak_rss_bytes" in arm),
              None)
  if base:
    ratios["base_25k_peak_rss_gib"] = base["peak_rss_bytes"] / GIB

  record = {
      "benchmark": "lab/bench/speed.py", "command": " ".join(sys.argv),
      "machine": machine.description(),
      "settings": {"threads": _THREADS.value, "steps": _STEPS.value, "rounds": _ROUNDS.value,
                   "train_pairs": _TRAIN_PAIRS.value,
                   "tokens_per_batch": _TOKENS_PER_BATCH.value,
                   "length_groups": _LENGTH_GROUPS.value,
                   "base_length_groups": _BASE_LENGTH_GROUPS.value,
                   "output_length": _OUTPUT_LENGTH.value, "batch_size": _BATCH_SIZE.value},
      "activity": {"start": activity_start, "end": activity_end},
      "matmul_gflops": [round(matmul_start, 1), round(matmul_end, 1)],
      "training": training, "best_training_arm": best, "decoding": decoding_record,
      "tutorial_and_ours_same_greedy_tokens": same_tokens, "peak_rss": peak_rss,
      "ratios": ratios, "targets": verdicts(ratios),
      "wall_seconds": time.time() - started,
  }
  output = Path(_OUTPUT.value)
  output.parent.mkdir(parents=True, exist_ok=True)
  output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
  print_table(record)
  print(f"\nwrote {output} ({record['wall_seconds']:.0f} s)")


if __name__ == "__main__":
  app.run(main)
