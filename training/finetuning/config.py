"""The settings of `training.finetune`: `FinetuneConfig` (every flag a
field, its default the flag's), the flags' help, the refusals of other
families' flags the recipes share, and `resolve`, which fills in what the
flags leave to the task and the model (learning rate, length, warmup,
weight decay) and locates the checkpoint and its vocabulary
(`training/finetuning/resolve.py`; the family's part in its recipe,
`training/finetuning/recipe.py`, `training/<family>/finetune.py`).

Nothing here imports TensorFlow: the command reads this module before its
console starts.
"""

import dataclasses


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
    validation_data_dir: str = ""
    early_stopping_patience: int = 0
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
    export_formats: str = "saved_model"
    quantize: str = "none"
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
    "validation_data_dir": "A folder in the task's layout whose dev split (the first, e.g. "
                           "dev_matched; SWAG's val) holds validation rows: scored after each "
                           "epoch (validation_<metric> in the history), in place of the dev "
                           "splits, which are then scored once, at the end, with the weights "
                           "kept. Not for text_classification (its --dev_file is scored each "
                           "epoch).",
    "early_stopping_patience": "Stop once the validation score (--validation_data_dir's; "
                               "without it the first dev split's) has not improved for this "
                               "many epochs, and keep the weights of its best epoch (the first "
                               "on a tie; saved in checkpoints/best.weights.h5). The score: F1 "
                               "where the task reports one (SQuAD, NER, MRPC, QQP), else its "
                               "first (accuracy; CoLA's Matthews; STS-B's Pearson). The "
                               "warmup and decay still span --epochs. 0: off, every epoch "
                               "trained, the last weights kept.",
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
    "export_formats": "What the export writes, comma-separated, each in its folder under "
                      "<output_dir>/export/: saved_model (TensorFlow Serving: text in), onnx "
                      "(ONNX Runtime), openvino (OpenVINO IR), litert (LiteRT, formerly "
                      "TFLite). The runtimes take token ids: each folder holds the "
                      "tokenizer's files, text_to_ids.py and serving_info.json. onnx, "
                      "openvino and litert need the [export] extra.",
    "quantize": "none, or int8: each runtime export of --export_formats also written in int8 "
                "by its runtime's own tool (ONNX Runtime's dynamic quantisation, NNCF's weight "
                "compression, LiteRT's dynamic range) into <format>_int8/, and the change of "
                "each dev score and of the weights' size in export/quantization.csv.",
    "export": "Write the fine-tuned model (SavedModel and model.keras). Off: scores, predictions "
              "and summary.json only (sweeps of many small runs, e.g. training.ablations).",
}


def with_checkpoint_by_name(cfg, recipe=None):
    """`cfg` with a Hub repository id in `--init_checkpoint` replaced by its
    folder in the Hugging Face cache (`training.finetuning.resolve`)."""
    # lazy: read before the console starts (training.finetune); resolving imports Keras
    from training.finetuning import resolve as resolving

    return resolving.with_checkpoint_by_name(cfg, recipe)


def resolve(cfg):
    """Task defaults filled in; checkpoint and vocabulary located
    (`training.finetuning.resolve.resolve`)."""
    # lazy: read before the console starts (training.finetune); resolving imports Keras
    from training.finetuning import resolve as resolving

    return resolving.resolve(cfg)


def refuse_elmo_flags(cfg):
    if cfg.elmo_lstm_units:
        raise SystemExit("--elmo_lstm_units is ELMo's: pass it with --model=elmo.")


def refuse_gpt_flags(cfg):
    if cfg.merges_file or cfg.lm_coef >= 0:
        raise SystemExit("--merges_file and --lm_coef are GPT's: pass them with --model=gpt.")
