"""Pretraining's fit loop (`training.pretrain`): the family's model built,
compiled and restored under the strategy, then `model.fit` in checkpoint
intervals from the batch the run stopped at, phase 2's batches after
phase 1's.
"""

import os

from training.pretraining.common import say


def train(cfg, recipe, strategy, train_source, vocab_size, slices=1, at_start=None,
          phase2=None):
    """Builds, restores and fits (each batch in `slices`, `BatchSlices`); returns
    (model, model_config, step, nan). `at_start(model, model_config)`: called
    before the first step of a run that starts at step 0. `phase2`:
    `(recipe, records)` of the second phase (`--phase2_steps`): its batches
    follow phase 1's in the same fit, schedule and checkpoints."""
    import keras
    import tensorflow as tf

    from keras_bert_impl.base.strategy_fixes import without_autotune_thread
    from tf_records.manifest import pipeline_share
    from tf_records.manifest import read_manifest
    from training.pretraining.common import checkpoint_interval
    from training.run.checkpointing import CheckpointEveryEpoch
    from training.run.checkpointing import TrainingCheckpoint
    from training.run.distribution import replicas_batch
    from training.run.optimization import OptimizerConfig
    from training.run.optimization import create_optimizer
    from training.run.train_log import TrainingLog

    replicas_batch(strategy, cfg.global_batch_size)  # checks divisibility
    accumulation = cfg.gradient_accumulation_steps
    phase1_batches = cfg.num_train_steps * accumulation
    total_batches = (cfg.num_train_steps + (cfg.phase2_steps if phase2 else 0)) * accumulation
    interval = checkpoint_interval(total_batches, cfg.checkpoint_every_steps * accumulation)
    if phase2 and phase1_batches % interval:
        raise SystemExit(f"The checkpoint interval ({interval} batches) must divide phase 1's "
                         f"{phase1_batches} (--num_train_steps): phase 2 starts on a checkpoint.")
    if interval % cfg.steps_per_execution:
        raise SystemExit(f"--steps_per_execution={cfg.steps_per_execution} must divide the "
                         f"checkpoint interval ({interval} batches).")
    keras.utils.set_random_seed(cfg.seed)
    with strategy.scope():
        model, model_config = recipe.build_model(vocab_size)
        optimizer = create_optimizer(OptimizerConfig(
            optimizer=cfg.optimizer, learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps,
            weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm,
            gradient_accumulation_steps=accumulation),
            total_batches // accumulation)
        model.compile(optimizer=optimizer, steps_per_execution=cfg.steps_per_execution,
                      jit_compile=cfg.jit_compile)
        checkpoint = TrainingCheckpoint(model, os.path.join(cfg.output_dir, "checkpoints"),
                                        strategy=strategy)
        step = checkpoint.restore_latest()
    if slices > 1:
        model.batch_slices = slices
    if step:
        say(f"Resuming at batch {step} of {total_batches} from {checkpoint.directory}")
        if hasattr(recipe, "after_restore"):  # XLNet: state a restore cannot give back
            recipe.after_restore(model, strategy)
    if step % interval:
        raise SystemExit(f"The last checkpoint is at batch {step}, not a multiple of the "
                         f"interval {interval}: was --checkpoint_every_steps changed?")
    if step >= total_batches:
        return model, model_config, step, None
    if at_start and not step:
        at_start(model, model_config)

    def dataset_fn(context):
        replicas_per_pipeline = strategy.num_replicas_in_sync // context.num_input_pipelines
        sharded = context.num_input_pipelines > 1
        if sharded and hasattr(recipe, "pipeline_streams"):  # XLNet: streams, not files
            say(f"Input pipeline {context.input_pipeline_id} of {context.num_input_pipelines} "
                f"{recipe.pipeline_streams(train_source, context)}")
        elif sharded and (os.path.isdir(train_source) or train_source.endswith(".json")):
            files = [s["file"] for s in read_manifest(train_source)["shards"]]
            mine, _ = pipeline_share(files, None, context)
            say(f"Input pipeline {context.input_pipeline_id} of {context.num_input_pipelines} "
                f"reads {', '.join(mine)}")
        return without_autotune_thread(recipe.dataset(
            train_source, context.get_per_replica_batch_size(cfg.global_batch_size),
            model_config, start_batch=step * replicas_per_pipeline,
            input_context=context if sharded else None))

    def local_dataset(recipe, source, start):
        # Batches of similar length, cut to their longest row: one replica
        # only (replicas in one step would get different shapes). Autotuning
        # off: ELMo's language model is not a `KerasStrategyFixes` model.
        return without_autotune_thread(recipe.dataset(
            source, cfg.global_batch_size, model_config, start_batch=start,
            length_grouping=cfg.length_grouping))

    if strategy is tf.distribute.get_strategy():  # the default: no distribution
        dataset = local_dataset(recipe, train_source, step)
    else:
        dataset = strategy.distribute_datasets_from_function(dataset_fn)
    saver = CheckpointEveryEpoch(checkpoint, interval)
    log = TrainingLog(
        total_batches, step, interval, cfg.log_every_steps, cfg.global_batch_size,
        cfg.global_batch_size * cfg.max_seq_length,
        log_dir=os.path.join(cfg.output_dir, "tensorboard") if checkpoint.is_chief else None)
    what = cfg.config_file or recipe.preset
    objective = getattr(recipe, "ablation", cfg.ablation)  # BERT on RoBERTa's rows: no_nsp
    say(f"Training {what} {recipe.name}{f' ({objective})' if objective else ''} "
        f"({model.count_params():,} parameters) for {total_batches} batches of "
        f"{cfg.global_batch_size}{' in mixed_bfloat16' if cfg.mixed_precision else ''} on "
        f"{strategy.num_replicas_in_sync} replica(s)"
        f"{f' in {slices} slices side by side' if slices > 1 else ''}, checkpoint every {interval}")
    if phase2:
        say(f"Phase 1: batches 1-{phase1_batches} at {cfg.max_seq_length} tokens; phase 2: "
            f"{phase1_batches + 1}-{total_batches} at {cfg.phase2_max_seq_length}.")
    if step < phase1_batches or not phase2:
        end = phase1_batches if phase2 else total_batches
        model.fit(dataset, epochs=end // interval, initial_epoch=step // interval,
                  steps_per_epoch=interval, callbacks=[saver, log], verbose=0,
                  shuffle=False)  # the dataset orders itself (seeded, resumable)
        if saver.bad_loss or not phase2:
            return model, model_config, saver.batches or step, saver.bad_loss
        step = saver.batches or step
    phase2_recipe, phase2_source = phase2
    say(f"Phase 2 from batch {step + 1}: {cfg.phase2_max_seq_length}-token records "
        f"{phase2_source}")
    model.fit(local_dataset(phase2_recipe, phase2_source, step - phase1_batches),
              epochs=total_batches // interval, initial_epoch=step // interval,
              steps_per_epoch=interval, callbacks=[saver, log], verbose=0, shuffle=False)
    return model, model_config, saver.batches or step, saver.bad_loss
