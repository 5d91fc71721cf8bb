"""lab/bench/profile_step.py reads the TensorFlow profiler's trace into an op table."""

import tensorflow as tf

from lab.bench import profile_step


def test_profile_counts_the_ops_of_each_step():
  a = tf.random.normal((128, 128))

  @tf.function
  def step(_):
    return tf.nn.relu(tf.matmul(a, a)) + 1.0

  def train(batches):
    for batch in batches:
      step(batch).numpy()

  result = profile_step.profile(train, range(3), steps=3)
  ops = result["op_types_ms_per_step"]
  assert any("MatMul" in op for op in ops), ops
  assert "Relu" in ops and "AddV2" in ops, ops
  assert result["groups_ms_per_step"]["matrix products"] > 0
  assert 0 < result["op_ms_per_step"] <= result["wall_ms_per_step"]


def test_op_groups():
  assert profile_step.group_of("_MklBatchMatMulV2") == "matrix products"
  assert profile_step.group_of("_MklTranspose") == "data movement"
  assert profile_step.group_of("StatelessRandomUniformV2") == "random (dropout)"
  assert profile_step.group_of("SparseSoftmaxCrossEntropyWithLogits") == "softmax and loss"
  assert profile_step.group_of("ResourceApplyAdam") == "optimizer"
  assert profile_step.group_of("Relu") == "element-wise and other"
