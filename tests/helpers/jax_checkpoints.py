"""A test's own edits of a JAX run's checkpoint files."""

import json
from pathlib import Path

from transformer.run import files
from transformer.run import keras_checkpoints


def record_edit(edited: Path) -> None:
  """Records the sha256 of ``edited``, a file of a ``step-N`` checkpoint that
  the test changed on purpose, as the save would have: without it the
  checkpoint no longer passes its integrity check and is skipped."""
  digests_file = edited.parent / keras_checkpoints.DIGESTS_FILE
  digests = json.loads(digests_file.read_text())
  digests_file.write_text(json.dumps({**digests, edited.name: files.sha256_of(edited)}))
