"""A paper-faithful model sized for two hours of training on a 2-core CPU.

Everything the paper fixes is the paper's: heads of width d_model/h (§3.2.2),
post-LayerNorm residual blocks, dropout on every sub-layer output (§5.4), label
smoothing 0.1 (§5.4), the target embedding tied to the pre-softmax projection
(§3.4), batches by token budget (§5.1) and the warm-up/inverse-square-root
schedule (§5.3). What the paper leaves to the compute budget (width, depth,
batch size, warm-up, learning-rate scale) was chosen by the measured sweeps
in ``results/cpu_2h/sweeps.md``: short ones (``bench/sweep.py``) and whole
runs side by side (``bench/compare_runs.py``).

The vocabulary is the tutorial's tokenizer (pt 7,765 / en 7,010 WordPiece
tokens), so that accuracy and BLEU compare with the tutorial's model; with
separate vocabularies the paper's three-way sharing is not possible, so only
the target embedding and the output projection are tied.
"""

from transformer.config import default_config


def get_config(sizing: str = "epochs"):
  """``--config=configs/cpu_2h.py`` trains 12 epochs; ``configs/cpu_2h.py:clock``
  as many as fit in 115 minutes of training instead (transformer/training/budget.py),
  with a peak learning rate of 2e-3."""
  if sizing not in ("epochs", "clock"):
    raise ValueError(f"configs/cpu_2h.py:{sizing}: choose 'epochs' or 'clock'")
  config = default_config()
  # Two layers each side: at equal training time they led three layers and a
  # wider model (results/cpu_2h/sweeps.md, size and batch sweep on both cores).
  config.model.num_layers = 2
  config.model.d_model = 256
  config.model.num_heads = 4
  config.model.dff = 1024
  # Dropout 0.2, not the paper's 0.1: with 0.1 the training accuracy passed
  # the validation accuracy at epoch 6 and the validation accuracy flattened
  # (results/cpu_2h_2c); with 0.2 and the longer warm-up below it kept rising
  # and ended higher (results/cpu_2h_dropout, results/cpu_2h/sweeps.md).
  config.model.dropout_rate = 0.2
  config.model.output_weights = "tied"
  # 2,048-token batches: at the same tokens and learning rate, twice the
  # updates of half the size learned more, at the same tokens/s on this CPU
  # (results/cpu_2h/sweeps.md; the whole run is results/cpu_2h_2k).
  config.data.tokens_per_batch = 2048
  # Peak learning rate 1.0733 / sqrt(256 * 2000) = 1.5e-3 at step 2,000 (about
  # 3 epochs). With the cooldown below, a whole run at 1.5e-3 was behind the
  # 1e-3 of the learning-rate sweep's choice until epoch 10 and ahead at the
  # end: 0.633 validation accuracy against 0.628 (results/cpu_2h_lr15).
  config.training.warmup_steps = 2000
  config.training.learning_rate_scale = 1.0733
  # Twelve epochs (7,872 steps of the TED training split's 656 per epoch):
  # 116 minutes of training on both cores of a 2-core AMD EPYC (AVX2). The
  # rate follows §5.3 to the end of epoch 8 and then falls linearly to zero
  # at the last step: with a peak of 1e-3, 0.628 validation accuracy against 0.611 at
  # the same step with the paper's endless schedule (results/cpu_2h_cooldown).
  # Change epochs and the cooldown together. The 2-core Intel Xeon (AVX-512)
  # of the earlier runs is about 1.4 times as fast (results/cpu_2h_epyc): it
  # trained 17 epochs of the endless schedule in 112 minutes
  # (results/cpu_2h_2k; cooldown_steps = 0 is that schedule).
  config.training.epochs = 12
  config.training.cooldown_steps = 4 * 656
  config.training.cooldown_end_step = 12 * 656
  config.training.train_steps = 0
  # A checkpoint 500 steps after the last one (about 5 minutes on both cores) and
  # one at the end of each epoch: the last 5 are averaged (§6.1).
  config.training.checkpoint_every_steps = 500
  config.training.keep_checkpoints = 5
  if sizing == "clock":
    # The same 12 epochs took 106, 116 and 127 minutes on three days on the same
    # kind of EPYC (results/cpu_2h_lr15, _cooldown, _cool6): sized by the clock,
    # the run takes the epochs that fit, the last third of them cooling down.
    config.training.epochs = 100
    config.training.cooldown_steps = 0
    config.training.cooldown_end_step = 0
    config.training.time_budget_minutes = 115.0
    config.training.cooldown_fraction = 1 / 3
    # Peak 1.4311 / sqrt(256 * 2000) = 2e-3, as in both whole runs sized by the
    # clock (results/cpu_2h_clock_lr20: 20 epochs, 0.646 validation accuracy;
    # results/cpu_2h_clock_zen3, a slower CPU: 11 epochs, 0.628). Before their
    # cooldowns both were within 0.03 of 1.5e-3 (results/cpu_2h_lr15) epoch by
    # epoch; 1.5e-3 has not run sized by the clock.
    config.training.learning_rate_scale = 1.4311
  return config
