"""A ``train.py`` output folder and what every script shares: the folder's
layout and files (``run_folder``), checkpoint files (``checkpoint_files`` for
TensorFlow, ``keras_checkpoints`` for Keras on JAX), staged writes and the
run's lock (``files``), stopping on signals (``stop_signals``), how a script
ends (``script``), the progress line (``progress``), the process set-up
(``runtime``) and errors (``errors``)."""
