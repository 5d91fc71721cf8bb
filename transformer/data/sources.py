"""Where the data and the tokenizer come from on a machine without ``../shared``.

The README's main command names the local copies in ``../shared/data``: the TED
HRLR files and the tutorial's tokenizer. A clone elsewhere has no such folder.
Where ``--data`` or ``--tokenizer`` names a path that does not exist at all,
TensorFlow Datasets' copy of the same data (``tfds``, downloaded on first use;
the local reader gives the same pairs in the same order, :mod:`transformer.data.ted`)
and a tokenizer built from its training pairs (``build``, the tutorial's
vocabularies, :mod:`transformer.data.tokenizers`) stand in for them, and one line
says so. A path that exists but holds the wrong files is still an error.

Needs no TensorFlow: the scripts decide this before they import it.
"""

import importlib.util
from pathlib import Path
from typing import Optional, Tuple

TFDS = "tfds"
BUILD = "build"


class SourceError(ValueError):
  """A local copy is absent and TensorFlow Datasets cannot stand in for it."""


def tfds_installed() -> bool:
  return importlib.util.find_spec("tensorflow_datasets") is not None


def stand_ins(data: str, tokenizer: Optional[str] = None
              ) -> Tuple[str, Optional[str], Optional[str]]:
  """``(data, tokenizer, message)``: ``data`` and ``tokenizer`` (a script's
  flags; None for a script without ``--tokenizer``) with ``tfds`` and ``build``
  in place of paths that do not exist, and the one line that says so (None
  when nothing stands in).

  Raises:
    SourceError: ``data`` does not exist and tensorflow-datasets is not installed.
  """
  data_absent = data != TFDS and not Path(data).exists()
  tokenizer_absent = tokenizer not in (None, BUILD) and not Path(tokenizer).exists()
  if data_absent and not tfds_installed():
    raise SourceError(f"--data={data}: no such folder, and tensorflow-datasets, which would "
                      "download the data instead, is not installed (pip install -e .)")
  absent = [path for path, gone in ((data, data_absent), (tokenizer, tokenizer_absent)) if gone]
  instead = []
  if data_absent:
    instead.append("the data comes from TensorFlow Datasets (ted_hrlr_translate/pt_to_en, "
                   "downloaded on first use)")
  if tokenizer_absent:
    instead.append("the tokenizer is built from the training pairs (--tokenizer=build)")
  message = (f"{' and '.join(absent)} {'are' if len(absent) > 1 else 'is'} absent: "
             f"{' and '.join(instead)}") if absent else None
  return (TFDS if data_absent else data, BUILD if tokenizer_absent else tokenizer,
          message)
