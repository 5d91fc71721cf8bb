"""The training machinery (tutorial: "Train the model"; paper §5), apart from the model.

The tutorial calls ``transformer.fit(...)``; here the loop is written out, in the
style of the TF Model Garden's Orbit, with each concern in a module of its own:

=====================  ==========================================================
module                 what it does
=====================  ==========================================================
``trainer``            :class:`Trainer`: builds model and optimizer under a
                       strategy and runs the loop
``step``               the arithmetic of one optimizer step (length groups)
``checkpointing``      checkpoints, resuming, refusing corrupt or foreign ones
``budget``             a training-time budget: the epochs that fit, cooled down
``stop_signals``       stopping cleanly on SIGTERM/SIGINT
``summaries``          TensorBoard scalars and ``metrics.jsonl``
``progress``           the console's progress line and per-epoch summary
``distribute``         choosing a ``tf.distribute`` strategy by name
``runtime``            the scripts' TensorFlow process: quiet logs, the CPU
                       allocator, thread pools
``errors``             :class:`TrainingError` and the one-line form of any error
``result``             :class:`TrainResult`, what either trainer returns
``files``              whole text files and the run folder's lock (no TensorFlow)
``keras_loop``         the loop without TensorFlow: Keras on JAX, from prepared
                       shards (``train.py`` under ``KERAS_BACKEND=jax``)
``keras_checkpoints``  its checkpoints: ``model.weights.h5`` and the rest
=====================  ==========================================================

The names below are the package's public API. They load on first use, so
that the scripts can import ``runtime``, ``distribute`` and ``progress`` and
check their flags before TensorFlow is imported.
"""

import importlib

# Public name -> the module of this package that defines it.
_PUBLIC = {
    "Trainer": "trainer",
    "TrainResult": "result",
    "NonFiniteLossError": "errors",
    "CheckpointError": "checkpointing",
    "TrainingError": "errors",
    "METRICS_FILE": "summaries",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name):
  if name not in _PUBLIC:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
