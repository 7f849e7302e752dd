"""Pretrain BERT end to end: text -> vocabulary -> TFRecords -> `model.fit`
under a strategy -> held-out evaluation -> SavedModel export.

    python -m training.pretrain          # the main job: a tiny BERT on the default corpus
    python -m training.pretrain --input='corpus/*.txt' --preset=small --output_dir=runs/small
    python -m training.pretrain --input=records/ --vocab_file=vocab.txt --strategy=tpu --tpu=local

Run the same command again after a crash and it resumes at the last
checkpoint: same step, learning rate, optimizer state and data position.
Every flag is a field of `PretrainConfig`; its default is the flag's.
"""

import dataclasses
import glob
import json
import os
import sys
import time

from absl import app
from absl import logging

from training.config_flags import define_flags
from training.config_flags import from_flags


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Settings of a pretraining run. The defaults are the main job's."""

    input: str = ""
    heldout_input: str = ""
    output_dir: str = "pretrain_output"
    vocab_file: str = ""
    vocab_size: int = 8000
    do_lower_case: bool = True
    preset: str = "tiny"
    config_file: str = ""
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    dupe_factor: int = 5
    do_whole_word_mask: bool = False
    global_batch_size: int = 32
    shuffle_buffer: int = 10_000
    num_train_steps: int = 3000
    checkpoint_every_steps: int = 500
    steps_per_execution: int = 1
    strategy: str = "auto"
    tpu: str = ""
    mixed_precision: bool = False
    jit_compile: bool = False
    optimizer: str = "adamw"
    learning_rate: float = 2e-3
    warmup_steps: int = 300
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    gradient_accumulation_steps: int = 1
    seed: int = 12345
    data_workers: int = 2
    log_every_steps: int = 100
    fill_mask_examples: int = 4


HELP = {
    "input": "Text files/globs (comma-separated; one sentence per line, blank line between "
             "documents) or a TFRecord folder/manifest.json/file pattern. Empty: the default "
             "corpus (Python standard-library docstrings + pydoc topics).",
    "heldout_input": "Held-out text or TFRecords for the final evaluation. Empty: the default "
                     "corpus's held-out documents, or none.",
    "output_dir": "Run folder: data, checkpoints, TensorBoard logs, export, summary.json.",
    "vocab_file": "vocab.txt. Empty with text input: learn one from the training text.",
    "vocab_size": "Size of a learned vocabulary.",
    "do_lower_case": "Lowercase and strip accents (uncased).",
    "preset": "Model size: tiny, mini, small, medium, base, large.",
    "config_file": "bert_config.json overriding --preset (vocab_size is taken from the data).",
    "max_seq_length": "Tokens per sequence.",
    "max_predictions_per_seq": "Masked positions per sequence.",
    "dupe_factor": "Passes over the text when writing TFRecords, each with new masks.",
    "do_whole_word_mask": "Mask whole words.",
    "global_batch_size": "Sequences per step over all replicas.",
    "shuffle_buffer": "Records in the shuffle buffer; 0 reads files and records in order.",
    "num_train_steps": "Optimizer updates.",
    "checkpoint_every_steps": "Checkpoint interval (rounded down to divide num_train_steps).",
    "steps_per_execution": "Steps per compiled call (TPUs like 100s).",
    "strategy": "auto, cpu, mirrored, multi_worker (TF_CONFIG) or tpu.",
    "tpu": "TPU name or address; 'local' on Colab / Cloud TPU VMs.",
    "mixed_precision": "mixed_bfloat16 (float32 variables, LayerNorm, softmax and logits).",
    "jit_compile": "Compile the train step with XLA (static shapes).",
    "optimizer": "adamw (the original) or lamb.",
    "learning_rate": "Peak learning rate (the original: 1e-4 for BERT-BASE's 1M steps).",
    "warmup_steps": "Linear warmup steps, then linear decay to 0 at num_train_steps.",
    "weight_decay": "Decoupled weight decay (not on LayerNorm or biases).",
    "clip_norm": "Global-norm gradient clipping (0: off). Per replica, then summed, as the "
                 "original on TPU cores.",
    "gradient_accumulation_steps": "Batches per optimizer update.",
    "seed": "Seed for data writing, data order and initialization.",
    "data_workers": "Processes writing TFRecords.",
    "log_every_steps": "Steps between progress lines / TensorBoard points.",
    "fill_mask_examples": "Held-out sentences shown with [MASK] predictions at the end.",
}

# Changing these between a run and its resume would silently change the run.
_RUN_KEYS = tuple(f.name for f in dataclasses.fields(PretrainConfig) if f.name not in (
    "output_dir", "strategy", "tpu", "log_every_steps", "fill_mask_examples", "data_workers",
    "steps_per_execution"))


def say(message):
    print(message, flush=True)


def _is_tfrecords(spec):
    if not spec:
        return False
    if os.path.isdir(spec) or spec.endswith(".json"):
        return True
    return any(".tfrecord" in f or f.endswith(".rec") for f in glob.glob(spec.split(",")[0]))


def _text_files(spec):
    files = sorted({f for pattern in spec.split(",") if pattern for f in glob.glob(pattern)})
    if not files:
        raise SystemExit(f"No files match --input={spec!r}.")
    return files


def _check_run_config(cfg, path):
    """Refuses to resume a run with different settings; records them on the first start."""
    mine = {k: getattr(cfg, k) for k in _RUN_KEYS}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        for key in _RUN_KEYS:
            if key in saved and saved[key] != mine[key]:
                raise SystemExit(
                    f"{cfg.output_dir} holds a run with --{key}={saved[key]!r}; this command says "
                    f"{mine[key]!r}. Use the same settings to resume, or another --output_dir.")
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(mine, f, indent=2)
    os.replace(tmp, path)


def prepare_data(cfg):
    """-> (train records source, held-out source or None, vocab file or None)."""
    if _is_tfrecords(cfg.input):
        heldout = cfg.heldout_input or None
        if heldout and not _is_tfrecords(heldout):
            raise SystemExit("--heldout_input must be TFRecords when --input is.")
        return cfg.input, heldout, cfg.vocab_file or None
    from tf_records.instances import InstanceConfig
    from tf_records.writer import WriterConfig
    from tf_records.writer import write_pretraining_data

    data_dir = os.path.join(cfg.output_dir, "data")
    if cfg.input:
        train_files = _text_files(cfg.input)
        heldout_files = _text_files(cfg.heldout_input) if cfg.heldout_input else None
    else:
        from training.default_corpus import write_default_corpus

        corpus_dir = os.path.join(data_dir, "corpus")
        paths = {"train": os.path.join(corpus_dir, "train.txt"),
                 "heldout": os.path.join(corpus_dir, "heldout.txt")}
        if not all(os.path.exists(p) for p in paths.values()):
            start = time.time()
            paths, counts = write_default_corpus(corpus_dir)
            size = os.path.getsize(paths["train"]) / 1e6
            say(f"Default corpus: {counts['train']} training documents ({size:.1f} MB), "
                f"{counts['heldout']} held out, from the standard library's docstrings and "
                f"pydoc topics ({time.time() - start:.0f} s) -> {corpus_dir}")
        train_files, heldout_files = [paths["train"]], [paths["heldout"]]
    vocab_file = cfg.vocab_file
    if not vocab_file:
        vocab_file = os.path.join(data_dir, "vocab.txt")
        if not os.path.exists(vocab_file):
            from keras_bert_impl.tokenizers.vocab_learner import learn_vocab
            from keras_bert_impl.tokenizers.vocab_learner import write_vocab
            from tf_records.writer import read_documents

            start = time.time()
            lines = (line for document in read_documents(train_files) for line in document)
            tokens = learn_vocab(lines, cfg.vocab_size, cfg.do_lower_case)
            write_vocab(tokens, vocab_file)
            say(f"Learned a {len(tokens)}-token WordPiece vocabulary ({time.time() - start:.0f} s)"
                f" -> {vocab_file}")
    instance_config = InstanceConfig(
        max_seq_length=cfg.max_seq_length, max_predictions_per_seq=cfg.max_predictions_per_seq,
        do_whole_word_mask=cfg.do_whole_word_mask)
    sources = {}
    for side, files, dupe in (("train", train_files, cfg.dupe_factor), ("heldout", heldout_files, 1)):
        if not files:
            continue
        folder = os.path.join(data_dir, f"{side}_records")
        sources[side] = folder
        if os.path.exists(os.path.join(folder, "manifest.json")):
            continue  # written by an earlier start of this run
        start = time.time()
        manifest = write_pretraining_data(
            files, vocab_file, folder, instance_config,
            WriterConfig(dupe_factor=dupe, random_seed=cfg.seed + (side == "heldout"),
                         do_lower_case=cfg.do_lower_case, num_workers=cfg.data_workers,
                         documents_per_block=500),
            progress=False)
        records = sum(s["records"] for s in manifest["shards"])
        say(f"Wrote {records} {side} instances in {len(manifest['shards'])} shards "
            f"({time.time() - start:.0f} s) -> {folder}")
    return sources["train"], sources.get("heldout"), vocab_file


def build_model(cfg, vocab_size):
    from keras_bert_impl import BertBackbone
    from keras_bert_impl import BertConfig
    from keras_bert_impl import BertPretrainer
    from keras_bert_impl import preset

    config = BertConfig.from_json_file(cfg.config_file) if cfg.config_file else preset(cfg.preset)
    config = dataclasses.replace(config, vocab_size=vocab_size)
    if cfg.max_seq_length > config.max_position_embeddings:
        raise SystemExit(f"--max_seq_length={cfg.max_seq_length} exceeds the model's "
                         f"max_position_embeddings={config.max_position_embeddings}.")
    dtype = "mixed_bfloat16" if cfg.mixed_precision else None
    return BertPretrainer(BertBackbone.from_bert_config(config, dtype=dtype)), config


def train(cfg, strategy, train_source, vocab_size):
    """Builds, restores and fits; returns (model, bert_config, step, nan)."""
    import keras
    import tensorflow as tf

    from tf_records.reader import pipeline_share
    from tf_records.reader import pretraining_dataset
    from tf_records.reader import read_manifest
    from tf_records.schema import RecordSchema
    from training.checkpointing import CheckpointEveryEpoch
    from training.checkpointing import TrainingCheckpoint
    from training.checkpointing import checkpoint_interval
    from training.distribution import replicas_batch
    from training.optimization import OptimizerConfig
    from training.optimization import create_optimizer
    from training.train_log import TrainingLog

    replicas_batch(strategy, cfg.global_batch_size)  # checks divisibility
    accumulation = cfg.gradient_accumulation_steps
    total_batches = cfg.num_train_steps * accumulation
    interval = checkpoint_interval(total_batches, cfg.checkpoint_every_steps * accumulation)
    if interval % cfg.steps_per_execution:
        raise SystemExit(f"--steps_per_execution={cfg.steps_per_execution} must divide the "
                         f"checkpoint interval ({interval} batches).")
    keras.utils.set_random_seed(cfg.seed)
    with strategy.scope():
        model, bert_config = build_model(cfg, vocab_size)
        optimizer = create_optimizer(OptimizerConfig(
            optimizer=cfg.optimizer, learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps,
            weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm,
            gradient_accumulation_steps=accumulation),
            cfg.num_train_steps)
        model.compile(optimizer=optimizer, steps_per_execution=cfg.steps_per_execution,
                      jit_compile=cfg.jit_compile)
        checkpoint = TrainingCheckpoint(model, os.path.join(cfg.output_dir, "checkpoints"),
                                        strategy=strategy)
        step = checkpoint.restore_latest()
    if step:
        say(f"Resuming at batch {step} of {total_batches} from {checkpoint.directory}")
    if step % interval:
        raise SystemExit(f"The last checkpoint is at batch {step}, not a multiple of the "
                         f"interval {interval}: was --checkpoint_every_steps changed?")
    if step >= total_batches:
        return model, bert_config, step, None

    def dataset_fn(context):
        replicas_per_pipeline = strategy.num_replicas_in_sync // context.num_input_pipelines
        sharded = context.num_input_pipelines > 1
        if sharded and (os.path.isdir(train_source) or train_source.endswith(".json")):
            files = [s["file"] for s in read_manifest(train_source)["shards"]]
            mine, _ = pipeline_share(files, None, context)
            say(f"Input pipeline {context.input_pipeline_id} of {context.num_input_pipelines} "
                f"reads {', '.join(mine)}")
        return pretraining_dataset(
            train_source, context.get_per_replica_batch_size(cfg.global_batch_size),
            schema=schema, input_context=context if sharded else None,
            shuffle_buffer=cfg.shuffle_buffer, seed=cfg.seed, model_config=bert_config,
            start_batch=step * replicas_per_pipeline)

    # Records without our manifest (e.g. from the original script): their
    # lengths are the flags'. With a manifest the reader takes its schema.
    schema = None if os.path.isdir(train_source) or train_source.endswith(".json") else (
        RecordSchema(cfg.max_seq_length, cfg.max_predictions_per_seq))
    if strategy is tf.distribute.get_strategy():  # the default: no distribution
        dataset = pretraining_dataset(train_source, cfg.global_batch_size, schema=schema,
                                      seed=cfg.seed, shuffle_buffer=cfg.shuffle_buffer,
                                      model_config=bert_config, start_batch=step)
    else:
        dataset = strategy.distribute_datasets_from_function(dataset_fn)
    saver = CheckpointEveryEpoch(checkpoint, interval)
    log = TrainingLog(
        total_batches, step, interval, cfg.log_every_steps, cfg.global_batch_size,
        cfg.global_batch_size * cfg.max_seq_length,
        log_dir=os.path.join(cfg.output_dir, "tensorboard") if checkpoint.is_chief else None)
    say(f"Training {cfg.preset if not cfg.config_file else cfg.config_file} BERT "
        f"({model.count_params():,} parameters) for {total_batches} batches of "
        f"{cfg.global_batch_size} on {strategy.num_replicas_in_sync} replica(s), "
        f"checkpoint every {interval}")
    model.fit(dataset, epochs=total_batches // interval, initial_epoch=step // interval,
              steps_per_epoch=interval, callbacks=[saver, log], verbose=0)
    return model, bert_config, saver.batches or step, saver.bad_loss


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)  # TensorFlow's INFO lines drown the progress
    cfg = from_flags(PretrainConfig)
    started = time.time()
    from training.checkpointing import OutputLock

    role = _worker_role() if cfg.strategy == "multi_worker" else ""
    try:
        lock = OutputLock(cfg.output_dir, role)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    if role and not _is_tfrecords(cfg.input):
        raise SystemExit("--strategy=multi_worker reads TFRecords (--input=<folder>): write them "
                         "once first with `python -m tf_records.create_pretraining_data`.")
    chief = role in ("", "chief-0", "worker-0")
    if chief:
        _check_run_config(cfg, os.path.join(cfg.output_dir, "run_config.json"))
    if cfg.mixed_precision:
        import keras

        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    from training.distribution import make_strategy

    strategy = make_strategy(cfg.strategy, cfg.tpu)
    train_source, heldout_source, vocab_file = prepare_data(cfg)
    vocab_size = _vocab_size(train_source, vocab_file)
    model, bert_config, step, bad_loss = train(cfg, strategy, train_source, vocab_size)
    if bad_loss:
        raise SystemExit(f"The loss became {bad_loss[1]} by batch {bad_loss[0]}: stopped; the last "
                         f"good checkpoint is kept in {os.path.join(cfg.output_dir, 'checkpoints')}.")
    if not chief:
        say(f"Worker {role} done: {step} batches.")
        return
    if strategy.num_replicas_in_sync > 1 or role:
        model = _local_copy(cfg, model, vocab_size)  # evaluate and export outside the strategy
    summary = {"batches_trained": step, "replicas": strategy.num_replicas_in_sync}
    from training.evaluation import evaluate
    from training.evaluation import fill_mask_examples

    if heldout_source:
        results = evaluate(model, heldout_source, train_source, cfg.global_batch_size, bert_config)
        summary.update(results)
        say(f"Held-out masked-LM accuracy {results['masked_lm_accuracy']:.4f} vs "
            f"{results['baseline_masked_lm_accuracy']:.4f} for always guessing the most "
            f"frequent token; next-sentence accuracy {results['next_sentence_accuracy']:.4f} "
            f"({results['heldout_masked_tokens']} masked tokens)")
    if vocab_file and cfg.fill_mask_examples:
        text = _heldout_text(cfg)
        if text:
            for sentence, truth, guesses in fill_mask_examples(
                    model, vocab_file, cfg, text, cfg.fill_mask_examples):
                say(f"  {sentence}\n    [MASK] = {truth!r}; model guesses {guesses}")
    export_dir = os.path.join(cfg.output_dir, "export")
    from keras_bert_impl.serving import export_saved_model

    export_saved_model(model, os.path.join(export_dir, "saved_model"), vocab_file,
                       cfg.do_lower_case, cfg.max_seq_length)
    model.save(os.path.join(export_dir, "pretrainer.keras"))
    summary["export"] = os.path.abspath(export_dir)
    summary["wall_seconds"] = round(time.time() - started, 1)
    _write_json(os.path.join(cfg.output_dir, "summary.json"), summary)
    signatures = "serving_default, serving_text, serving_text_pair" if vocab_file else "serving_default"
    say(f"Exported SavedModel (signatures {signatures}) -> "
        f"{os.path.join(export_dir, 'saved_model')}; Keras model -> "
        f"{os.path.join(export_dir, 'pretrainer.keras')}. Done in {time.time() - started:.0f} s.")
    lock.release()


def _worker_role():
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return f"{task.get('type', 'worker')}-{task.get('index', 0)}"


def _local_copy(cfg, model, vocab_size):
    """The trained weights in a model built outside any strategy."""
    import tensorflow as tf

    with tf.distribute.get_strategy().scope():
        local, _ = build_model(cfg, vocab_size)
    local.set_weights(model.get_weights())
    local.compile(optimizer=model.optimizer.__class__.from_config(model.optimizer.get_config()))
    return local


def _heldout_text(cfg):
    if cfg.heldout_input and not _is_tfrecords(cfg.heldout_input):
        return _text_files(cfg.heldout_input)
    if not cfg.input:
        return [os.path.join(cfg.output_dir, "data", "corpus", "heldout.txt")]
    return None


def _vocab_size(train_source, vocab_file):
    if os.path.isdir(train_source) or train_source.endswith(".json"):
        from tf_records.reader import read_manifest

        return read_manifest(train_source)["vocab_size"]
    if not vocab_file:
        raise SystemExit("TFRecords without a manifest need --vocab_file (for the vocabulary size).")
    from keras_bert_impl.tokenizers import load_vocab

    return max(load_vocab(vocab_file).values()) + 1


def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, default=float)
    os.replace(tmp, path)


if __name__ == "__main__":
    define_flags(PretrainConfig, HELP)
    try:
        app.run(main)
    except KeyboardInterrupt:
        sys.exit(130)
