"""Translates Portuguese to English with an exported model (tutorial: "Run
inference" with the exported ``translator``).

  python translate.py --export_dir DIR "este é um problema ." "olá ."
  python translate.py --export_dir DIR --input_file sentences.pt
  cat sentences.pt | python translate.py --export_dir DIR -

Prints one translation per input line, in order. Needs only TensorFlow and
tensorflow_text: the SavedModel from ``transformer.export.export_translator``
holds the tokenizers and the model.
"""

import sys

from absl import app
from absl import flags
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  # Registers the tokenizers' ops.

_EXPORT_DIR = flags.DEFINE_string("export_dir", None, "SavedModel from export_translator.",
                                  required=True)
_INPUT_FILE = flags.DEFINE_string("input_file", None,
                                  "UTF-8 file, one sentence per line ('-' for stdin).")
_METHOD = flags.DEFINE_enum("method", "beam", ["beam", "greedy"],
                            "beam: the paper's beam search; greedy: faster.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sentences translated together.")


def read_sentences(args, input_file):
  """Sentences from the command line, a file, or stdin (``-`` as file or argument)."""
  if input_file == "-" or args == ["-"]:
    return sys.stdin.read().splitlines()
  if input_file:
    with open(input_file, encoding="utf-8") as f:
      return f.read().splitlines()
  return list(args)


def main(argv):
  sentences = read_sentences(argv[1:], _INPUT_FILE.value)
  translator = tf.saved_model.load(_EXPORT_DIR.value)
  translate = (translator.translate if _METHOD.value == "beam"
               else translator.translate_greedy)
  for start in range(0, len(sentences), _BATCH_SIZE.value):
    batch = tf.constant(sentences[start:start + _BATCH_SIZE.value], dtype=tf.string)
    for translation in translate(batch).numpy():
      print(translation.decode("utf-8"), flush=True)


if __name__ == "__main__":
  app.run(main)
