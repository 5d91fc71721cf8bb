"""The training machinery (tutorial: "Train the model"; paper §5), apart from the model.

One loop (``loop.Trainer``, Orbit's controller: position, clock, scalars,
progress, NaN check, checkpoint cadence, time budget, validation, record)
drives one of two engines (``engine.Engine``: train a chunk, evaluate, save,
restore), each named for its backend:

* TensorFlow, under any ``tf.distribute`` strategy: ``tf_engine`` (the model,
  the optimizer, ``TensorFlowTrainer``), ``tf_step`` (the steps on every
  replica), ``tf_checkpointing``, ``tf_distribute`` (a strategy by name);
* JAX, from prepared shards without TensorFlow: ``jax_engine``
  (``JaxTrainer``), ``jax_steps`` (the ``jax.jit`` steps), ``jax_stacks``
  (several steps a dispatch), ``jax_checkpointing``.

Around them: ``budget`` (the epochs a time budget fits), ``summaries``
(TensorBoard scalars and ``metrics.jsonl``), and train.py's ``run_checks``
(before any work), ``launch`` (the two launches) and ``finish`` (the run's
files, BLEU, the export).

The checkpoint formats stay two: TensorFlow's keeps MirroredStrategy,
MultiWorkerMirroredStrategy (the chief writes) and TPU saving, which Keras'
weights files do not (tests/distributed/).

Import the modules themselves: the package imports none of them, so that the
JAX path never imports TensorFlow.
"""
