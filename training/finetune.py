"""Fine-tune BERT on a GLUE task, SQuAD, CoNLL NER, SWAG or your own CSV with `model.fit`.

    python -m training.finetune --task=glue/mrpc --data_dir=glue_data/MRPC
    python -m training.finetune --task=squad --data_dir=squad_v1.1 --init_checkpoint=bert_dir
    python -m training.finetune --task=text_classification --train_file=news_train.csv \
        --dev_file=news_dev.csv --text_column=title --text_b_column=body --label_column=label

Reads the task's files in their usual formats, starts from a pretrained
checkpoint (Hugging Face folder, original Google checkpoint, or one of our
`.keras` files; by default the all-MiniLM-L6-v2 weights installed with the
tests), fine-tunes with the paper's settings (AdamW, warmup 10% then linear
decay, batch 32, 3 epochs), scores the dev set with the task's official
metric after every epoch, writes predictions in the official formats and
exports the model for serving (ids in, and text in).

    python -m training.finetune --model=gpt --task=glue/rte --data_dir=glue_data/RTE \
        --init_checkpoint=openai-gpt

`--model=gpt` fine-tunes OpenAI GPT instead (Radford et al. 2018, Sec. 3.2-3.3,
the original `train.py` defaults): the BPE vocabulary gets `_start_`,
`_delimiter_`, `_classify_`, inputs take GPT's transformations, the loss adds
`lm_coef` (0.5) times the LM loss of the inputs, and Adam runs at 6.25e-5
with epsilon 1e-8 and 0.2% warmup. It needs `--init_checkpoint` (a Hugging
Face openai-gpt folder or one of our `.keras` files) or `--preset=gpt_tiny`.

    python -m training.finetune --model=elmo --task=ner --data_dir=conll2003 \
        --init_checkpoint=elmo_dir

`--model=elmo` uses ELMo as features, as the ELMo paper and the BERT paper's
comparisons do (Peters et al. 2018, Sec. 3.3; BERT Sec. 5.3): the biLM from
`--init_checkpoint` (a folder with bilm-tf's `options.json` and weight file,
`weights.hdf5` as bilm-tf's README dumps it or `lm_weights.hdf5` as
`training.pretrain --model=elmo` exports it, or the weight file itself)
stays frozen; a scalar mix of its layers and a
2-layer BiLSTM task network (`--elmo_lstm_units`) train, with Adam at 1e-3
(no weight decay, no warmup, linear decay as the others). Inputs are whole
words (CoNLL's, or BERT's basic tokenization of GLUE texts without
lowercasing) as character ids; `--max_seq_length` counts words with `<S>`
and `</S>`. GLUE and NER only. `--preset=elmo_tiny` starts from a random
biLM instead (smoke tests only: frozen random features).

    python -m training.finetune --model=xlnet --task=glue/mrpc --data_dir=glue_data/MRPC \
        --init_checkpoint=xlnet-base-cased

`--model=xlnet` fine-tunes XLNet (Yang et al. 2019) from a Hugging Face
xlnet folder (or one of our `.keras` files) with its `spiece.model`, or
`--preset=xlnet_debug|xlnet_base|xlnet_large` with `--vocab_file`: inputs in
XLNet's layout (`A <sep> B <sep> <cls>`, `<cls>` last, left padding,
segments A=0 B=1 CLS=2), the classifier pooling the last position, SQuAD
as `paragraph <sep> question <sep> <cls>`; the original's settings (GLUE lr
5e-5, SQuAD and SWAG 2e-5, Adam epsilon 1e-6, no weight decay, 10% warmup);
cased unless `--do_lower_case` is given.

This file holds the run; the flags and `resolve` are in
`training/finetuning/config.py`. What a family does its own way (defaults,
checkpoint lookup, tokenizer, tasks, backbone, batches, export) is its
recipe, picked by `--model` in `training/finetuning/recipe.py`:
`training/{bert,gpt,elmo,xlnet}/finetune.py`.
"""

import dataclasses
import json
import math
import os
import sys
import time
import warnings

from absl import flags
from absl import logging

from tf_records.command_line import console
from training.finetuning.config import HELP
from training.finetuning.config import FinetuneConfig
from training.finetuning.config import resolve
from training.finetuning.recipe import finetune_recipe
from training.run.config_flags import define_flags
from training.run.config_flags import from_flags


def say(message):
    print(message, flush=True)


def main(argv):
    del argv
    cfg = from_flags(FinetuneConfig)
    if finetune_recipe(cfg.model).cased and not flags.FLAGS["do_lower_case"].present:
        cfg = dataclasses.replace(cfg, do_lower_case=False)
    run(cfg)


def run(cfg):
    """Fine-tunes, scores, writes predictions and exports; returns the summary.

    Validate first, act second: the flags, the checkpoint's and vocabulary's
    paths and every data file (each split read, encoded and found non-empty)
    are checked before the output folder is made or locked, so a run stopped
    there leaves the folder as it found it.
    """
    logging.set_verbosity(logging.WARNING)
    # Span QA, tagging and features do not read the pooler; Keras warns that
    # it gets no gradient, as the original left it untrained for them.
    warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables \['pooler")
    started = time.time()
    from training.finetuning.checks import check_flags
    from training.finetuning.checks import check_paths
    from training.finetuning.checks import load_data

    check_flags(cfg)
    cfg = resolve(cfg)
    check_paths(cfg)
    import keras  # here, not at the top: the command's console is set up before TensorFlow loads

    from tf_records.command_line.keras_extras import freeze_imports

    freeze_imports()

    keras.utils.set_random_seed(cfg.seed)
    recipe = finetune_recipe(cfg.model)
    tokenizer, task, data = load_data(cfg, recipe)  # reads; writes nothing
    from training.run.checkpointing import OutputLock

    try:
        lock = OutputLock(cfg.output_dir)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    try:
        return _fine_tune(cfg, recipe, started, tokenizer, task, data)
    finally:
        lock.release()


def _fine_tune(cfg, recipe, started, tokenizer, task, data):
    """The run itself, top to bottom: data -> model -> fit -> predictions -> export."""
    import keras

    if cfg.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    from training.finetuning.checks import check_positions
    from training.finetuning.loop import EvaluateEachEpoch
    from training.finetuning.loop import epoch_seed
    from training.finetuning.loop import fit_resumable
    from training.finetuning.loop import shuffled_batches
    from training.run.curves import write_training_curves
    from training.run.distribution import make_strategy
    from training.run.distribution import replicas_batch
    from training.run.optimization import OptimizerConfig
    from training.run.optimization import create_optimizer
    from training.run.train_log import TrainingLog

    x, y, sample_weight = data
    rows = len(x["input_word_ids"])
    steps_per_epoch = math.ceil(rows / cfg.batch_size)
    total_steps = steps_per_epoch * cfg.epochs
    warmup = int(total_steps * cfg.warmup_proportion)
    strategy = make_strategy(cfg.strategy, cfg.tpu)
    replicas_batch(strategy, cfg.batch_size)  # checks divisibility
    say(f"Task {cfg.task} ({cfg.model}{recipe.describe(cfg)}): "
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
        try:
            backbone = recipe.build_backbone(cfg, getattr(tokenizer, "vocab_size", None))
        except ValueError as e:  # a checkpoint that is not what its files claim
            raise SystemExit(f"--init_checkpoint={cfg.init_checkpoint}: {e}") from None
        # Before run_config.json is written: a refused run leaves nothing to resume.
        check_positions(cfg, backbone)
        recipe.check_backbone(cfg, tokenizer, backbone)
        model = task.build_model(backbone)
        model.compile(optimizer=create_optimizer(optimizer_config, total_steps))
    # Batches of similar length cut to their longest row; TPUs want static shapes.
    grouped = cfg.length_grouping > 1 and "input_mask" in x and cfg.strategy != "tpu"

    def epoch_batches(epoch):
        """The epoch's batches, the same in every run (a resumed one skips those trained)."""
        seed = epoch_seed(cfg.seed, epoch)
        batches = recipe.grouped_batches(x, y, sample_weight, cfg.batch_size,
                                         cfg.length_grouping, seed) if grouped else (
            shuffled_batches(x, y, sample_weight, cfg.batch_size, seed))
        return recipe.epoch_batches(task, model, batches)

    log_dir = os.path.join(cfg.output_dir, "tensorboard")
    log = TrainingLog(total_steps, 0, steps_per_epoch, cfg.log_every_steps, cfg.batch_size,
                      cfg.batch_size * cfg.max_seq_length, log_dir=log_dir, rate_label="ex/s")
    history = fit_resumable(model, epoch_batches, cfg.epochs, steps_per_epoch, cfg.output_dir,
                            cfg.checkpoint_every_steps, [EvaluateEachEpoch(task, log_dir)], log,
                            strategy, dataclasses.asdict(cfg))
    curves, _ = write_training_curves(log_dir)
    say(f"Training curves -> {curves}")
    os.makedirs(cfg.output_dir, exist_ok=True)
    written = task.write_predictions(model, cfg.output_dir)
    for path in written:
        say(f"Predictions -> {path}")
    export_dir = os.path.join(cfg.output_dir, "export")
    # text_classification's label strings, sorted: the exports answer with them.
    labels = list(getattr(task, "class_labels", ())) or None
    export_started = time.perf_counter()
    if not cfg.export:
        say("--noexport: no SavedModel or model.keras written.")
    else:
        say(f"Exporting to {export_dir} ...")
        recipe.export(model, os.path.join(export_dir, "saved_model"), cfg, labels)
        model.save(os.path.join(export_dir, "model.keras"))
        if labels:  # model.keras holds ids; this maps them back to the label strings
            with open(os.path.join(export_dir, "labels.json.tmp"), "w", encoding="utf-8") as f:
                json.dump(labels, f, ensure_ascii=False)
            os.replace(os.path.join(export_dir, "labels.json.tmp"),
                       os.path.join(export_dir, "labels.json"))
        say(f"Exporting to {export_dir}: done in {time.perf_counter() - export_started:.1f} s")
    summary = {"config": dataclasses.asdict(cfg), "train_rows": rows,
               "history": history, "predictions": written,
               **({"labels": labels} if labels else {}),
               "export": os.path.abspath(export_dir) if cfg.export else None,
               "wall_seconds": round(time.time() - started, 1)}
    path = os.path.join(cfg.output_dir, "summary.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, default=float)
    os.replace(path + ".tmp", path)
    saved_model = "" if not cfg.export else (
        f"Exported SavedModel -> {os.path.join(export_dir, 'saved_model')}; ")
    keras_model = f"Keras model -> {os.path.join(export_dir, 'model.keras')}; " if (
        cfg.export) else ""
    say(f"{saved_model}{keras_model}summary -> {path}. "
        f"Done in {time.time() - started:.0f} s.")
    return summary


def cli():
    """`kbi-finetune` and `python -m training.finetune`: flags, then `main` on a quiet console."""
    define_flags(FinetuneConfig, HELP)
    try:
        console.run(main, __name__)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    cli()
