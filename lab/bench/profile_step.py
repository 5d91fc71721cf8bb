"""Where a training step's time goes: the TensorFlow profiler's op table (issue #9).

  python lab/bench/profile_step.py --threads=1 --steps=4     # about 4 minutes

For the training arms of ``lab/bench/speed.py`` (same flags, same batches: the
tutorial's model on random ``padded_batch(64)`` batches, ours on the same
batches, ours on token-budget batches), each arm runs its batches once
untimed (tracing), then ``--steps`` steps under ``tf.profiler``. The trace's
TensorFlow op events (``name:Type`` on the host plane) are summed by op type
and by group (matrix products, element-wise, data movement, ...), in
milliseconds per step. Writes ``--profile_output`` (JSON) and prints the
tables side by side.
"""

import collections
import json
from pathlib import Path
import re
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lab.bench import machine  # pylint: disable=g-import-not-at-top,wrong-import-position

_PROFILE_OUTPUT = flags.DEFINE_string(
    "profile_output", str(machine.REPO_ROOT / "lab" / "bench" / "results" / "profile.json"),
    "Where the JSON record goes.")
_TOP = flags.DEFINE_integer("top", 15, "Op types printed per arm.")
FLAGS = flags.FLAGS  # --steps, --threads, --tokenizer, ... are lab/bench/speed.py's

# An op event on the host plane is named "<op name>:<op type>".
_OP_EVENT = re.compile(r"^(?P<name>[^:\s]+):(?P<type>_?[A-Z][A-Za-z0-9_]*)$")
GROUPS = (
    ("matrix products", re.compile(r"MatMul|Einsum|Conv")),
    ("softmax and loss", re.compile(r"Softmax|SoftmaxCrossEntropy|LogSoftmax")),
    ("data movement", re.compile(r"Transpose|Reshape|Concat|Slice|Pad|Tile|Gather|Scatter|"
                                 r"Identity|Copy|Pack|Unpack|Split|BroadcastTo|OneHot")),
    ("reductions", re.compile(r"^_?(Sum|Mean|Max|Min|Prod|ArgMax|All|Any)$|Reduce|BiasAddGrad")),
    ("random (dropout)", re.compile(r"Random|Stateless")),
    ("optimizer", re.compile(r"^ResourceApply|^AssignVariable|^ReadVariable|^AssignAdd|^AssignSub")),
)


def group_of(op_type: str) -> str:
  for group, pattern in GROUPS:
    if pattern.search(op_type):
      return group
  return "element-wise and other"


def op_times(xplane_path) -> dict:
  """{op type: total picoseconds} over the host plane's TensorFlow op events."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top
  space = xplane_pb2.XSpace()
  space.ParseFromString(Path(xplane_path).read_bytes())
  totals = collections.Counter()
  for plane in space.planes:
    if not plane.name.startswith("/host:"):
      continue
    names = {key: meta.name for key, meta in plane.event_metadata.items()}
    for line in plane.lines:
      for event in line.events:
        match = _OP_EVENT.match(names.get(event.metadata_id, ""))
        if match:
          totals[match.group("type")] += event.duration_ps
  return dict(totals)


def profile(train, batches, steps: int) -> dict:
  """Op table of ``train(batches)`` (``steps`` steps), in ms per step."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  train(batches)  # traces, so the profile holds steps only
  with tempfile.TemporaryDirectory() as log_dir:
    tf.profiler.experimental.start(log_dir)
    start = time.perf_counter()
    train(batches)
    wall = time.perf_counter() - start
    tf.profiler.experimental.stop()
    trace = next(Path(log_dir).rglob("*.xplane.pb"))
    totals = op_times(trace)
  by_type = {op: ps / 1e9 / steps for op, ps in sorted(totals.items(), key=lambda kv: -kv[1])}
  by_group = collections.Counter()
  for op, ms in by_type.items():
    by_group[group_of(op)] += ms
  return {"wall_ms_per_step": wall * 1e3 / steps, "op_ms_per_step": sum(by_type.values()),
          "groups_ms_per_step": dict(by_group.most_common()), "op_types_ms_per_step": by_type}


def print_profile(name, result, top):
  print(f"\n{name}: {result['wall_ms_per_step']:.0f} ms/step wall, "
        f"{result['op_ms_per_step']:.0f} ms/step in ops")
  for group, ms in result["groups_ms_per_step"].items():
    print(f"  {group:<28}{ms:>9.1f} ms {ms / result['op_ms_per_step']:>6.1%}")
  print("  top op types:")
  for op, ms in list(result["op_types_ms_per_step"].items())[:top]:
    print(f"    {op:<26}{ms:>9.1f} ms {ms / result['op_ms_per_step']:>6.1%}")


def main(argv):
  del argv
  from lab.bench import speed  # pylint: disable=g-import-not-at-top
  machine.set_threads(FLAGS.threads)
  activity = machine.other_activity()
  print(machine.summary_line(activity), flush=True)
  from configs import tutorial  # pylint: disable=g-import-not-at-top
  from transformer.data.tokenizers import load_tokenizers, vocab_sizes  # pylint: disable=g-import-not-at-top
  config = tutorial.get_config()
  tokenizers = load_tokenizers(FLAGS.tokenizer)
  vocab = vocab_sizes(tokenizers)
  arms = speed.training_arms(config, tokenizers, FLAGS.steps)
  runners = {}
  record = {"benchmark": "lab/bench/profile_step.py", "command": " ".join(sys.argv),
            "machine": machine.description(), "activity_start": activity,
            "steps": FLAGS.steps, "threads": FLAGS.threads, "arms": {}}
  for name, (kind, batches) in arms.items():
    if name == "ours, bucketed 64":
      continue
    if kind not in runners:
      runners[kind] = speed.build(kind, speed.arm_config(kind, config), *vocab)[1]
    record["arms"][name] = profile(runners[kind], batches, FLAGS.steps)
    print_profile(name, record["arms"][name], _TOP.value)
  record["activity_end"] = machine.other_activity()
  output = Path(_PROFILE_OUTPUT.value)
  output.parent.mkdir(parents=True, exist_ok=True)
  output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
  print(f"\nwrote {output}")


if __name__ == "__main__":
  # lab/bench/speed.py's flags, defined only when run as a script so that importing
  # this module (the tests do) defines no --data_dir beside evaluate.py's.
  from lab.bench import speed as _  # pylint: disable=g-import-not-at-top
  app.run(main)
