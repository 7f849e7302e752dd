"""`python -m training.finetune`'s run, in its steps: resolve the config
(`training.finetuning.resolve`), read every split (`checks.load_data`),
lock the output folder, build the task model under the strategy, fit
(`training.finetuning.loop`), then write the predictions, the export and
`summary.json`.

The command imports this module once its console has started: TensorFlow's
start-up lines go to the console's log, not the screen."""

import dataclasses
import math
import os
import time
import warnings

import keras
from absl import logging

from keras_bert_impl.runtimes.formats import parse_formats
from tf_records.command_line.keras_extras import freeze_imports
from training.finetuning.checks import check_positions
from training.finetuning.checks import load_data
from training.finetuning.early_stopping import final_scores
from training.finetuning.early_stopping import kept_weights
from training.finetuning.exports import export_model
from training.finetuning.loop import EvaluateEachEpoch
from training.finetuning.loop import epoch_seed
from training.finetuning.loop import fit_resumable
from training.finetuning.loop import shuffled_batches
from training.finetuning.loop import write_json
from training.finetuning.resolve import recipe_for
from training.finetuning.resolve import resolve_run
from training.run.checkpointing import OutputLock
from training.run.curves import write_training_curves
from training.run.distribution import make_strategy
from training.run.distribution import replicas_batch
from training.run.optimization import OptimizerConfig
from training.run.optimization import create_optimizer
from training.run.train_log import TrainingLog


def say(message):
    print(message, flush=True)


def run(cfg, explicit=None):
    """Fine-tunes, scores, writes predictions and exports; returns the summary.

    Validate first, act second: the flags, the checkpoint's and vocabulary's
    paths and every data split (each read, encoded and found non-empty)
    are checked before the output folder is made or locked, so a run stopped
    there leaves the folder as it found it. `explicit`: the flags given on
    the command line (`resolve_run`); None: `cfg` as it is.
    """
    logging.set_verbosity(logging.WARNING)
    # Span QA, tagging and features do not read the pooler; Keras warns that
    # it gets no gradient, as the original left it untrained for them.
    warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables \['pooler")
    started = time.time()
    cfg, recipe = resolve_run(cfg, explicit)
    freeze_imports()
    keras.utils.set_random_seed(cfg.seed)
    validation_recipe = None
    if cfg.validation_data_dir:  # the same task, read from the validation folder
        validation_recipe = recipe_for(dataclasses.replace(cfg, data_dir=cfg.validation_data_dir))
    # reads; writes nothing
    tokenizer, task, data, validation = load_data(cfg, recipe, validation_recipe)
    try:
        lock = OutputLock(cfg.output_dir)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    try:
        return _fine_tune(cfg, recipe, started, tokenizer, (task, validation), data)
    finally:
        lock.release()


def _fine_tune(cfg, recipe, started, tokenizer, tasks, data):
    """The run itself, top to bottom: model -> fit -> predictions -> export
    -> summary. `tasks`: (the task, the same task on --validation_data_dir or None)."""
    task, validation = tasks
    if cfg.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    rows = len(data[0]["input_word_ids"])
    steps_per_epoch = math.ceil(rows / cfg.batch_size)
    total_steps = steps_per_epoch * cfg.epochs
    warmup = int(total_steps * cfg.warmup_proportion)
    strategy = make_strategy(cfg.strategy, cfg.tpu)
    replicas_batch(strategy, cfg.batch_size)  # checks divisibility
    say(f"Task {cfg.task} ({cfg.model}{recipe.describe()}): "
        f"{rows} training rows, max_seq_length {cfg.max_seq_length}; "
        f"{cfg.epochs} epochs x {steps_per_epoch} steps of {cfg.batch_size} = {total_steps} "
        f"steps on {strategy.num_replicas_in_sync} replica(s), lr {cfg.learning_rate:g} "
        f"(warmup {warmup}); from {cfg.init_checkpoint or 'random ' + cfg.preset}; "
        f"dev splits {task.eval_splits}")
    optimizer_config = OptimizerConfig(
        learning_rate=cfg.learning_rate, warmup_steps=warmup,
        weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm)
    if recipe.adam_epsilon is not None:
        optimizer_config = dataclasses.replace(optimizer_config, epsilon=recipe.adam_epsilon)
    with strategy.scope():
        model = _task_model(cfg, recipe, tokenizer, task)
        model.compile(optimizer=create_optimizer(optimizer_config, total_steps))
    log_dir = os.path.join(cfg.output_dir, "tensorboard")
    log = TrainingLog(total_steps, 0, steps_per_epoch, cfg.log_every_steps, cfg.batch_size,
                      cfg.batch_size * cfg.max_seq_length, log_dir=log_dir, rate_label="ex/s")
    history, kept = _fit(cfg, recipe, model, tasks, data,
                         (steps_per_epoch, log, strategy, log_dir))
    curves, _ = write_training_curves(log_dir)
    say(f"Training curves -> {curves}")
    os.makedirs(cfg.output_dir, exist_ok=True)
    written = task.write_predictions(model, cfg.output_dir)
    for path in written:
        say(f"Predictions -> {path}")
    export_dir = os.path.join(cfg.output_dir, "export")
    # text_classification's label strings, sorted: the exports answer with them.
    labels = list(getattr(task, "class_labels", ())) or None
    if cfg.export:
        export_model(model, recipe, cfg, export_dir, labels, task=task)
    else:
        say("--noexport: no SavedModel or model.keras written.")
    summary = {"config": dataclasses.asdict(cfg), "train_rows": rows,
               "history": history, **kept, "predictions": written,
               **({"labels": labels} if labels else {}),
               "export": os.path.abspath(export_dir) if cfg.export else None,
               "wall_seconds": round(time.time() - started, 1)}
    path = os.path.join(cfg.output_dir, "summary.json")
    write_json(path, summary)
    saved_model = "" if not cfg.export else (
        (f"Exported SavedModel -> {os.path.join(export_dir, 'saved_model')}; "
         if "saved_model" in parse_formats(cfg.export_formats) else "")
        + f"Keras model -> {os.path.join(export_dir, 'model.keras')}; ")
    say(f"{saved_model}summary -> {path}. Done in {time.time() - started:.0f} s.")
    return summary


def _fit(cfg, recipe, model, tasks, data, loop):
    """Fits (resumably), scoring each epoch, and keeps early stopping's best
    weights: `(history, what summary.json says of the weights kept)`.
    `loop`: (steps per epoch, the `TrainingLog`, the strategy, TensorBoard's folder)."""
    task, validation = tasks
    steps_per_epoch, log, strategy, log_dir = loop
    # Batches of similar length cut to their longest row; TPUs want static shapes.
    group = cfg.length_grouping if (cfg.length_grouping > 1 and "input_mask" in data[0]
                                    and cfg.strategy != "tpu") else 0
    scoring = (EvaluateEachEpoch(validation, log_dir, {validation.eval_splits[0]: "validation"})
               if validation else EvaluateEachEpoch(task, log_dir))
    watched = next(iter(scoring.names.values()), None)
    history = fit_resumable(
        model, _epoch_batches(recipe, task, model, data, cfg.batch_size, group, cfg.seed),
        cfg.epochs, steps_per_epoch, cfg.output_dir, cfg.checkpoint_every_steps,
        [scoring], log, strategy, dataclasses.asdict(cfg),
        (watched, cfg.early_stopping_patience) if cfg.early_stopping_patience else None)
    kept = kept_weights(model, cfg.output_dir, cfg.early_stopping_patience, history, watched,
                        task.eval_splits)
    if validation:  # dev, once, with the weights kept
        kept["scores"] = final_scores(model, task)
    return history, kept


def _task_model(cfg, recipe, tokenizer, task):
    """The task's model on the family's backbone (built in the caller's
    strategy scope), refused (`SystemExit`) before `run_config.json` is
    written when the checkpoint is not what its files claim or is too short
    for `--max_seq_length`."""
    try:
        backbone = recipe.build_backbone(getattr(tokenizer, "vocab_size", None))
    except ValueError as e:  # a checkpoint that is not what its files claim
        raise SystemExit(f"--init_checkpoint={cfg.init_checkpoint}: {e}") from None
    check_positions(cfg.max_seq_length, backbone,
                    "from " + (cfg.init_checkpoint or "--preset=" + cfg.preset))
    recipe.check_backbone(tokenizer, backbone)
    return task.build_model(backbone)


def _epoch_batches(recipe, task, model, data, batch_size, group, seed):
    """epoch -> its training batches, the same in every run (a resumed one
    skips those trained): shuffled by `seed` and the epoch, with `group` > 0
    `group` batches at a time sorted by length and cut to their longest row."""
    x, y, sample_weight = data

    def epoch_batches(epoch):
        shuffle_seed = epoch_seed(seed, epoch)
        batches = recipe.grouped_batches(x, y, sample_weight, batch_size, group,
                                         shuffle_seed) if group else (
            shuffled_batches(x, y, sample_weight, batch_size, shuffle_seed))
        return recipe.epoch_batches(task, model, batches)

    return epoch_batches
