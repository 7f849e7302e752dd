"""Pretraining's fit loop (`training.pretrain`): the family's model built,
compiled and restored under the strategy, then `model.fit` in checkpoint
intervals from the batch the run stopped at, phase 2's batches after
phase 1's.
"""

import dataclasses
import os

import keras
import tensorflow as tf

from keras_bert_impl.base.strategy_fixes import without_autotune_thread
from tf_records.manifest import pipeline_share
from tf_records.manifest import read_manifest
from training.pretraining.common import checkpoint_interval
from training.pretraining.common import say
from training.run.checkpointing import CheckpointEveryEpoch
from training.run.checkpointing import TrainingCheckpoint
from training.run.distribution import replicas_batch
from training.run.optimization import OptimizerConfig
from training.run.optimization import create_optimizer
from training.run.train_log import TrainingLog


@dataclasses.dataclass(frozen=True)
class _Schedule:
    """Batches (each of `--global_batch_size` rows) of phase 1 and of the
    whole run, and the checkpoint interval (one `fit` epoch)."""
    phase1: int
    total: int
    interval: int


def train(cfg, recipe, strategy, train_source, vocab_size, slices=1, at_start=None,
          phase2=None, train_manifest=None):
    """Builds, restores and fits (each batch in `slices`, `BatchSlices`); returns
    (model, model_config, step, nan). `at_start(model, model_config)`: called
    before the first step of a run that starts at step 0. `phase2`:
    `(recipe, records)` of the second phase (`--phase2_steps`): its batches
    follow phase 1's in the same fit, schedule and checkpoints.
    `train_manifest`: `train_source`'s manifest, already read (None: read here)."""
    replicas_batch(strategy, cfg.global_batch_size)  # checks divisibility
    schedule = _schedule(cfg, bool(phase2))
    keras.utils.set_random_seed(cfg.seed)
    model, model_config, checkpoint, step = _build_and_restore(
        cfg, recipe, strategy, vocab_size, schedule)
    if slices > 1:
        model.batch_slices = slices
    if step:
        say(f"Resuming at batch {step} of {schedule.total} from {checkpoint.directory}")
        if hasattr(recipe, "after_restore"):  # XLNet: state a restore cannot give back
            recipe.after_restore(model, strategy)
    if step % schedule.interval:
        raise SystemExit(f"The last checkpoint is at batch {step}, not a multiple of the "
                         f"interval {schedule.interval}: was --checkpoint_every_steps changed?")
    if step >= schedule.total:
        return model, model_config, step, None
    if at_start and not step:
        at_start(model, model_config)
    if strategy is tf.distribute.get_strategy():  # the default: no distribution
        dataset = _local_dataset(cfg, recipe, train_source, model_config, step)
    else:
        dataset = strategy.distribute_datasets_from_function(
            _distributed_dataset_fn(cfg, recipe, strategy, train_source, model_config, step,
                                    train_manifest))
    saver = CheckpointEveryEpoch(checkpoint, schedule.interval)
    log = TrainingLog(
        schedule.total, step, schedule.interval, cfg.log_every_steps, cfg.global_batch_size,
        cfg.global_batch_size * cfg.max_seq_length,
        log_dir=os.path.join(cfg.output_dir, "tensorboard") if checkpoint.is_chief else None)
    _announce(cfg, recipe, model, strategy, slices, schedule, bool(phase2))
    fit = dict(steps_per_epoch=schedule.interval, callbacks=[saver, log], verbose=0,
               shuffle=False)  # the dataset orders itself (seeded, resumable)
    if step < schedule.phase1 or not phase2:
        end = schedule.phase1 if phase2 else schedule.total
        model.fit(dataset, epochs=end // schedule.interval,
                  initial_epoch=step // schedule.interval, **fit)
        if saver.bad_loss or not phase2:
            return model, model_config, saver.batches or step, saver.bad_loss
        step = saver.batches or step
    phase2_recipe, phase2_source = phase2
    say(f"Phase 2 from batch {step + 1}: {cfg.phase2_max_seq_length}-token records "
        f"{phase2_source}")
    model.fit(_local_dataset(cfg, phase2_recipe, phase2_source, model_config,
                             step - schedule.phase1),
              epochs=schedule.total // schedule.interval,
              initial_epoch=step // schedule.interval, **fit)
    return model, model_config, saver.batches or step, saver.bad_loss


def _schedule(cfg, two_phases):
    """-> `_Schedule`; `SystemExit` where the checkpoint interval cannot
    divide phase 1 or `--steps_per_execution` cannot divide the interval."""
    accumulation = cfg.gradient_accumulation_steps
    phase1 = cfg.num_train_steps * accumulation
    total = (cfg.num_train_steps + (cfg.phase2_steps if two_phases else 0)) * accumulation
    interval = checkpoint_interval(total, cfg.checkpoint_every_steps * accumulation)
    if two_phases and phase1 % interval:
        raise SystemExit(f"The checkpoint interval ({interval} batches) must divide phase 1's "
                         f"{phase1} (--num_train_steps): phase 2 starts on a checkpoint.")
    if interval % cfg.steps_per_execution:
        raise SystemExit(f"--steps_per_execution={cfg.steps_per_execution} must divide the "
                         f"checkpoint interval ({interval} batches).")
    return _Schedule(phase1, total, interval)


def _build_and_restore(cfg, recipe, strategy, vocab_size, schedule):
    """(model, model_config, `TrainingCheckpoint`, the batch restored at),
    built and compiled under `strategy`."""
    accumulation = cfg.gradient_accumulation_steps
    with strategy.scope():
        model, model_config = recipe.build_model(vocab_size)
        optimizer = create_optimizer(OptimizerConfig(
            optimizer=cfg.optimizer, learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps,
            weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm,
            gradient_accumulation_steps=accumulation),
            schedule.total // accumulation)
        model.compile(optimizer=optimizer, steps_per_execution=cfg.steps_per_execution,
                      jit_compile=cfg.jit_compile)
        checkpoint = TrainingCheckpoint(model, os.path.join(cfg.output_dir, "checkpoints"),
                                        strategy=strategy)
        step = checkpoint.restore_latest()
    return model, model_config, checkpoint, step


def _local_dataset(cfg, recipe, source, model_config, start):
    """Batches of similar length, cut to their longest row: one replica
    only (replicas in one step would get different shapes). Autotuning off:
    ELMo's language model is not a `KerasStrategyFixes` model."""
    return without_autotune_thread(recipe.dataset(
        source, cfg.global_batch_size, model_config, start_batch=start,
        length_grouping=cfg.length_grouping))


def _distributed_dataset_fn(cfg, recipe, strategy, train_source, model_config, step,
                            train_manifest=None):
    """The `distribute_datasets_from_function` argument: each input
    pipeline's share of the records, from batch `step`, said in a line
    (`train_manifest`: as `train` takes it)."""
    def dataset_fn(context):
        replicas_per_pipeline = strategy.num_replicas_in_sync // context.num_input_pipelines
        sharded = context.num_input_pipelines > 1
        if sharded and hasattr(recipe, "pipeline_streams"):  # XLNet: streams, not files
            say(f"Input pipeline {context.input_pipeline_id} of {context.num_input_pipelines} "
                f"{recipe.pipeline_streams(train_source, context)}")
        elif sharded and (os.path.isdir(train_source) or train_source.endswith(".json")):
            manifest = train_manifest or read_manifest(train_source)
            files = [s["file"] for s in manifest["shards"]]
            mine, _ = pipeline_share(files, None, context)
            say(f"Input pipeline {context.input_pipeline_id} of {context.num_input_pipelines} "
                f"reads {', '.join(mine)}")
        return without_autotune_thread(recipe.dataset(
            train_source, context.get_per_replica_batch_size(cfg.global_batch_size),
            model_config, start_batch=step * replicas_per_pipeline,
            input_context=context if sharded else None))

    return dataset_fn


def _announce(cfg, recipe, model, strategy, slices, schedule, two_phases):
    """The line that says what trains, how long and where."""
    what = cfg.config_file or recipe.preset
    objective = getattr(recipe, "ablation", cfg.ablation)  # BERT on RoBERTa's rows: no_nsp
    say(f"Training {what} {recipe.name}{f' ({objective})' if objective else ''} "
        f"({model.count_params():,} parameters) for {schedule.total} batches of "
        f"{cfg.global_batch_size}{' in mixed_bfloat16' if cfg.mixed_precision else ''} on "
        f"{strategy.num_replicas_in_sync} replica(s)"
        f"{f' in {slices} slices side by side' if slices > 1 else ''}, checkpoint every "
        f"{schedule.interval}")
    if two_phases:
        say(f"Phase 1: batches 1-{schedule.phase1} at {cfg.max_seq_length} tokens; phase 2: "
            f"{schedule.phase1 + 1}-{schedule.total} at {cfg.phase2_max_seq_length}.")
