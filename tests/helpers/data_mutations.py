"""The mutations of tests/helpers/mutations.py where the model meets the data
and the export: the NumPy shards and the tf.data pipeline, the tokenizers, the
exported translator, and the JAX trainer (its loss, dropout state, resume,
cooldown and checkpoint averaging)."""

from helpers.mutation_runner import Mutation

BATCHES = "tests/unit/test_batches_once_per_epoch.py"
SHARDS = "tests/unit/test_shards.py"
PIPELINE_PAIRS = "tests/unit/test_pipeline_pairs.py"
TOKENS = "tests/unit/test_tokenizer_tokens.py"
TRANSLATOR = "tests/unit/test_translator_lengths.py"
SIGNATURES = "tests/integration/test_export_signatures.py"
JAX_STATE = "tests/backends/test_jax_trainer_state.py"
JAX_RUNS = "tests/backends/test_keras_loop.py"


MUTATIONS = (
    # The JAX trainer's batches (NumPy shards): every pair once an epoch, with its target.
    Mutation("shards_partial_batch_dropped", "the epoch's last, partial batch is dropped",
             "transformer/data/shards.py",
             "for i in range(0, len(order), size)]",
             "for i in range(0, len(order) - size + 1, size)]",
             (f"{BATCHES}::test_every_pair_is_in_an_epoch_once_with_its_own_target",)),
    Mutation("shards_bucket_remainder_dropped", "each length bucket's last, partial batch "
             "is dropped", "transformer/data/shards.py",
             "for bucket, rows in enumerate(open_batches) if rows)",
             "for bucket, rows in enumerate(open_batches) if len(rows) == sizes[bucket])",
             (f"{BATCHES}::test_every_pair_is_in_an_epoch_once_with_its_own_target",)),
    Mutation("shards_pairs_apart", "a batch's targets beside other rows' sources",
             "transformer/data/shards.py", "pt, en = split.pt[row], split.en[row]",
             "pt, en = split.pt[row], split.en[rows[-1 - i]]",
             (f"{BATCHES}::test_every_pair_is_in_an_epoch_once_with_its_own_target",)),
    Mutation("shards_decoder_input", "the decoder inputs are the labels (the model learns to "
             "copy)", "transformer/data/shards.py", "target_input[i, :len(en) - 1] = en[:-1]",
             "target_input[i, :len(en) - 1] = en[1:]",
             (f"{BATCHES}::test_every_pair_is_in_an_epoch_once_with_its_own_target",)),
    Mutation("shards_target_trim", "targets trimmed to max_tokens, one short of the "
             "pipeline's (a long sentence loses a label)", "transformer/data/shards.py",
             "[e[:max_tokens + 1] for e in self.en]", "[e[:max_tokens] for e in self.en]",
             (f"{BATCHES}::test_trimming_keeps_max_tokens_of_the_source_and_one_more_of_the_"
              "target",)),
    Mutation("shards_epoch_seed", "every epoch shuffled the same way",
             "transformer/data/shards.py", "return seed * 100003 + epoch",
             "return seed * 100003",
             (f"{SHARDS}::test_an_epoch_has_the_same_batches_for_the_same_seed_and_others_for_"
              "another",)),
    Mutation("shards_unseeded_permutation", "the epoch's permutation not seeded (a resumed "
             "epoch skips batches it never trained on)", "transformer/data/shards.py",
             "np.random.default_rng(seed).permutation(pairs)",
             "np.random.default_rng().permutation(pairs)",
             (f"{SHARDS}::test_an_epoch_has_the_same_batches_for_the_same_seed_and_others_for_"
              "another",)),
    # The tf.data pipeline: pairs kept together, trimming, bucketing.
    Mutation("pipeline_pairs_apart", "sources shuffled apart from their targets",
             "transformer/data/pipeline.py",
             "dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)",
             "dataset = tf.data.Dataset.zip((\n"
             "        dataset.map(lambda pt, en: pt).shuffle(shuffle_buffer, seed=seed),\n"
             "        dataset.map(lambda pt, en: en)))",
             (f"{PIPELINE_PAIRS}::test_each_shuffled_pair_comes_once_with_its_own_target",)),
    Mutation("pipeline_remainder_dropped", "each epoch's last, partial batch is dropped",
             "transformer/data/pipeline.py",
             "shuffle_buffer: int = 20000, seed: int = 0,\n"
             "                    drop_remainder: bool = False,",
             "shuffle_buffer: int = 20000, seed: int = 0,\n"
             "                    drop_remainder: bool = True,",
             (f"{PIPELINE_PAIRS}::test_each_shuffled_pair_comes_once_with_its_own_target",)),
    Mutation("pipeline_source_trim", "sources one token longer than max_tokens (past the "
             "lengths the positions and masks are sized for)", "transformer/data/pipeline.py",
             "pt_ids = tokenizers.pt.tokenize(pt)[:, :max_tokens]",
             "pt_ids = tokenizers.pt.tokenize(pt)[:, :max_tokens + 1]",
             (f"{PIPELINE_PAIRS}::test_each_shuffled_pair_comes_once_with_its_own_target",)),
    Mutation("pipeline_target_trim", "targets trimmed to max_tokens, one short (a long "
             "sentence loses a label)", "transformer/data/pipeline.py",
             "en_ids = tokenizers.en.tokenize(en)[:, :max_tokens + 1]",
             "en_ids = tokenizers.en.tokenize(en)[:, :max_tokens]",
             (f"{PIPELINE_PAIRS}::test_each_shuffled_pair_comes_once_with_its_own_target",)),
    Mutation("pipeline_bucket_by_source", "sentences bucketed by their source alone: long "
             "targets in batches of short ones", "transformer/data/pipeline.py",
             "return tf.maximum(tf.shape(source)[0], tf.shape(labels)[0])",
             "return tf.shape(source)[0]",
             (f"{PIPELINE_PAIRS}::test_a_bucketed_batch_holds_sentences_of_one_bucket_within_"
              "its_budget",)),
    # The tokenizers: reserved tokens, detokenization.
    Mutation("tokenizer_start_id", "sentences begin with [END], not [START]",
             "transformer/data/tokenizer_module.py",
             "self._start_id = self._reserved_tokens.index(\"[START]\")",
             "self._start_id = self._reserved_tokens.index(\"[END]\")",
             (f"{TOKENS}::test_a_sentence_is_its_word_ids_between_start_and_end",)),
    Mutation("reserved_token_order", "[START] and [END] at each other's ids (the tutorial's "
             "tokenizer and decoding disagree)", "transformer/data/reserved_tokens.py",
             "RESERVED_TOKENS = (\"[PAD]\", \"[UNK]\", \"[START]\", \"[END]\")",
             "RESERVED_TOKENS = (\"[PAD]\", \"[UNK]\", \"[END]\", \"[START]\")",
             (f"{TOKENS}::test_the_tutorials_tokenizer_has_the_same_reserved_ids",)),
    Mutation("detokenize_keeps_start_end", "[START] and [END] left in the text (BLEU counts "
             "them)", "transformer/data/tokenizer_module.py",
             "dropped = [_re2_escape(t) for t in self._reserved_tokens if t != \"[UNK]\"]",
             "dropped = [_re2_escape(t) for t in self._reserved_tokens if t == \"[PAD]\"]",
             (f"{TOKENS}::test_detokenizing_drops_padding_start_and_end_but_keeps_unknown_"
              "words",)),
    Mutation("detokenize_drops_unknown", "[UNK] dropped from the text: a translation hides "
             "the words its vocabulary lacks", "transformer/data/tokenizer_module.py",
             "dropped = [_re2_escape(t) for t in self._reserved_tokens if t != \"[UNK]\"]",
             "dropped = [_re2_escape(t) for t in self._reserved_tokens]",
             (f"{TOKENS}::test_detokenizing_drops_padding_start_and_end_but_keeps_unknown_"
              "words",)),
    # The export: lengths, the two methods, the signatures.
    Mutation("translator_max_length", "the tutorial's call stops one token short of "
             "max_length", "transformer/inference/export.py",
             "tf.minimum(max_length, max_position)", "tf.minimum(max_length - 1, max_position)",
             (f"{TRANSLATOR}::test_the_tutorial_call_gives_start_and_max_length_tokens",)),
    Mutation("exported_call_length", "the exported call cuts translations at 64 tokens, not "
             "the tutorial's 128", "transformer/inference/export.py",
             "text, _, _ = self.translator(sentence, max_length=MAX_TOKENS)",
             "text, _, _ = self.translator(sentence, max_length=MAX_TOKENS // 2)",
             (f"{TRANSLATOR}::test_the_exported_call_gives_the_tutorials_128_tokens",)),
    Mutation("translator_extra_length", "the batch functions ignore config.decoding's "
             "extra_length (the paper's 50 always)", "transformer/inference/export.py",
             "length_penalty=self.length_penalty, extra_length=self.extra_length)",
             "length_penalty=self.length_penalty, extra_length=50)",
             (f"{TRANSLATOR}::test_a_batch_translation_is_its_input_length_and_extra_length_"
              "long",)),
    Mutation("translate_is_greedy", "translate (serving_default) decodes greedily, not by "
             "the paper's beam search", "transformer/inference/export.py",
             "return self._text(self._decode(self._source_ids(sentences), \"beam\"))",
             "return self._text(self._decode(self._source_ids(sentences), \"greedy\"))",
             (f"{TRANSLATOR}::test_translate_is_beam_search_and_translate_greedy_greedy",)),
    Mutation("greedy_signature", "the translate_greedy signature serves beam search",
             "transformer/inference/export.py",
             "\"translate_greedy\": translator.translate_greedy,",
             "\"translate_greedy\": translator.translate,",
             (f"{SIGNATURES}::test_each_signature_serves_its_method",)),
    # The JAX trainer: the loss, the dropout random state, resuming, the budget's cooldown.
    Mutation("jax_loss_over_padding", "the JAX loss divided by every label position, padding "
             "included, not the real tokens", "transformer/training/jax_steps.py",
             "return loss_sum / jax.numpy.maximum(tokens, 1.0), (",
             "return loss_sum / labels.size, (",
             (f"{JAX_STATE}::test_the_loss_is_the_mean_over_the_batchs_real_tokens",)),
    Mutation("jax_dropout_state", "the dropout random state not carried to the next step: "
             "every step drops the same units", "transformer/training/jax_steps.py",
             "grads, (logits, loss_sum, tokens, non_trainable) = jax.grad(",
             "grads, (logits, loss_sum, tokens, _) = jax.grad(",
             (f"{JAX_STATE}::test_each_step_draws_new_dropout_masks",)),
    Mutation("jax_resume_optimizer", "a resumed JAX run starts Adam's moments and step "
             "counter afresh", "transformer/training/jax_checkpointing.py",
             "        (self._optimizer.variables, optimizer_values, \"optimizer\"),\n"
             "        (self._model.non_trainable_variables, non_trainable_values, "
             "\"non-trainable\")):",
             "        (self._model.non_trainable_variables, non_trainable_values, "
             "\"non-trainable\"),):",
             (f"{JAX_STATE}::test_a_resumed_run_repeats_the_uninterrupted_one",)),
    Mutation("jax_resume_dropout_state", "a resumed JAX run draws a fresh run's dropout masks",
             "transformer/training/jax_checkpointing.py",
             "        (self._model.non_trainable_variables, non_trainable_values, "
             "\"non-trainable\")):",
             "):",
             (f"{JAX_STATE}::test_a_resumed_run_repeats_the_uninterrupted_one",)),
    Mutation("jax_resume_step", "a resumed JAX run counts its steps from 0 (it trains past "
             "train_steps)", "transformer/training/jax_engine.py",
             "self._step = int(self.optimizer.iterations.numpy())\n    return state",
             "self._step = 0\n    return state",
             (f"{JAX_STATE}::test_a_resumed_run_repeats_the_uninterrupted_one",)),
    Mutation("jax_budget_cooldown", "the JAX engine never gives its compiled step the time "
             "budget's cooldown", "transformer/training/jax_engine.py",
             "    self._steps.set_cooldown(steps, end_step)\n",
             "    del steps, end_step\n",
             (f"{JAX_RUNS}::test_the_time_budget_plans_the_epochs_and_cools_the_rate_to_zero",)),
    Mutation("jax_stack_padding_trains", "a stack's padding steps train on empty batches "
             "(Adam's step and moments move)", "transformer/training/jax_steps.py",
             "values, sums = jax.lax.cond(is_active, train_step, skipped, values, batch)",
             "values, sums = train_step(values, batch)",
             (f"{JAX_STATE}::test_eight_steps_a_dispatch_train_as_one_and_resume_mid_stack",)),
    Mutation("keras_checkpoint_averaging", "averaging the JAX trainer's checkpoints keeps the "
             "last one's weights", "transformer/run/keras_checkpoints.py",
             "sums = values if sums is None else [total + v for total, v in zip(sums, values)]",
             "sums = [len(paths) * v for v in values]",
             (f"{JAX_RUNS}::test_the_last_checkpoints_weights_average",)),
)
