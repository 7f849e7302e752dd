"""Pretrain BERT (or a comparison system) end to end: text -> vocabulary ->
TFRecords -> `model.fit` under a strategy -> held-out evaluation -> export.

    python -m training.pretrain          # the main job: a tiny BERT on the default corpus
    python -m training.pretrain --model=gpt                  # a tiny OpenAI GPT, same corpus
    python -m training.pretrain --model=elmo                 # a tiny ELMo biLM, same corpus
    python -m training.pretrain --model=xlnet                # a tiny XLNet, same corpus
    python -m training.pretrain --ablation=ltr               # BERT's LTR & No NSP ablation
    python -m training.pretrain --input='corpus/*.txt' --preset=small --output_dir=runs/small
    python -m training.pretrain --input=records/ --vocab_file=vocab.txt --strategy=tpu --tpu=local

Run the same command again after a crash and it resumes at the last
checkpoint: same step, learning rate, optimizer state and data position.
Every flag is a field of `PretrainConfig` (`training/pretraining/config.py`,
with the flags' help); its default is the flag's. A model family adds its
recipe (data, model, loss, evaluation, export: `training/bert/recipe.py`,
`training/gpt/recipe.py`, `training/elmo/recipe.py`,
`training/xlnet/recipe.py`); the trainer (`training/pretraining/loop.py`) is
one for all. Where a family trains differently by default (ELMo: bilm-tf's
Adagrad, 20-token windows; XLNet: 64-token records, a smaller vocabulary),
`MODEL_DEFAULTS` replaces the flags still at BERT's defaults that were not typed.
"""

import dataclasses
import json
import os
import shutil
import sys
import time

from absl import logging

from tf_records.command_line import console
from training.pretraining.common import is_tfrecords
from training.pretraining.common import say
from training.pretraining.common import write_json
from training.pretraining.config import DEFAULT_TRAIN_STEPS
from training.pretraining.config import HELP
from training.pretraining.config import MODEL_DEFAULTS
from training.pretraining.config import PretrainConfig
from training.pretraining.config import with_model_defaults
from training.pretraining.loop import train
from training.pretraining.recipe import make_recipe
from training.run.config_flags import define_flags
from training.run.config_flags import from_flags

# Changing these between a run and its resume would silently change the run.
_RUN_KEYS = tuple(f.name for f in dataclasses.fields(PretrainConfig) if f.name not in (
    "output_dir", "strategy", "tpu", "log_every_steps", "fill_mask_examples", "saved_model",
    "data_workers", "steps_per_execution"))


def _trained(output_dir):
    """Whether the run in `output_dir` has saved a training checkpoint."""
    folder = os.path.join(output_dir, "checkpoints")
    return os.path.isdir(folder) and any(name.startswith("ckpt") for name in os.listdir(folder))


def _check_run_config(cfg, path, typed=None):
    """Refuses to resume a run with different settings; records them on the
    first start, with `typed` (dict: the flags given and their values). A run that
    never saved a checkpoint (refused or stopped before its first) is not
    resumed: its settings are replaced, said in a line, so that the
    corrected command can run where the refused one stood."""
    mine = {k: getattr(cfg, k) for k in _RUN_KEYS}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        changed = [key for key in _RUN_KEYS if key in saved and saved[key] != mine[key]]
        if changed and _trained(cfg.output_dir):
            key = changed[0]
            raise SystemExit(
                f"{cfg.output_dir} holds a run with --{key}={saved[key]!r}; this command says "
                f"{mine[key]!r}. Use the same settings to resume, or another --output_dir.")
        if not changed:
            return
        say(f"{cfg.output_dir} held the settings of a run that saved no checkpoint "
            f"(--{changed[0]}={saved[changed[0]]!r} there); this run's replace them.")
    if typed is not None:  # what was typed, beside what the run uses
        mine["typed"] = dict(sorted(typed.items()))
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(mine, f, indent=2)
    os.replace(tmp, path)


def _unset_mixed_precision(cfg):
    """`--mixed_precision` not given: the choice of the run `--output_dir`
    holds (a resume trains on as it started), else bfloat16 where it pays
    (`training.run.distribution.auto_mixed_precision`)."""
    path = os.path.join(cfg.output_dir, "run_config.json")
    if os.path.exists(path) and _trained(cfg.output_dir):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f).get("mixed_precision")
        if saved is not None:
            return saved
    from training.pretraining.recipe import pretrain_recipe
    from training.run.distribution import auto_mixed_precision

    return auto_mixed_precision(pretrain_recipe(cfg.model).bfloat16_pays, cfg.strategy, cfg.tpu)


def main(argv):
    del argv
    from absl import flags

    explicit = {f.name for f in dataclasses.fields(PretrainConfig) if flags.FLAGS[f.name].present}
    run(from_flags(PretrainConfig), explicit)


def run(cfg, explicit=None):
    """Pretrains as `cfg` says: data, training, evaluation, export.

    Validate first, act second: the flags, the paths they name and the
    records' agreement with them are checked (`training.pretraining.checks`)
    before the output folder is made, locked or given its
    `run_config.json`. `explicit`: the flags given on the command line (a
    flag not given takes the records' value); None: those whose value
    differs from the default.
    """
    from training.pretraining.checks import agree_with_records
    from training.pretraining.checks import check_flags
    from training.pretraining.checks import verify_records

    logging.set_verbosity(logging.WARNING)  # TensorFlow's INFO lines drown the progress
    started = time.time()
    typed = {k: getattr(cfg, k) for k in sorted(explicit)} if explicit is not None else None
    if not cfg.num_train_steps:
        cfg = dataclasses.replace(cfg, num_train_steps=DEFAULT_TRAIN_STEPS.get(cfg.model, 3000))
    family = with_model_defaults(cfg, explicit)
    for key in sorted(k for k in MODEL_DEFAULTS.get(cfg.model, {})
                      if getattr(family, k) != getattr(cfg, k)):
        say(f"--{key}: {getattr(family, key)!r}, --model={cfg.model}'s default (the flag's "
            f"is {getattr(cfg, key)!r}; type it to choose).")
    cfg = family
    explicit = set(explicit) if explicit is not None else {
        f.name for f in dataclasses.fields(cfg) if getattr(cfg, f.name) != getattr(
            with_model_defaults(PretrainConfig(model=cfg.model)), f.name)}
    typed_phase2 = sorted(explicit & {"phase2_max_seq_length", "phase2_max_predictions_per_seq"})
    if typed_phase2 and not cfg.phase2_steps:
        raise SystemExit(f"--{typed_phase2[0]} is a setting of phase 2: give --phase2_steps too.")
    init = None
    if cfg.init_checkpoint:
        from training.pretraining.continued import with_init_checkpoint

        cfg, init = with_init_checkpoint(cfg, explicit)
        explicit |= {"vocab_file", "do_lower_case"}  # the checkpoint's: records must agree
    check_flags(cfg)
    cfg = agree_with_records(cfg, with_model_defaults(PretrainConfig(model=cfg.model)), explicit)
    from training.pretraining.checks import check_bare_records

    for source in (cfg.input, cfg.heldout_input):  # a glob's records: the flags' lengths
        if is_tfrecords(source):
            check_bare_records(cfg, source)
    if cfg.mixed_precision is None:
        cfg = dataclasses.replace(cfg, mixed_precision=_unset_mixed_precision(cfg))
    recipe = make_recipe(cfg, init)  # checks --model, --ablation, the preset or config file
    from training.run.checkpointing import OutputLock

    role = _worker_role() if cfg.strategy == "multi_worker" else ""
    if role and not is_tfrecords(cfg.input):
        raise SystemExit("--strategy=multi_worker reads TFRecords (--input=<folder>): write them "
                         f"once first with `python -m tf_records.{recipe.records_writer}`.")
    try:
        lock = OutputLock(cfg.output_dir, role)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    chief = role in ("", "chief-0", "worker-0")
    if chief:
        _check_run_config(cfg, os.path.join(cfg.output_dir, "run_config.json"), typed)
    import keras

    from tf_records.command_line.keras_extras import freeze_imports

    freeze_imports()
    # Both ways: a process that runs several pretrainings (the Table 5
    # driver's workers) must not keep an earlier run's policy.
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if cfg.mixed_precision else "float32")
    from training.run.distribution import cpu_batch_slices
    from training.run.distribution import cpu_only
    from training.run.distribution import cpu_op_threads
    from training.run.distribution import make_strategy

    # BERT's batches in slices side by side on a CPU (`BatchSlices`); the
    # op threads only where this process has not started TensorFlow yet.
    slices = cpu_batch_slices(cfg.batch_slices) if recipe.batch_slices and cpu_only(
        cfg.strategy, cfg.tpu) else 1
    op_threads = cpu_op_threads(slices) if slices > 1 else None
    strategy = make_strategy(cfg.strategy, cfg.tpu)
    train_source, heldout_source, vocab_file = recipe.prepare_data()
    for source in (train_source, heldout_source):
        verify_records(source)  # a bad shard named now, not mid-run by a DataLossError
    vocab_size = recipe.vocab_size(train_source, vocab_file)
    phase2 = None
    if cfg.phase2_steps:  # the same text, written again at phase 2's length
        if strategy is not tf_default_strategy():
            raise SystemExit("--phase2_steps runs on one replica (the default strategy); "
                             "on several, run phase 2 as continued pretraining from phase "
                             "1's export (see docs/pretraining.md).")
        phase2_recipe = type(recipe)(dataclasses.replace(
            cfg, max_seq_length=cfg.phase2_max_seq_length,
            max_predictions_per_seq=cfg.phase2_max_predictions_per_seq, vocab_file=vocab_file),
            init, records_prefix="phase2_")
        phase2_train, phase2_heldout, _ = phase2_recipe.prepare_data()
        for source in (phase2_train, phase2_heldout):
            verify_records(source)
        phase2 = (phase2_recipe, phase2_train)
    at_start = None
    # The checkpoint's held-out loss, to beat (where the recipe evaluates it).
    if init and heldout_source and chief and recipe.evaluates_at_start:
        from training.pretraining.continued import start_evaluation

        def at_start(model, model_config):
            start_evaluation(model, recipe.dataset(heldout_source, cfg.global_batch_size,
                                                   model_config, repeat=False, shuffle=False),
                             cfg.output_dir)

    model, model_config, step, bad_loss = train(cfg, recipe, strategy, train_source, vocab_size,
                                                 slices, at_start, phase2)
    if phase2:  # held-out scores at the length the model ends on
        recipe, heldout_source = phase2[0], phase2_heldout
    if bad_loss:
        raise SystemExit(f"The loss became {bad_loss[1]} by batch {bad_loss[0]}: stopped; the last "
                         f"good checkpoint is kept in {os.path.join(cfg.output_dir, 'checkpoints')}.")
    if not chief:
        say(f"Worker {role} done: {step} batches.")
        return
    if strategy.num_replicas_in_sync > 1 or role:
        model = _local_copy(recipe, model, vocab_size)  # evaluate and export outside the strategy
    summary = {"batches_trained": step, "replicas": strategy.num_replicas_in_sync,
               "mixed_precision": cfg.mixed_precision, "batch_slices": slices,
               "op_threads": op_threads}
    summary.update(recipe.evaluate(model, model_config, heldout_source, train_source, vocab_file))
    if init:
        from training.pretraining.continued import START_EVALUATION

        start_path = os.path.join(cfg.output_dir, START_EVALUATION)
        if os.path.exists(start_path):
            with open(start_path, encoding="utf-8") as f:
                summary["heldout_at_start"] = json.load(f)
    from tf_records.command_line.progress import Timed
    from training.run.curves import write_heldout_scalars
    from training.run.curves import write_training_curves

    log_dir = os.path.join(cfg.output_dir, "tensorboard")
    write_heldout_scalars(log_dir, step, summary)  # the held-out points of the curves
    export_dir = os.path.join(cfg.output_dir, "export")
    if not cfg.saved_model:  # not one left from an earlier export of this run
        shutil.rmtree(os.path.join(export_dir, "saved_model"), ignore_errors=True)
    with Timed(f"Exporting to {export_dir}"):
        exported = recipe.export(model, vocab_file, export_dir)
    summary["export"] = os.path.abspath(export_dir)
    curves, _ = write_training_curves(log_dir)
    say(f"Training curves -> {curves}")
    summary["wall_seconds"] = round(time.time() - started, 1)
    write_json(os.path.join(cfg.output_dir, "summary.json"), summary)
    say(f"Exported {exported}. Done in {time.time() - started:.0f} s.")
    lock.release()


def tf_default_strategy():
    import tensorflow as tf

    return tf.distribute.get_strategy()


def _worker_role():
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return f"{task.get('type', 'worker')}-{task.get('index', 0)}"


def _local_copy(recipe, model, vocab_size):
    """The trained weights in a model built outside any strategy."""
    import tensorflow as tf

    with tf.distribute.get_strategy().scope():
        local, _ = recipe.build_model(vocab_size)
    local.set_weights(model.get_weights())
    local.compile(optimizer=model.optimizer.__class__.from_config(model.optimizer.get_config()))
    return local


def cli():
    """`kbi-pretrain` and `python -m training.pretrain`: flags, then `main` on a quiet console."""
    define_flags(PretrainConfig, HELP)
    try:
        console.run(main, __name__)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    cli()
