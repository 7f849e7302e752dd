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
Every flag is a field of `PretrainConfig`; its default is the flag's. A
model family adds its recipe (data, model, loss, evaluation, export:
`training/bert/recipe.py`, `training/gpt/recipe.py`,
`training/elmo/recipe.py`, `training/xlnet/recipe.py`); the trainer here is
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

from command_line import console
from training.config_flags import define_flags
from training.config_flags import from_flags
from training.pretrain_common import is_tfrecords
from training.pretrain_common import say
from training.pretrain_common import write_json


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Settings of a pretraining run. The defaults are the main job's."""

    model: str = "bert"
    ablation: str = ""
    init_checkpoint: str = ""
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
    chinese_word_segmenter: str = ""
    input_format: str = "segment_pair"
    global_batch_size: int = 32
    shuffle_buffer: int = 10_000
    length_grouping: int = 16
    batch_slices: int = 0
    num_train_steps: int = 0
    phase2_steps: int = 0
    phase2_max_seq_length: int = 512
    phase2_max_predictions_per_seq: int = 80
    checkpoint_every_steps: int = 500
    steps_per_execution: int = 1
    strategy: str = "auto"
    tpu: str = ""
    mixed_precision: bool | None = None
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
    saved_model: bool = True


HELP = {
    "model": "bert, gpt (OpenAI GPT: BPE vocabulary, contiguous token windows, next-token LM), "
             "elmo (ELMo's biLM, as bilm-tf: a word vocabulary by frequency, streams of "
             "sentences in windows, LSTM states carried across batches, forward and backward "
             "LM through one softmax; one replica only) or xlnet (XLNet: a SentencePiece "
             "model, XLNet's records of streams with span masking, the permutation LM with "
             "two-stream attention and Transformer-XL memory carried across batches; one "
             "device, mirrored or multi_worker).",
    "ablation": "BERT's Table 5 ablations: '' (MLM + NSP), no_nsp (MLM only), ltr (LTR & No NSP: "
                "causal mask, next-token loss on every position, from the same records).",
    "init_checkpoint": "Continue pretraining from these weights (BERT): a Hugging Face folder, "
                       "an original Google folder or checkpoint prefix, a .keras file, or a "
                       "Hub repository id (bert-base-uncased, org/name@revision; the local "
                       "cache when offline). Its size, vocabulary, casing and pretraining "
                       "heads are used (fresh heads where it has none); --learning_rate "
                       "defaults to 2e-5. Empty: random weights.",
    "input": "Text files/globs (comma-separated; one sentence per line, blank line between "
             "documents) or a TFRecord folder/manifest.json/file pattern. Empty: the default "
             "corpus (Python standard-library docstrings + pydoc topics).",
    "heldout_input": "Held-out text or TFRecords for the final evaluation. Empty: the default "
                     "corpus's held-out documents, or none.",
    "output_dir": "Run folder: data, checkpoints, TensorBoard logs, export, summary.json.",
    "vocab_file": "vocab.txt (GPT: vocab.json, with merges.txt beside it; ELMo: bilm-tf's "
                  "vocab.txt, <S> </S> <UNK> first, then words by frequency; XLNet: "
                  "spiece.model). Empty with text input: learn one from the training text.",
    "vocab_size": "Size of a learned vocabulary (ELMo: the most frequent words kept, the "
                  "rest <UNK>; above 20000 its softmax is sampled; XLNet: SentencePiece "
                  "unigram pieces).",
    "do_lower_case": "Lowercase and strip accents (uncased).",
    "preset": "Model size: tiny, mini, small, medium, base, large; GPT: gpt_tiny, gpt_mini, gpt "
              "(tiny and mini mean gpt_tiny and gpt_mini); ELMo: elmo_tiny, elmo_small, "
              "elmo_medium, elmo_original (tiny, small, medium, base mean those); XLNet: "
              "xlnet_tiny (2 x 128), xlnet_debug, xlnet_base, xlnet_large (tiny, debug, base, "
              "large mean those).",
    "config_file": "bert_config.json (GPT: config.json; ELMo: bilm-tf's options.json; XLNet: a "
                   "Hugging Face config.json, its mem_len, reuse_len and bi_data kept) "
                   "overriding --preset (vocab_size is taken from the data).",
    "max_seq_length": "Tokens per sequence (GPT: per window; each window predicts its next "
                      "tokens; ELMo: bilm-tf's unroll_steps, 20 by default, the window the "
                      "gradient flows through while the LSTM states run on; XLNet: seq_len of "
                      "its records, half of them reused as the next record's memory).",
    "max_predictions_per_seq": "Masked positions per sequence (BERT; XLNet: num_predict, "
                               "about seq_len / 6).",
    "dupe_factor": "Passes over the text when writing TFRecords, each with new masks (XLNet: "
                   "the original's num_passes).",
    "do_whole_word_mask": "Mask whole words.",
    "chinese_word_segmenter": "With --do_whole_word_mask on Chinese text: jieba finds the "
                              "words whose characters are masked together (Chinese-BERT-wwm); "
                              "the records keep one token per character. Needs "
                              "`pip install keras_bert_impl[chinese]`. Empty: characters are "
                              "words.",
    "input_format": "BERT's records: segment_pair (A [SEP] B, NSP labels: the paper's), or "
                    "RoBERTa's rows of whole sentences without NSP (its loss is then MLM only): "
                    "full_sentences (crossing documents after an extra [SEP]) or doc_sentences "
                    "(never crossing a document).",
    "global_batch_size": "Sequences per step over all replicas (ELMo, XLNet: streams, each "
                         "row continuing its own text from batch to batch).",
    "shuffle_buffer": "Records in the shuffle buffer; 0 reads files and records in order "
                      "(ELMo's and XLNet's streams are always read in order).",
    "length_grouping": "BERT: read this many batches at a time, sort them by length and cut "
                       "each batch to its longest row (a multiple of 16): less compute on "
                       "padding, the same records. 0: every batch max_seq_length long. Used "
                       "with one replica (the default strategy) only.",
    "batch_slices": "BERT on CPU (the default strategy, no GPU or TPU): run each training batch "
                    "as this many slices side by side, each with its share of the cores' op "
                    "threads (ops of a small model do not fill several cores; the same values "
                    "up to float rounding, other dropout draws). 0: 2 where two ops can run at "
                    "once on two cores, else 1 (whole batches). Ignored elsewhere.",
    "num_train_steps": "Optimizer updates; 0: the model's main-job default (BERT 3000, GPT 1000: "
                       "its LM loss on every position costs ~3x BERT's per step; ELMo 1000 "
                       "of 16 streams: ~4 minutes on two CPU cores; XLNet 1000 of 32 x 64 "
                       "tokens: 2-4 minutes).",
    "phase2_steps": "BERT: the paper's second phase. After --num_train_steps at "
                    "--max_seq_length (phase 1: the paper's 90% at 128), this many more steps "
                    "on records of --phase2_max_seq_length (the paper's 10% at 512) written "
                    "from the same text, in the same run: the weights and optimizer state "
                    "carry on, the learning-rate schedule spans both phases, position "
                    "embeddings past phase 1's length train here; a resume continues the "
                    "phase it stopped in. 0: one phase.",
    "phase2_max_seq_length": "Tokens per sequence in phase 2 (the paper's 512).",
    "phase2_max_predictions_per_seq": "Masked positions per sequence in phase 2 (the "
                                      "original's 80 at 512).",
    "checkpoint_every_steps": "Checkpoint interval (rounded down to divide num_train_steps).",
    "steps_per_execution": "Steps per compiled call (TPUs like 100s).",
    "strategy": "auto, cpu, mirrored, multi_worker (TF_CONFIG) or tpu.",
    "tpu": "TPU name or address; 'local' on Colab / Cloud TPU VMs.",
    "mixed_precision": "mixed_bfloat16 (float32 variables, LayerNorm, softmax and logits); "
                       "--nomixed_precision: float32. Not given: on for BERT and XLNet on a CPU "
                       "with bfloat16 instructions (avx512_bf16 or amx_bf16) and the default "
                       "strategy (measured on their main jobs: faster, held-out accuracy as "
                       "good), float32 elsewhere.",
    "jit_compile": "Compile the train step with XLA (static shapes).",
    "optimizer": "adamw (the original), lamb, or adagrad (bilm-tf's: constant learning rate, "
                 "initial accumulator 1.0; ELMo's default).",
    "learning_rate": "Peak learning rate (the original: 1e-4 for BERT-BASE's 1M steps).",
    "warmup_steps": "Linear warmup steps, then linear decay to 0 at num_train_steps.",
    "weight_decay": "Decoupled weight decay (not on LayerNorm or biases).",
    "clip_norm": "Global-norm gradient clipping (0: off). Per replica, then summed, as the "
                 "original on TPU cores.",
    "gradient_accumulation_steps": "Batches per optimizer update.",
    "seed": "Seed for data writing, data order and initialization.",
    "data_workers": "Processes writing TFRecords.",
    "log_every_steps": "Steps between progress lines / TensorBoard points.",
    "fill_mask_examples": "Held-out sentences shown with [MASK] predictions (BERT, XLNet: one "
                          "word hidden by the permutation mask) or greedy continuations (GPT) "
                          "at the end.",
    "saved_model": "Export a SavedModel (TF Serving signatures) beside the Keras model and "
                   "the family's checkpoint files. Off: those files only, all that "
                   "fine-tuning reads (the Table 5 driver turns it off).",
}

# The main job's length per model: GPT's LM loss on every position costs
# about 3x BERT's 20 masked positions per step (measured on the main job).
# ELMo's elmo_tiny step (16 streams x 20 tokens, both directions, an
# 8000-word softmax) takes ~0.2 s on two CPU cores; Adagrad at bilm-tf's
# 0.2 needs ~1000 steps to pass the unigram model on the default corpus
# (measured: held-out perplexity 370 vs 434 after 1000, 500 vs 434 after
# 400 steps of 32 streams).
# XLNet's xlnet_tiny step (32 streams x 64 tokens, both streams, memory
# 32) takes 0.13-0.26 s on two shared CPU cores; 800 steps already pass the
# unigram model by far (measured: held-out perplexity 98 vs 424).
DEFAULT_TRAIN_STEPS = {"bert": 3000, "gpt": 1000, "elmo": 1000, "xlnet": 1000}

# Where a family trains differently, its settings replace the flags left
# at BERT's defaults: ELMo as bilm-tf's `train_elmo.py` (Adagrad 0.2 with
# accumulators from 1.0, no schedule or weight decay, clipping at 10,
# 20-token windows), with 16 streams instead of its 128 per GPU, for CPUs.
# XLNet on CPUs: 64-token records (reuse 32, 11 predicted: XLNet's ~1/6),
# half of BERT's, since its relative attention costs more per token; a
# 4000-piece SentencePiece model (the default corpus has too little text
# for 8000 unigram pieces); warmup 10% of its 1000 steps.
MODEL_DEFAULTS = {"elmo": {"optimizer": "adagrad", "learning_rate": 0.2, "warmup_steps": 0,
                           "weight_decay": 0.0, "clip_norm": 10.0, "max_seq_length": 20,
                           "global_batch_size": 16},
                  "xlnet": {"max_seq_length": 64, "max_predictions_per_seq": 11,
                            "vocab_size": 4000, "warmup_steps": 100}}

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
    (`training.distribution.auto_mixed_precision`)."""
    path = os.path.join(cfg.output_dir, "run_config.json")
    if os.path.exists(path) and _trained(cfg.output_dir):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f).get("mixed_precision")
        if saved is not None:
            return saved
    from training.distribution import auto_mixed_precision

    return auto_mixed_precision(cfg.model, cfg.strategy, cfg.tpu)


def with_model_defaults(cfg, explicit=None):
    """`cfg` with the model's `MODEL_DEFAULTS` where its flags keep BERT's
    defaults and were not given (`explicit`: the flags typed; a typed flag
    is obeyed even when its value is BERT's default)."""
    bert = PretrainConfig()
    return dataclasses.replace(cfg, **{
        key: value for key, value in MODEL_DEFAULTS.get(cfg.model, {}).items()
        if getattr(cfg, key) == getattr(bert, key) and key not in (explicit or ())})


def make_recipe(cfg, init=None):
    """The model family's recipe: data, model, loss, evaluation and export
    (`init`: BERT's `InitCheckpoint` to continue from)."""
    if cfg.model != "bert" and cfg.input_format != "segment_pair":
        raise SystemExit(f"--input_format={cfg.input_format!r} is an option of BERT's records "
                         f"(--model=bert); --model={cfg.model} writes its own.")
    if cfg.model == "bert":
        from training.bert.recipe import BertRecipe

        return BertRecipe(cfg, init)
    if cfg.model == "gpt":
        from training.gpt.recipe import GptRecipe

        return GptRecipe(cfg, init)
    if cfg.model == "elmo":
        from training.elmo.recipe import ElmoRecipe

        return ElmoRecipe(cfg)
    if cfg.model == "xlnet":
        from training.xlnet.recipe import XLNetRecipe

        return XLNetRecipe(cfg, init)
    raise SystemExit(f"--model={cfg.model!r} is not one of: bert, gpt, elmo, xlnet.")


def train(cfg, recipe, strategy, train_source, vocab_size, slices=1, at_start=None,
          phase2=None):
    """Builds, restores and fits (each batch in `slices`, `BatchSlices`); returns
    (model, model_config, step, nan). `at_start(model, model_config)`: called
    before the first step of a run that starts at step 0. `phase2`:
    `(recipe, records)` of the second phase (`--phase2_steps`): its batches
    follow phase 1's in the same fit, schedule and checkpoints."""
    import keras
    import tensorflow as tf

    from keras_bert_impl.models.keras_strategy_fixes import without_autotune_thread
    from tf_records.manifest import pipeline_share
    from tf_records.manifest import read_manifest
    from training.checkpointing import CheckpointEveryEpoch
    from training.checkpointing import TrainingCheckpoint
    from training.distribution import replicas_batch
    from training.optimization import OptimizerConfig
    from training.optimization import create_optimizer
    from training.pretrain_common import checkpoint_interval
    from training.train_log import TrainingLog

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


def main(argv):
    del argv
    from absl import flags

    explicit = {f.name for f in dataclasses.fields(PretrainConfig) if flags.FLAGS[f.name].present}
    run(from_flags(PretrainConfig), explicit)


def run(cfg, explicit=None):
    """Pretrains as `cfg` says: data, training, evaluation, export.

    Validate first, act second: the flags, the paths they name and the
    records' agreement with them are checked (`training.pretrain_checks`)
    before the output folder is made, locked or given its
    `run_config.json`. `explicit`: the flags given on the command line (a
    flag not given takes the records' value); None: those whose value
    differs from the default.
    """
    from training.pretrain_checks import agree_with_records
    from training.pretrain_checks import check_flags
    from training.pretrain_checks import verify_records

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
        from training.continued_pretraining import with_init_checkpoint

        cfg, init = with_init_checkpoint(cfg, explicit)
        explicit |= {"vocab_file", "do_lower_case"}  # the checkpoint's: records must agree
    check_flags(cfg)
    cfg = agree_with_records(cfg, with_model_defaults(PretrainConfig(model=cfg.model)), explicit)
    from training.pretrain_checks import check_bare_records

    for source in (cfg.input, cfg.heldout_input):  # a glob's records: the flags' lengths
        if is_tfrecords(source):
            check_bare_records(cfg, source)
    if cfg.mixed_precision is None:
        cfg = dataclasses.replace(cfg, mixed_precision=_unset_mixed_precision(cfg))
    recipe = make_recipe(cfg, init)  # checks --model, --ablation, the preset or config file
    from training.checkpointing import OutputLock

    role = _worker_role() if cfg.strategy == "multi_worker" else ""
    if role and not is_tfrecords(cfg.input):
        writer = {"gpt": "create_lm_data", "xlnet": "create_xlnet_data"}.get(
            cfg.model, "create_pretraining_data")
        raise SystemExit("--strategy=multi_worker reads TFRecords (--input=<folder>): write them "
                         f"once first with `python -m tf_records.{writer}`.")
    try:
        lock = OutputLock(cfg.output_dir, role)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    chief = role in ("", "chief-0", "worker-0")
    if chief:
        _check_run_config(cfg, os.path.join(cfg.output_dir, "run_config.json"), typed)
    import keras

    from command_line.keras_extras import freeze_imports

    freeze_imports()
    # Both ways: a process that runs several pretrainings (the Table 5
    # driver's workers) must not keep an earlier run's policy.
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if cfg.mixed_precision else "float32")
    from training.distribution import cpu_batch_slices
    from training.distribution import cpu_only
    from training.distribution import cpu_op_threads
    from training.distribution import make_strategy

    # BERT's batches in slices side by side on a CPU (`BatchSlices`); the
    # op threads only where this process has not started TensorFlow yet.
    slices = cpu_batch_slices(cfg.batch_slices) if cfg.model == "bert" and cpu_only(
        cfg.strategy, cfg.tpu) else 1
    op_threads = cpu_op_threads(slices) if slices > 1 else None
    strategy = make_strategy(cfg.strategy, cfg.tpu)
    train_source, heldout_source, vocab_file = recipe.prepare_data()
    for source in (train_source, heldout_source):
        verify_records(source)  # a bad shard named now, not mid-run by a DataLossError
    vocab_size = recipe.vocab_size(train_source, vocab_file)
    phase2 = None
    if cfg.phase2_steps:  # the same text, written again at phase 2's length
        from training.bert.recipe import BertRecipe

        if strategy is not tf_default_strategy():
            raise SystemExit("--phase2_steps runs on one replica (the default strategy); "
                             "on several, run phase 2 as continued pretraining from phase "
                             "1's export (see docs/pretraining.md).")
        phase2_recipe = BertRecipe(dataclasses.replace(
            cfg, max_seq_length=cfg.phase2_max_seq_length,
            max_predictions_per_seq=cfg.phase2_max_predictions_per_seq, vocab_file=vocab_file),
            init, records_prefix="phase2_")
        phase2_train, phase2_heldout, _ = phase2_recipe.prepare_data()
        for source in (phase2_train, phase2_heldout):
            verify_records(source)
        phase2 = (phase2_recipe, phase2_train)
    at_start = None
    # The checkpoint's held-out loss, to beat (not XLNet's: an evaluation
    # would run its carried memory through the held-out streams first).
    if init and heldout_source and chief and cfg.model != "xlnet":
        from training.continued_pretraining import start_evaluation

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
        from training.continued_pretraining import START_EVALUATION

        start_path = os.path.join(cfg.output_dir, START_EVALUATION)
        if os.path.exists(start_path):
            with open(start_path, encoding="utf-8") as f:
                summary["heldout_at_start"] = json.load(f)
    from command_line.progress import Timed
    from training.curves import write_heldout_scalars
    from training.curves import write_training_curves

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
