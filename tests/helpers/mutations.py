"""The mutations tests/mutations/ applies: each an exact snippet of a source
file, its replacement, the silent error it stands for, and the tests that must
fail with it (see tests/mutations/test_mutations.py). The one list (the
model, decoding and training here; the data, the tokenizers, the export and
the JAX trainer in helpers/data_mutations.py); a new silent error the suite
should catch gets a line in one of them."""

from helpers import data_mutations
# The type of the list's entries, defined beside the runner that applies them.
from helpers.mutation_runner import Mutation

BUDGET = "tests/unit/test_budget.py"
DECODING = "tests/unit/test_decoding.py"
EMBEDDING = "tests/unit/test_embedding.py"
EVALUATION = "tests/unit/test_evaluation.py"
FUSED = ("tests/unit/test_fused_attention.py::"
         "test_fused_attention_matches_the_explicit_path_under_tensorflow")
LOSSES = "tests/unit/test_losses.py"
MASKING = "tests/unit/test_masking.py"
MODEL = "tests/unit/test_model.py"
OPTIMIZATION = "tests/unit/test_optimization.py"
POSITIONAL = "tests/unit/test_positional_options.py"
CHECKPOINTING = "tests/unit/test_checkpointing.py"
LOOP = "tests/unit/test_loop.py"
SCALING = "tests/unit/test_scaling.py"
DISTRIBUTE = "tests/distributed/test_distribute.py"
FAULTS = "tests/faults/test_faults.py"
DROPOUT_DECODING = "tests/unit/test_cached_decoding_dropout.py"


MUTATIONS = (
    # Masks.
    Mutation("encoder_padding_mask", "encoder self-attention attends to source padding",
             "transformer/model/encoder.py",
             "x = layer(x, attention_mask=attention_mask, training=training)",
             "x = layer(x, attention_mask=None, training=training)",
             (f"{MASKING}::test_padding_the_source_changes_nothing_at_real_positions",)),
    Mutation("encoder_padding_mask_lost_in_training", "encoder self-attention attends to "
             "source padding in training mode only", "transformer/model/encoder.py",
             "x = layer(x, attention_mask=attention_mask, training=training)",
             "x = layer(x, attention_mask=None if training else attention_mask, "
             "training=training)",
             (f"{MASKING}::test_padding_the_source_changes_nothing_at_real_positions",)),
    Mutation("cross_attention_padding_mask", "cross-attention attends to source padding",
             "transformer/model/decoder.py",
             "x = self.cross_attention(x, context, attention_mask=source_mask, training=training)",
             "x = self.cross_attention(x, context, attention_mask=None, training=training)",
             (f"{MASKING}::test_padding_the_source_changes_nothing_at_real_positions",)),
    Mutation("causal_mask", "decoder self-attention sees later target positions",
             "transformer/model/attention.py",
             "self.mha(x, x, use_causal_mask=True, training=training)",
             "self.mha(x, x, use_causal_mask=False, training=training)",
             (f"{MASKING}::test_no_look_ahead_leakage_in_training_mode_with_dropout",)),
    Mutation("causal_mask_lost_in_training", "the causal mask dropped in training mode only "
             "(what Keras' use_causal_mask did with dropout)", "transformer/model/attention.py",
             "self.mha(x, x, use_causal_mask=True, training=training)",
             "self.mha(x, x, use_causal_mask=not training, training=training)",
             (f"{MASKING}::test_no_look_ahead_leakage_in_training_mode_with_dropout",)),
    Mutation("causal_mask_off_by_one", "query i also sees key i + 1",
             "transformer/model/attention.py",
             "return (positions[None, :] <= positions[:, None])[None, None]",
             "return (positions[None, :] <= positions[:, None] + 1)[None, None]",
             (f"{MASKING}::test_no_look_ahead_leakage_in_training_mode_with_dropout",)),
    Mutation("masked_logits", "masked keys keep their logits (the mask only zeroes weights "
             "afterwards, which then no longer sum to 1)", "transformer/model/attention.py",
             "logits = ops.where(mask, logits, float(np.finfo(np.float32).min))",
             "logits = logits",
             (f"{MASKING}::test_padding_the_source_changes_nothing_at_real_positions",)),
    Mutation("decoding_causal_mask", "a cached step attends to cache rows not written yet",
             "transformer/model/attention.py",
             "mask = (positions <= index)[None, None, None, :]",
             "mask = (positions >= 0)[None, None, None, :]",
             (f"{MODEL}::test_decode_step_equals_the_last_position_of_a_full_pass",)),
    Mutation("decoding_cross_attention_mask", "a cached step attends to source padding",
             "transformer/model/decoder.py",
             "x, weights = self.cross_attention.step(x, cache[\"context_key\"], "
             "cache[\"context_value\"],\n                                           source_mask)",
             "x, weights = self.cross_attention.step(x, cache[\"context_key\"], "
             "cache[\"context_value\"],\n                                           None)",
             (f"{MODEL}::test_decode_step_equals_the_last_position_of_a_full_pass",)),
    # Fused attention (keras.ops.dot_product_attention) against the explicit path.
    Mutation("fused_attention_mask", "fused attention attends to source padding",
             "transformer/model/attention.py",
             "self.per_head(self.value_dense(value)), mask=mask,",
             "self.per_head(self.value_dense(value)), mask=None,", (FUSED,)),
    Mutation("fused_attention_causal", "fused self-attention sees later target positions",
             "transformer/model/attention.py", "is_causal=use_causal_mask)", "is_causal=False)",
             (FUSED,)),
    Mutation("fused_attention_scale", "fused attention ignores scale_attention_logits=False",
             "transformer/model/attention.py",
             "scale=1.0 / np.sqrt(self.key_dim) if self.scale_attention_logits else 1.0,",
             "scale=None,", (FUSED,)),
    # Scalings.
    Mutation("attention_logit_scale", "QKᵀ not divided by √d_k", "transformer/model/attention.py",
             "logits = logits / ops.sqrt(ops.cast(ops.shape(key)[-1], logits.dtype))",
             "logits = logits",
             (f"{SCALING}::test_attention_weights_are_softmax_of_qkt_or_qkt_over_root_dk",)),
    Mutation("embedding_scale", "token embeddings not multiplied by √d_model",
             "transformer/model/embedding.py",
             "x = x * ops.cast(ops.sqrt(float(self.d_model)), x.dtype)", "x = x",
             (f"{EMBEDDING}::test_embedding_output_is_scaled_embedding_plus_encoding",)),
    # Positions.
    Mutation("concatenated_layout", "cosines first in the concatenated layout",
             "transformer/model/embedding.py",
             "encoding = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)",
             "encoding = np.concatenate([np.cos(angles), np.sin(angles)], axis=-1)",
             (f"{EMBEDDING}::test_concatenated_layout_puts_sines_first_then_cosines",)),
    Mutation("interleaved_layout", "the interleaved layout laid out as the concatenated one",
             "transformer/model/embedding.py",
             "encoding = np.stack([np.sin(angles), np.cos(angles)], axis=-1)"
             ".reshape(length, depth)",
             "encoding = np.concatenate([np.sin(angles), np.cos(angles)], axis=-1)",
             (f"{EMBEDDING}::test_interleaved_layout_is_the_papers_formula",)),
    Mutation("decoding_position_offset", "each decoded token embedded at position 0",
             "transformer/model/decoder.py", "x = self.embedding(ids[:, None], offset=index)",
             "x = self.embedding(ids[:, None], offset=0)",
             (f"{MODEL}::test_decode_step_equals_the_last_position_of_a_full_pass",)),
    Mutation("learned_position_offset", "learned positions read from row 0 whatever the "
             "offset", "transformer/model/embedding.py",
             "rows = ops.slice(table, (offset, 0), (length, self.d_model))",
             "rows = ops.slice(table, (0, 0), (length, self.d_model))",
             (f"{POSITIONAL}::test_cached_decoding_reads_the_learned_row_of_each_position",)),
    # The decoding cache.
    Mutation("cache_write_position", "a step's key and value written to the cache's first row",
             "transformer/model/attention.py", "here = ops.equal(positions, index)[None, None, :, None]",
             "here = ops.equal(positions, 0)[None, None, :, None]",
             (f"{MODEL}::test_decode_step_equals_the_last_position_of_a_full_pass",)),
    Mutation("greedy_cache_not_kept", "greedy decoding drops each step's cache update",
             "transformer/inference/decoding.py",
             "logits, cache, _ = model.decode_step(ids[:, i], i, cache, source_mask)",
             "logits, _, _ = model.decode_step(ids[:, i], i, cache, source_mask)",
             # An untrained two-layer model, eager: seconds, where the trained one takes a minute.
             (f"{DROPOUT_DECODING}::test_cached_greedy_decoding_gives_the_tokens_of_decoding_"
              "without_the_cache",)),
    Mutation("beam_cache_reorder", "hypotheses keep the cache rows of their old place, not "
             "of their parent", "transformer/inference/decoding.py",
             "ops.take(x, new_rows, axis=0)", "x",
             (f"{DECODING}::test_cached_beam_search_equals_uncached_reference",)),
    Mutation("length_penalty", "beam scores not divided by the length penalty",
             "transformer/inference/decoding.py",
             "return ((5.0 + ops.cast(length, \"float32\")) / 6.0) ** alpha",
             "return ops.ones_like(ops.cast(length, \"float32\"))",
             (f"{DECODING}::test_beam_search_finds_a_better_sequence_than_greedy",)),
    # Output weights.
    Mutation("tied_output_weights", "the tied output projection uses the source embedding",
             "transformer/model/transformer.py",
             "embeddings = ops.cast(self.decoder.embedding.embeddings, x.dtype)",
             "embeddings = ops.cast(self.encoder.embedding.embeddings, x.dtype)",
             (f"{MODEL}::test_tied_embedding_gets_gradients_from_input_and_output_uses",)),
    Mutation("shared_embedding", "'shared' gives the encoder and decoder embeddings of their own",
             "transformer/model/transformer.py", "if self.output_weights == \"shared\":\n      shared_embedding",
             "if False:\n      shared_embedding",
             (f"{MODEL}::test_tied_output_projection_is_the_embedding_variable",)),
    # The loss.
    Mutation("label_smoothing", "label smoothing ignored", "transformer/model/losses.py",
             "nll = (1.0 - label_smoothing) * nll + label_smoothing * uniform", "nll = nll",
             (LOSSES,)),
    Mutation("loss_over_padding", "padding tokens counted in the loss",
             "transformer/model/losses.py",
             "mask = ops.cast(ops.not_equal(labels, pad_id), \"float32\")",
             "mask = ops.cast(ops.not_equal(labels, -1), \"float32\")", (LOSSES,)),
    Mutation("loss_per_replica_mean", "each replica divides by its own real tokens, not the "
             "global batch's", "transformer/training/tf_step.py",
             "global_count = tf.distribute.get_replica_context().all_reduce(\n"
             "        tf.distribute.ReduceOp.SUM, count)",
             "global_count = count", (f"{DISTRIBUTE}::test_two_replicas_match_one_device",)),
    # The learning rate.
    Mutation("warmup", "the warmup's slope d_model^-0.5·step·warmup^-1.5 at warmup^-1",
             "transformer/model/optimization.py", "step * float(self.warmup_steps) ** -1.5",
             "step * float(self.warmup_steps) ** -1.0", (OPTIMIZATION,)),
    Mutation("schedule_step_offset", "the schedule at iteration, not the step number (0 at "
             "the first update)", "transformer/model/optimization.py",
             "iteration = ops.cast(iteration, \"float32\")\n    step = iteration + 1.0",
             "iteration = ops.cast(iteration, \"float32\")\n    step = iteration",
             (OPTIMIZATION,)),
    Mutation("host_rate_without_cooldown", "the rate the JAX trainer shows and logs ignores "
             "the cooldown", "transformer/model/optimization.py",
             "return rate * min(max((float(self.cooldown_end_step) - iteration) / steps, 0.0), 1.0)",
             "return rate", (f"{OPTIMIZATION}::test_the_rate_on_the_host_is_the_schedules",)),
    Mutation("cooldown", "the cooldown never lowers the rate", "transformer/model/optimization.py",
             "return rate * ops.where(steps > 0.0, ops.clip(remaining, 0.0, 1.0), 1.0)",
             "return rate", (OPTIMIZATION,)),
    Mutation("budget_cooldown_end", "the time budget's cooldown ends at its length in steps, "
             "not at the step it began plus that length", "transformer/training/budget.py",
             "= total, steps, step + steps", "= total, steps, steps",
             (f"{BUDGET}::test_plan_stays_open_until_the_cooldown_must_begin_then_is_fixed",)),
    # The training loop, under both engines.
    Mutation("loop_checkpoint_before_record", "the checkpoint that closes an epoch written "
             "before its record", "transformer/training/loop.py",
             "          self.summaries.append_metrics(record)  # before the checkpoint: see the "
             "module's doc\n          history.append(record)\n          self.save_checkpoint()",
             "          self.save_checkpoint()\n          self.summaries.append_metrics(record)\n"
             "          history.append(record)",
             (f"{LOOP}::test_the_record_is_written_before_the_checkpoint_that_closes_its_epoch",)),
    Mutation("loop_saves_a_position_twice", "the loop writes a checkpoint of a position "
             "already saved or restored", "transformer/training/loop.py",
             "    if self._saved != (self.step, self.epoch, self.step_in_epoch):",
             "    if True:", (f"{LOOP}::test_a_position_is_saved_once",)),
    Mutation("loop_reads_at_once", "the loop reads each chunk's sums as soon as it is "
             "dispatched (the host waits for the devices)", "transformer/training/loop.py",
             "      read_all = (saving_due", "      read_all = (True or saving_due",
             (f"{LOOP}::test_a_chunks_sums_are_read_once_the_next_is_dispatched",)),
    # Checkpoints: averaging and resuming.
    Mutation("checkpoint_position", "checkpoints do not hold the step within the epoch",
             "transformer/training/tf_checkpointing.py",
             "epoch=epoch, step_in_epoch=step_in_epoch,", "epoch=epoch,",
             (f"{CHECKPOINTING}::test_a_checkpoint_holds_its_position",)),
    Mutation("checkpoint_averaging", "averaging keeps the last checkpoint's weights",
             "transformer/inference/averaging.py",
             "variable.assign((total / len(paths)).astype(",
             "variable.assign((variable.numpy()).astype(",
             (f"{EVALUATION}::test_averaging_trainer_checkpoints_gives_the_mean_of_each_"
              "variable",)),
    Mutation("resume_position", "a resumed epoch trains its first batches again",
             "transformer/training/tf_engine.py",
             "distribute_dataset(self.strategy, remaining())",
             "distribute_dataset(self.strategy, train_data(epoch))",
             (f"{FAULTS}::test_a_resumed_run_with_dropout_repeats_the_uninterrupted_one",)),
    # Dropout in cached decoding (inference: every dropout layer off).
    Mutation("decoding_embedding_dropout", "a cached step drops embedding units",
             "transformer/model/decoder.py", "x = self.embedding(ids[:, None], offset=index)",
             "x = self.embedding(ids[:, None], offset=index, training=True)",
             (f"{DROPOUT_DECODING}::test_each_decode_step_gives_the_full_pass_without_dropout",)),
    Mutation("decoding_feed_forward_dropout", "a cached step drops feed-forward outputs",
             "transformer/model/decoder.py", "return self.ffn(x), {**cache, **self_cache}, weights",
             "return self.ffn(x, training=True), {**cache, **self_cache}, weights",
             (f"{DROPOUT_DECODING}::test_each_decode_step_gives_the_full_pass_without_dropout",)),
    Mutation("decoding_self_attention_dropout", "a cached step drops self-attention outputs",
             "transformer/model/attention.py", "return self.residual(x, attended), cache",
             "return self.residual(x, attended, training=True), cache",
             (f"{DROPOUT_DECODING}::test_each_decode_step_gives_the_full_pass_without_dropout",)),
    Mutation("decoding_cross_attention_dropout", "a cached step drops cross-attention "
             "weights", "transformer/model/attention.py",
             "attended, weights = self.mha.attend(x, keys, values, mask)",
             "attended, weights = self.mha.attend(x, keys, values, mask, training=True)",
             (f"{DROPOUT_DECODING}::test_each_decode_step_gives_the_full_pass_without_dropout",)),
    Mutation("decoding_encoder_dropout", "greedy decoding encodes the source with dropout on",
             "transformer/inference/decoding.py",
             "  context, source_mask = model.encode(source_ids, training=False)\n"
             "  cache = model.initial_cache(context, length)",
             "  context, source_mask = model.encode(source_ids, training=True)\n"
             "  cache = model.initial_cache(context, length)",
             (f"{DROPOUT_DECODING}::test_cached_greedy_decoding_gives_the_tokens_of_decoding_"
              "without_the_cache",)),
    *data_mutations.MUTATIONS,
)
