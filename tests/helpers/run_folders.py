"""Run folders and data folders as train.py and the TED HRLR files leave them,
written without training: for the tests of evaluation, averaging and
evaluate.py (tests/unit, tests/integration, tests/scripts)."""

import numpy as np

from transformer.training.tf_engine import TensorFlowTrainer

# Five short pairs (pt, en), as a validation split holds them.
PAIRS = [("um dois três .", "one two three ."), ("olá .", "hello ."),
         ("o gato está no tapete .", "the cat is on the mat ."),
         ("ela não sabia .", "she did n't know ."), ("sim", "yes")]
VOCAB = (50, 40)  # (pt, en) vocabulary sizes of the models without a tokenizer


def write_trainer_checkpoints(model_dir, config, count, vocab=VOCAB, seed=0):
  """``count`` checkpoints written as train.py writes them (the TensorFlowTrainer's model,
  optimizer and data position), each with distinct random values in every
  model variable.

  Returns:
    (checkpoint paths, values): ``values[c][i]`` is the array written for
    ``model.weights[i]`` in checkpoint ``c``.
  """
  trainer = TensorFlowTrainer(config, input_vocab_size=vocab[0], target_vocab_size=vocab[1],
                             model_dir=model_dir, progress=False)
  rng = np.random.default_rng(seed)
  paths, values = [], []
  for step in range(1, count + 1):
    current = [rng.normal(0.0, 0.1, v.shape).astype(np.float32) for v in trainer.model.weights]
    for variable, value in zip(trainer.model.weights, current):
      variable.assign(value)
    trainer.engine.optimizer.iterations.assign(step)  # checkpoints are numbered by the step
    trainer.save_checkpoint()
    paths.append(trainer.latest_checkpoint())
    values.append(current)
  return paths, values


def assert_weights(model, expected):
  assert len(model.weights) == len(expected)
  for variable, value in zip(model.weights, expected):
    np.testing.assert_allclose(variable.numpy(), value, rtol=1e-5, atol=1e-7,
                               err_msg=variable.path)


def write_model_dir(model_dir, config, tokenizer_path, tokenizers, count):
  """A train.py output folder of ``config``: config.json, tokenizer_path.txt and
  ``count`` TensorFlowTrainer checkpoints with random weights. Returns write_trainer_checkpoints'."""
  from transformer.data.tokenizers import vocab_sizes  # pylint: disable=g-import-not-at-top
  model_dir.mkdir(parents=True)
  (model_dir / "config.json").write_text(config.to_json())
  (model_dir / "tokenizer_path.txt").write_text(f"{tokenizer_path}\n")
  return write_trainer_checkpoints(model_dir, config, count, vocab=vocab_sizes(tokenizers))


def write_data_dir(data_dir, pairs, split_suffix="dev"):
  data_dir.mkdir(parents=True)
  (data_dir / f"pt.{split_suffix}").write_text("".join(s + "\n" for s, _ in pairs),
                                               encoding="utf-8")
  (data_dir / f"en.{split_suffix}").write_text("".join(r + "\n" for _, r in pairs),
                                               encoding="utf-8")
  return data_dir
