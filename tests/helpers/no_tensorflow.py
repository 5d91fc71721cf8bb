"""Script text for a child Python that must run without TensorFlow.

Put first in a child's script, :data:`BLOCK_TENSORFLOW` makes every import of
``tensorflow`` or ``tensorflow_text`` (or a submodule) raise ``ImportError``,
and notes the name in ``TENSORFLOW_IMPORTS_TRIED``. A library that tries the
import and carries on without it would hide a raise, so the child reports the
list and the test checks that it is empty.

Under ``KERAS_BACKEND=jax``, Keras 3.15 imports no TensorFlow for ``import
keras``, its ops and layers, or ``.weights.h5`` saving and loading, with one
exception: ``keras.utils.set_random_seed`` also seeds ``tf.random`` (for
``tf.data``) when TensorFlow imports (``keras/src/utils/rng_utils.py``, through
a ``LazyModule``). On a machine with TensorFlow installed that call loads all of
it (about 3 s, and TensorFlow's C++ log lines); under this blocker the import
fails and Keras goes on, seeding Python, NumPy and its own generator only.
A child that seeds Keras therefore clears the list after that call.
"""

BLOCK_TENSORFLOW = """
import sys

TENSORFLOW_IMPORTS_TRIED = []


class _NoTensorFlow:
  # A meta-path finder consulted before all others.
  def find_spec(self, name, path=None, target=None):
    if name.partition(".")[0] in ("tensorflow", "tensorflow_text"):
      TENSORFLOW_IMPORTS_TRIED.append(name)
      raise ImportError(f"{name}: this process runs without TensorFlow")
    return None


sys.meta_path.insert(0, _NoTensorFlow())
"""
