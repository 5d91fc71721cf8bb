"""Script text for a child Python that must run without TensorFlow.

Put first in a child's script, :data:`BLOCK_TENSORFLOW` makes every import of
``tensorflow`` or ``tensorflow_text`` (or a submodule) raise ``ImportError``
and notes its name: in ``KERAS_PROBES`` when Keras asks whether TensorFlow is
there (below), in ``TENSORFLOW_IMPORTS_TRIED`` otherwise. A library that tries
the import and carries on without it would hide a raise, so the child reports
the list and the test checks that it is empty.

Under ``KERAS_BACKEND=jax``, Keras 3.15 asks in two places, through
``keras.src.utils.module_utils.tensorflow.available`` (a lazy import, tried once
per process): ``keras.utils.set_random_seed``, to seed ``tf.random`` for
``tf.data``, and ``serialize_keras_object``, to recognize a ``tf.TensorShape``
(so every ``get_config`` that serializes a dtype policy, every ``.keras``
file). With TensorFlow installed and no blocker, the first of them loads all of
TensorFlow (about 3 s, and its C++ log lines); with the blocker Keras finds it
absent and goes on, as it does on a machine without TensorFlow. ``import keras``,
its ops and layers, and ``.weights.h5`` saving and loading ask nothing.

``importlib.util.find_spec("tensorflow")`` looks for the package without
running it (JAX's compilation cache asks so through ``etils.epath`` when it
makes its folder): the blocker answers ``None``, as on a machine without
TensorFlow, and notes the name in ``FIND_SPEC_PROBES``, not as a tried import.
"""

BLOCK_TENSORFLOW = """
import importlib.util
import os
import sys

TENSORFLOW_IMPORTS_TRIED = []
KERAS_PROBES = []
FIND_SPEC_PROBES = []
_KERAS_LAZY_MODULES = os.path.join("keras", "src", "utils", "module_utils.py")
_BLOCKED = ("tensorflow", "tensorflow_text")


class _NoTensorFlow:
  # A meta-path finder consulted before all others.
  def find_spec(self, name, path=None, target=None):
    if name.partition(".")[0] not in _BLOCKED:
      return None
    frame = sys._getframe(1)
    while frame and not (frame.f_code.co_name == "available"
                         and frame.f_code.co_filename.endswith(_KERAS_LAZY_MODULES)):
      frame = frame.f_back
    (KERAS_PROBES if frame else TENSORFLOW_IMPORTS_TRIED).append(name)
    raise ImportError(f"{name}: this process runs without TensorFlow")


def _find_spec_without_tensorflow(name, package=None, _find_spec=importlib.util.find_spec):
  if name.partition(".")[0] in _BLOCKED:
    FIND_SPEC_PROBES.append(name)
    return None
  return _find_spec(name, package)


sys.meta_path.insert(0, _NoTensorFlow())
importlib.util.find_spec = _find_spec_without_tensorflow
"""
