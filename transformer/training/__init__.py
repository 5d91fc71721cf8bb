"""The training machinery (tutorial: "Train the model"; paper §5), apart from the model.

The tutorial calls ``transformer.fit(...)``; here the loop is written out, in the
style of the TF Model Garden's Orbit, with each concern in a module of its own:

=====================  ==========================================================
module                 what it does
=====================  ==========================================================
``trainer``            :class:`~transformer.training.trainer.Trainer`: the model
                       and optimizer under a ``tf.distribute`` strategy, and
                       their steps
``keras_loop``         the same without TensorFlow: Keras on JAX, from prepared
                       shards (``train.py`` under ``KERAS_BACKEND=jax``)
``loop``               the epoch loop both trainers run, and the actions it
                       calls between steps and epochs
``step``               the arithmetic of one optimizer step (length groups)
``checkpointing``      saving and resuming (TensorFlow checkpoints)
``budget``             a training-time budget: the epochs that fit, cooled down
``summaries``          TensorBoard scalars and ``metrics.jsonl``
``distribute``         choosing a ``tf.distribute`` strategy by name
``result``             :class:`TrainResult`, what either trainer returns
``run_checks``         train.py's checks of a run folder before any work
``finish``             what train.py does after training: export and BLEU
=====================  ==========================================================

What training shares with evaluation and the scripts lives outside this
package, which only training imports: the process set-up (``transformer.runtime``),
the progress line (``transformer.progress``), stopping on signals
(``transformer.stop_signals``), errors (``transformer.errors``), safe files and
the run's lock (``transformer.files``) and the checkpoint files
(``transformer.checkpoint_files``, ``transformer.keras_checkpoints``).

Import the modules themselves (``from transformer.training.trainer import
Trainer``): the package imports none of them, so that the JAX path
(``keras_loop``) never imports TensorFlow.
"""
