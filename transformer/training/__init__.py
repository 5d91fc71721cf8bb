"""The training machinery (tutorial: "Train the model"; paper §5), apart from the model.

The tutorial calls ``transformer.fit(...)``; here the loop is written out, in the
style of the TF Model Garden's Orbit, with each concern in a module of its own:

=====================  ==========================================================
module                 what it does
=====================  ==========================================================
``loop``               the epoch loop both trainers run (Orbit's controller),
                       :class:`~transformer.training.loop.Trainer`, the
                       interface both implement, and the actions it calls
                       (signals, time budget, validation, records,
                       checkpoints, the epoch's clock and progress line)
``tf_trainer``         :class:`~transformer.training.tf_trainer.TensorFlowTrainer`:
                       trains one epoch at a time under a ``tf.distribute``
                       strategy
``tf_build``           its model and optimizer, and the state checkpointed
                       beside them
``tf_steps``           its steps on every replica (the loss over the global
                       batch's real tokens)
``step``               the arithmetic of one optimizer step (length groups)
``jax_trainer``        :class:`~transformer.training.jax_trainer.JaxTrainer`:
                       the same without TensorFlow, Keras on JAX from prepared
                       shards (``train.py`` under ``KERAS_BACKEND=jax``)
``jax_steps``          its ``jax.jit`` steps, and seeding without TensorFlow
``checkpointing``      saving and resuming (TensorFlow checkpoints)
``budget``             a training-time budget: the epochs that fit, cooled down
``summaries``          TensorBoard scalars and ``metrics.jsonl``
``distribute``         choosing a ``tf.distribute`` strategy by name
``result``             :class:`TrainResult`, what either trainer returns
``run_checks``         train.py's checks of its flags and run folder, before
                       any work
``runs``               train.py's two runs: on TensorFlow, or on JAX from shards
``finish``             around the training: the run's files, BLEU, the export
=====================  ==========================================================

What training shares with evaluation and the scripts lives outside this
package, which only training imports: the process set-up (``transformer.run.runtime``),
the progress line (``transformer.run.progress``), stopping on signals
(``transformer.run.stop_signals``), errors (``transformer.run.errors``), safe files and
the run's lock (``transformer.run.files``) and the checkpoint files
(``transformer.run.checkpoint_files``, ``transformer.run.keras_checkpoints``).

Import the modules themselves (``from transformer.training.tf_trainer import
TensorFlowTrainer``): the package imports none of them, so that the JAX path
(``jax_trainer``) never imports TensorFlow.
"""
