"""`python -m training.pretrain`'s run, in its steps: resolve the config
(`training.pretraining.resolve`), open the output folder, start Keras under
the strategy, write or check the data, fit (`training.pretraining.command.loop`),
then evaluate on held-out data and export.

The command imports this module once its console has started: TensorFlow's
start-up lines go to the console's log, not the screen."""

import dataclasses
import json
import os
import shutil
import time

import keras
import tensorflow as tf
from absl import logging

from tf_records.command_line.keras_extras import freeze_imports
from tf_records.command_line.progress import Timed
from training.pretraining.checks import verify_records
from training.pretraining.command.exports import runtime_exports
from training.pretraining.command.loop import train
from training.pretraining.command.recipes import make_recipe
from training.pretraining.command.recipes import prepare_data
from training.pretraining.common import heldout_text
from training.pretraining.common import is_tfrecords
from training.pretraining.common import say
from training.pretraining.common import write_json
from training.pretraining.continued import START_EVALUATION
from training.pretraining.continued import start_evaluation
from training.pretraining.resolve import resolve
from training.pretraining.run_config import RUN_CONFIG
from training.pretraining.run_config import check_run_config
from training.run.checkpointing import OutputLock
from training.run.curves import write_heldout_scalars
from training.run.curves import write_training_curves
from training.run.distribution import cpu_batch_slices
from training.run.distribution import cpu_only
from training.run.distribution import cpu_op_threads
from training.run.distribution import make_strategy


@dataclasses.dataclass
class _Data:
    """The run's records and vocabulary; `train_manifest`: the training
    records' manifest (None: records without one); `phase2`: (recipe,
    training records, held-out records) of `--phase2_steps`, or None."""
    train: str
    heldout: str
    vocab_file: str
    vocab_size: int
    train_manifest: dict | None = None
    phase2: tuple | None = None


def run(cfg, explicit=None):
    """Pretrains as `cfg` says: data, training, evaluation, export.

    Validate first, act second: the flags, the paths they name and the
    records' agreement with them are checked (`training.pretraining.resolve`)
    before the output folder is made, locked or given its
    `run_config.json`. `explicit`: the flags given on the command line (a
    flag not given takes the records' value); None: those whose value
    differs from the default.
    """
    logging.set_verbosity(logging.WARNING)  # TensorFlow's INFO lines drown the progress
    started = time.time()
    resolved = resolve(cfg, explicit)
    cfg, init = resolved.cfg, resolved.init
    # Checks --model, --ablation, the preset or config file.
    recipe = make_recipe(cfg, init, resolved.manifests)
    role, lock = _open_output(cfg, recipe, resolved.typed)
    chief = role in ("", "chief-0", "worker-0")
    strategy, slices, op_threads = _start_keras(cfg, recipe)
    data = _prepare_data(cfg, recipe, init, strategy, resolved.manifests)
    at_start = None
    # The checkpoint's held-out loss, to beat (where the recipe evaluates it).
    if init and data.heldout and chief and recipe.evaluates_at_start:
        def at_start(model, model_config):
            start_evaluation(model, recipe.dataset(data.heldout, cfg.global_batch_size,
                                                   model_config, repeat=False, shuffle=False),
                             cfg.output_dir)

    model, model_config, step, bad_loss = train(
        cfg, recipe, strategy, data.train, data.vocab_size, slices, at_start,
        data.phase2[:2] if data.phase2 else None, data.train_manifest)
    if bad_loss:
        raise SystemExit(f"The loss became {bad_loss[1]} by batch {bad_loss[0]}: stopped; the last "
                         f"good checkpoint is kept in {os.path.join(cfg.output_dir, 'checkpoints')}.")
    if not chief:
        say(f"Worker {role} done: {step} batches.")
        return
    if data.phase2:  # held-out scores at the length the model ends on
        recipe = data.phase2[0]
        data = dataclasses.replace(data, heldout=data.phase2[2])
    if strategy.num_replicas_in_sync > 1 or role:
        model = _local_copy(recipe, model, data.vocab_size)  # evaluate and export outside it
    summary = {"batches_trained": step, "replicas": strategy.num_replicas_in_sync,
               "mixed_precision": cfg.mixed_precision, "batch_slices": slices,
               "op_threads": op_threads}
    _finish(cfg, recipe, model, model_config, data, step, summary, bool(init), started)
    lock.release()


def _open_output(cfg, recipe, typed):
    """(this process's multi-worker role, "" alone; the `OutputLock` on
    `--output_dir`), the run's settings recorded or checked by the chief."""
    role = _worker_role() if cfg.strategy == "multi_worker" else ""
    if role and not is_tfrecords(cfg.input):
        raise SystemExit("--strategy=multi_worker reads TFRecords (--input=<folder>): write them "
                         f"once first with `python -m tf_records.{recipe.records_writer}`.")
    try:
        lock = OutputLock(cfg.output_dir, role)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    if role in ("", "chief-0", "worker-0"):
        check_run_config(cfg, os.path.join(cfg.output_dir, RUN_CONFIG), typed)
    return role, lock


def _start_keras(cfg, recipe):
    """(strategy, batch slices, op threads set or None): Keras' precision
    policy, BERT's batches in slices side by side on a CPU (`BatchSlices`),
    the op threads only where this process has not started TensorFlow yet."""
    freeze_imports()
    # Both ways: a process that runs several pretrainings (the Table 5
    # driver's workers) must not keep an earlier run's policy.
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if cfg.mixed_precision else "float32")
    slices = cpu_batch_slices(cfg.batch_slices) if recipe.batch_slices and cpu_only(
        cfg.strategy, cfg.tpu) else 1
    op_threads = cpu_op_threads(slices) if slices > 1 else None
    return make_strategy(cfg.strategy, cfg.tpu), slices, op_threads


def _prepare_data(cfg, recipe, init, strategy, manifests=None):
    """-> `_Data`: the records written (or given) and checked shard by shard,
    a bad shard named now, not mid-run by a `DataLossError`. `manifests`:
    {path: manifest} already read (`Resolved.manifests`); the records
    written here are read once, after writing."""
    manifests = manifests or {}
    train_source, heldout_source, vocab_file = prepare_data(recipe, cfg)
    train_manifest = verify_records(train_source, manifests.get(train_source))
    verify_records(heldout_source, manifests.get(heldout_source))
    data = _Data(train_source, heldout_source, vocab_file,
                 recipe.vocab_size(train_source, vocab_file, train_manifest), train_manifest)
    if not cfg.phase2_steps:
        return data
    # Phase 2: the same text, written again at phase 2's length.
    if strategy is not tf.distribute.get_strategy():
        raise SystemExit("--phase2_steps runs on one replica (the default strategy); "
                         "on several, run phase 2 as continued pretraining from phase "
                         "1's export (see docs/pretraining.md).")
    phase2_cfg = dataclasses.replace(
        cfg, max_seq_length=cfg.phase2_max_seq_length,
        max_predictions_per_seq=cfg.phase2_max_predictions_per_seq, vocab_file=vocab_file)
    phase2_recipe = make_recipe(phase2_cfg, init, records_prefix="phase2_")
    phase2_train, phase2_heldout, _ = prepare_data(phase2_recipe, phase2_cfg)
    for source in (phase2_train, phase2_heldout):
        verify_records(source)
    return dataclasses.replace(data, phase2=(phase2_recipe, phase2_train, phase2_heldout))


def _finish(cfg, recipe, model, model_config, data, step, summary, continued, started):
    """Held-out scores, curves and the export; `summary.json` written last."""
    summary.update(recipe.evaluate(model, model_config, data.heldout, data.train,
                                   data.vocab_file, heldout_text(cfg)))
    start_path = os.path.join(cfg.output_dir, START_EVALUATION)
    if continued and os.path.exists(start_path):
        with open(start_path, encoding="utf-8") as f:
            summary["heldout_at_start"] = json.load(f)
    log_dir = os.path.join(cfg.output_dir, "tensorboard")
    write_heldout_scalars(log_dir, step, summary)  # the held-out points of the curves
    export_dir = os.path.join(cfg.output_dir, "export")
    if not cfg.saved_model:  # not one left from an earlier export of this run
        shutil.rmtree(os.path.join(export_dir, "saved_model"), ignore_errors=True)
    with Timed(f"Exporting to {export_dir}"):
        exported = recipe.export(model, data.vocab_file, export_dir)
        if cfg.export_formats != "saved_model":
            served = _float32_copy(cfg, recipe, model, data.vocab_size)
            runtimes = runtime_exports(recipe, served, data.vocab_file, export_dir,
                                       cfg.export_formats, cfg.model, cfg.max_seq_length)
            exported = f"{exported}; {runtimes}" if runtimes else exported
    summary["export"] = os.path.abspath(export_dir)
    curves, _ = write_training_curves(log_dir)
    say(f"Training curves -> {curves}")
    summary["wall_seconds"] = round(time.time() - started, 1)
    write_json(os.path.join(cfg.output_dir, "summary.json"), summary)
    say(f"Exported {exported}. Done in {time.time() - started:.0f} s.")


def _worker_role():
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return f"{task.get('type', 'worker')}-{task.get('index', 0)}"


def _float32_copy(cfg, recipe, model, vocab_size):
    """`model`, or under --mixed_precision its weights in a float32 model:
    the runtimes serve float32 (tf2onnx mixes bfloat16 and float16 types)."""
    if not cfg.mixed_precision:
        return model
    keras.mixed_precision.set_global_policy("float32")
    try:
        return _local_copy(make_recipe(dataclasses.replace(cfg, mixed_precision=False),
                                       recipe.init), model, vocab_size)
    finally:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")


def _local_copy(recipe, model, vocab_size):
    """The trained weights in a model built outside any strategy."""
    with tf.distribute.get_strategy().scope():
        local, _ = recipe.build_model(vocab_size)
    local.set_weights(model.get_weights())
    local.compile(optimizer=model.optimizer.__class__.from_config(model.optimizer.get_config()))
    return local
