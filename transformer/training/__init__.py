"""The training machinery (tutorial: "Train the model"; paper §5), apart from the model.

The tutorial calls ``transformer.fit(...)``; here one loop, in the style of the
TF Model Garden's Orbit, drives either of two engines, each named for its backend:

=====================  ==========================================================
module                 what it does
=====================  ==========================================================
``loop``               :class:`~transformer.training.loop.Trainer`, the loop
                       (Orbit's controller): the position in the data, the
                       clock, scalars, progress, NaN check, checkpoint cadence,
                       time budget, validation and each epoch's record
``engine``             :class:`~transformer.training.engine.Engine`, what the
                       loop needs of an engine: train a chunk, evaluate, save,
                       restore
``tf_engine``          the TensorFlow engine, under any ``tf.distribute``
                       strategy, and ``TensorFlowTrainer`` (the loop over it)
``tf_build``           its model, optimizer and checkpointed state
``tf_steps``           its steps on every replica (the loss over the global
                       batch's real tokens)
``tf_step``            the arithmetic of one optimizer step (length groups)
``tf_checkpointing``   its checkpoints (TensorFlow's format)
``tf_distribute``      choosing a ``tf.distribute`` strategy by name
``jax_engine``         the JAX engine, Keras on JAX from prepared shards, and
                       ``JaxTrainer``
``jax_steps``          its ``jax.jit`` steps, and seeding without TensorFlow
``jax_stacks``         its stacks of steps per dispatch
``jax_checkpointing``  its checkpoints (Keras weights files, written in the
                       background)
``budget``             a training-time budget: the epochs that fit, cooled down
``summaries``          TensorBoard scalars, ``metrics.jsonl``, the epoch's clock
``result``             :class:`TrainResult`, what a run returns
``run_checks``         train.py's checks of its flags and run folder, before
                       any work
``launch``             train.py's two launches: on TensorFlow, or on JAX from
                       shards
``finish``             around the training: the run's files, BLEU, the export
=====================  ==========================================================

The checkpoint formats stay two: TensorFlow's keeps MirroredStrategy,
MultiWorkerMirroredStrategy (the chief writes) and TPU saving, which Keras'
weights files do not (tests/distributed/).

What training shares with evaluation and the scripts lives outside this
package: the process set-up (``transformer.run.runtime``), the progress line
(``transformer.run.progress``), stopping on signals
(``transformer.run.stop_signals``), errors (``transformer.run.errors``), safe
files and the run's lock (``transformer.run.files``) and the checkpoint files
(``transformer.run.checkpoint_files``, ``transformer.run.keras_checkpoints``).

Import the modules themselves (``from transformer.training.tf_engine import
TensorFlowTrainer``): the package imports none of them, so that the JAX path
(``jax_engine``) never imports TensorFlow.
"""
