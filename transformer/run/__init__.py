"""A ``train.py`` output folder and what every script shares: the folder's files
(``run_folder``), checkpoint files (``checkpoint_files`` for TensorFlow,
``keras_checkpoints`` for Keras on JAX), atomic writes and the run's lock
(``files``), stopping on signals (``stop_signals``), the progress line
(``progress``), the process set-up (``runtime``) and errors (``errors``)."""
