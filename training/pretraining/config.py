"""The settings of `training.pretrain`: `PretrainConfig` (every flag a
field, the main job's values its defaults), the flags' help, each family's
default number of steps, and the settings a family trains with where
BERT's defaults do not suit it (`MODEL_DEFAULTS`, applied by
`with_model_defaults`).
"""

import dataclasses


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
    export_formats: str = "saved_model"


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
    "export_formats": "What the export writes besides the Keras model and the checkpoint "
                      "files, comma-separated, each in its folder under <output_dir>/export/: "
                      "saved_model, onnx (ONNX Runtime), openvino (OpenVINO IR), litert "
                      "(LiteRT): the backbone, token ids in, its hidden states out, with the "
                      "tokenizer's files, text_to_ids.py and serving_info.json. onnx, "
                      "openvino and litert need the [export] extra; ELMo exports saved_model "
                      "only. Without saved_model no SavedModel is written.",
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


def with_model_defaults(cfg, explicit=None):
    """`cfg` with the model's `MODEL_DEFAULTS` where its flags keep BERT's
    defaults and were not given (`explicit`: the flags typed; a typed flag
    is obeyed even when its value is BERT's default)."""
    bert = PretrainConfig()
    return dataclasses.replace(cfg, **{
        key: value for key, value in MODEL_DEFAULTS.get(cfg.model, {}).items()
        if getattr(cfg, key) == getattr(bert, key) and key not in (explicit or ())})
