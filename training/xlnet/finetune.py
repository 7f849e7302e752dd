"""XLNet's side of fine-tuning (`training.finetune --model=xlnet`): defaults, checkpoint, tasks.

Over 400 lines: everything `--model=xlnet` changes in fine-tuning is in this
one file, as GPT's and ELMo's are in theirs.

Everything `--model=xlnet` does differently from BERT's fine-tuning, in one
place: the original's fine-tuning settings (`XLNET_*`), `resolve_xlnet` (its
refusals; `spiece.model` located), `build_xlnet_backbone` (a Hugging Face
folder, one of our `.keras` files, or a preset; always the content stream
without memory), the tasks, and the batches of similar length for
left-padded rows. The SavedModel export is
`keras_bert_impl.xlnet.xlnet_task_serving`.

The tasks are BERT's (`training.finetuning.tasks`), reading, scoring and
writing the files the same way, with XLNet's layout (`A <sep> (B <sep>)
<cls>`, left padding, `input_mask` 1 on padding; `keras_bert_impl.xlnet.
xlnet_inputs`) and task models (`xlnet_task_models`):

- GLUE, CoNLL and SWAG encode with the readers of `training/tasks/` (their
  truncation, `--window_stride` windows and first-piece labels) through a
  SentencePiece stand-in for BERT's tokenizer, then move every row into
  XLNet's layout with `from_bert_layout` (per-position labels and maps move
  with their tokens).
- SQuAD (`training.tasks.xlnet_squad`) is laid out as the original `run_squad.py`: `paragraph <sep>
  question <sep> <cls>` (the paragraph first; transformers' SQuAD processor
  does the same for left-padding tokenizers), windows of the paragraph
  `--doc_stride` pieces apart, "no answer" at `<cls>` (the last position),
  left padding as every other task here (relative attention makes the
  padding's side irrelevant). Answers are cut from the context's words at
  the predicted pieces' characters (the original maps pieces to characters
  too), so an answer may start or end inside a word.

`training.finetuning.recipe.finetune_recipe` picks this module's `RECIPE`
for `--model=xlnet`; it imports the base classes it builds on at the top.
"""

import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
from keras_bert_impl.xlnet.xlnet_checkpoint import load_xlnet_checkpoint
from keras_bert_impl.xlnet.xlnet_checkpoint import read_xlnet_config
from keras_bert_impl.xlnet.xlnet_config import XLNET_PRESETS
from keras_bert_impl.xlnet.xlnet_config import xlnet_preset
from keras_bert_impl.xlnet.xlnet_inputs import XLNetSpecialIds
from keras_bert_impl.xlnet.xlnet_inputs import from_bert_layout
from keras_bert_impl.xlnet.xlnet_task_models import XLNetClassifier
from keras_bert_impl.xlnet.xlnet_task_models import XLNetMultipleChoice
from keras_bert_impl.xlnet.xlnet_task_models import XLNetQuestionAnswerer
from keras_bert_impl.xlnet.xlnet_task_models import XLNetTokenTagger
from keras_bert_impl.xlnet.xlnet_task_serving import export_xlnet_task_saved_model
from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer
from tf_records.length_grouping import grouped_batches
from tf_records.plain import plain
from training.finetuning.recipe import FinetuneRecipe
from training.finetuning.recipe import backbone_in_keras_file
from training.finetuning.recipe import check_start
from training.finetuning.recipe import run_dtype
from training.finetuning.tasks import GlueTask
from training.finetuning.tasks import NerTask
from training.finetuning.tasks import SquadTask
from training.finetuning.tasks import SwagTask
from training.finetuning.tasks import task_values
from training.finetuning.text_classification import TextClassificationTask
from training.finetuning.vocab_checks import check_vocab_of_checkpoint
from training.tasks import glue
from training.tasks import swag
from training.tasks.xlnet_squad import decode_xlnet_squad
from training.tasks.xlnet_squad import xlnet_squad_features
from training.xlnet.recipe import runtime_tokenizer

# N=rows, S=max_seq_length

# `--model=xlnet`: the original's fine-tuning settings. README and scripts:
# GLUE (run_classifier.py, STS-B) lr 5e-5, batch 32 (8 x 4 GPUs), warmup
# 120 of 1,200 steps (10%), linear ("poly") decay to 0; SQuAD
# (scripts/gpu_squad_base.sh) lr 2e-5, warmup 1,000 of 12,000, 512 tokens;
# RACE (multiple choice, like SWAG) lr 2e-5. Adam epsilon 1e-6 (the SQuAD
# and RACE scripts, the paper's Table 8), weight decay 0 (run_classifier.py
# and the paper), clipping at 1.0, dropout 0.1 (the checkpoint's).
# Layer-wise lr decay is 1.0 (off) as for GLUE in the paper. NER has no
# original setting: GLUE's. Epochs: BERT's 3 (the original counts steps).
XLNET_LEARNING_RATE = {"glue": 5e-5, "squad": 2e-5, "ner": 5e-5, "swag": 2e-5,
                       "text_classification": 5e-5}  # your own files: as GLUE
XLNET_MAX_SEQ_LENGTH = {"glue": 128, "squad": 512, "ner": 128, "swag": 128,
                        "text_classification": 128}
XLNET_WARMUP_PROPORTION = 0.1
XLNET_WEIGHT_DECAY = 0.0
XLNET_ADAM_EPSILON = 1e-6
SPM_FILE = "spiece.model"
# The SQuAD targets that are positions in a row (they move when padding is cut).
SPAN_TARGETS = ("start_logits", "end_logits")


def _checkpoint_folder(path):
    return path if os.path.isdir(path) else os.path.dirname(path)


def resolve_xlnet(cfg):
    """`--model=xlnet`: its refusals; checkpoint and `spiece.model` located
    and checked against each other (the task defaults are its recipe's
    tables, `XLNET_LEARNING_RATE` and `XLNET_MAX_SEQ_LENGTH`)."""
    if cfg.merges_file or cfg.lm_coef >= 0 or cfg.elmo_lstm_units:
        raise SystemExit("--merges_file, --lm_coef and --elmo_lstm_units are GPT's and ELMo's, "
                         "not XLNet's.")
    check_start("xlnet", cfg.init_checkpoint, cfg.preset, XLNET_PRESETS, "an XLNet",
                "--init_checkpoint (a Hugging Face xlnet folder with config.json, "
                "model.safetensors and spiece.model, or one of our .keras files) or "
                "--preset=xlnet_debug|xlnet_base|xlnet_large (random initialization, with "
                "--vocab_file=spiece.model): no XLNet is installed offline.", not_both=True)
    checkpoint = cfg.init_checkpoint
    if checkpoint:
        _check_checkpoint_kind(checkpoint)
    vocab_file = cfg.vocab_file or _spm_beside(checkpoint)
    check_vocab_of_checkpoint(checkpoint, vocab_file, SPM_FILE)
    try:
        tokenizer = XLNetTokenizer(vocab_file, do_lower_case=cfg.do_lower_case)
    except ValueError as e:
        raise SystemExit(f"--vocab_file: {e}") from None
    if checkpoint and os.path.isdir(checkpoint):  # its config.json, read before any data
        try:
            vocab_size = read_xlnet_config(checkpoint).vocab_size
        except ValueError as e:
            raise SystemExit(f"--init_checkpoint: {e}") from None
        _check_vocab_size(vocab_size, tokenizer.vocab_size, checkpoint, vocab_file)
    return dataclasses.replace(cfg, vocab_file=vocab_file)


def _check_checkpoint_kind(checkpoint):
    """`SystemExit` unless `checkpoint` is a Hugging Face xlnet folder or a `.keras` file."""
    if os.path.isdir(checkpoint):
        if not os.path.isfile(os.path.join(checkpoint, "config.json")):
            raise SystemExit(f"--init_checkpoint={checkpoint} has no config.json: XLNet "
                             "reads Hugging Face xlnet folders or .keras files.")
    elif not (checkpoint.endswith(".keras") and os.path.isfile(checkpoint)):
        raise SystemExit(f"--init_checkpoint={checkpoint} is neither a Hugging Face xlnet "
                         "folder nor an existing .keras file.")


def _spm_beside(checkpoint):
    """The `spiece.model` beside `checkpoint`; `SystemExit` when there is none."""
    beside = os.path.join(_checkpoint_folder(checkpoint), SPM_FILE) if checkpoint else ""
    if not beside or not os.path.isfile(beside):
        raise SystemExit(f"No {SPM_FILE} beside --init_checkpoint: pass --vocab_file (the "
                         "SentencePiece model XLNet reads; `training.learn_vocab "
                         "--model=xlnet` makes one).")
    return beside


def _for_fine_tuning(backbone, dtype):
    """The backbone as fine-tuning reads it: content stream, no memory, no
    `bi_data`, in `dtype`; the same weights (none of those changes any)."""
    config = backbone.xlnet_config
    wanted = config.replace(mem_len=None, reuse_len=None, bi_data=False)
    policy = dtype or backbone.dtype_policy.name
    if wanted == config and not backbone.two_stream and backbone.dtype_policy.name == policy:
        return backbone
    rebuilt = XLNetBackbone.from_config_object(wanted, dtype=policy)
    rebuilt.set_weights(backbone.get_weights())
    return rebuilt


def build_xlnet_backbone(cfg, vocab_size):
    """The `XLNetBackbone` to fine-tune: a Hugging Face xlnet folder, one of
    our `.keras` files (a backbone, an `XLNetPretrainer` or a fine-tuned
    task model), or `--preset` with `vocab_size` rows; always without
    memory or query stream (the original fine-tunes so)."""
    dtype = run_dtype(cfg.mixed_precision)
    if not cfg.init_checkpoint:
        config = xlnet_preset(cfg.preset).replace(vocab_size=vocab_size)
        return XLNetBackbone.from_config_object(config, dtype=dtype)
    if os.path.isdir(cfg.init_checkpoint):
        try:
            backbone = load_xlnet_checkpoint(cfg.init_checkpoint, dtype=dtype, mem_len=None,
                                             reuse_len=None, bi_data=False)
        except ValueError as e:
            raise SystemExit(f"--init_checkpoint: {e}") from None
    else:
        backbone = _for_fine_tuning(
            backbone_in_keras_file(cfg.init_checkpoint, XLNetBackbone, "XLNet backbone"), dtype)
    _check_vocab_size(backbone.vocab_size, vocab_size, cfg.init_checkpoint, cfg.vocab_file)
    return backbone


def _check_vocab_size(rows, pieces, checkpoint, vocab_file):
    if rows < pieces:
        raise SystemExit(f"{checkpoint} has {rows} token rows but {vocab_file} holds {pieces} "
                         f"pieces: pass the checkpoint's own {SPM_FILE}.")


# --- The tasks -------------------------------------------------------------------------------


class _XLNetPieces:
    """XLNet's SentencePiece in the shape the readers of `training/tasks/` read a
    tokenizer: pieces and their ids; `<cls>` and `<sep>` as "[CLS]" and
    "[SEP]", `<pad>` as padding, so the rows come out as BERT's layout of
    XLNet's tokens, ready for `from_bert_layout`."""

    def __init__(self, tokenizer):
        self.xlnet_tokenizer = tokenizer
        self.cls_token_id = tokenizer.cls_id
        self.sep_token_id = tokenizer.sep_id
        self.pad_token_id = tokenizer.pad_id
        self.unk_token_id = tokenizer.unk_id  # a word with no pieces still gets a position

    def tokenize(self, text):
        return self.xlnet_tokenizer.tokenize(text)

    def convert_tokens_to_ids(self, pieces):
        return [self.xlnet_tokenizer.piece_to_id(piece) for piece in pieces]


class XLNetGlueTask(GlueTask):
    """`--model=xlnet --task=glue/<name>`: `A <sep> (B <sep>) <cls>`, left-padded,
    into `XLNetClassifier`. Truncation and `--window_stride` windows as BERT's."""

    def __init__(self, tokenizer, name, **values):
        super().__init__(_XLNetPieces(tokenizer), name, **values)
        self.special = XLNetSpecialIds.of(tokenizer)

    def _encode(self, examples):
        encoded = super()._encode(examples)
        x, _ = from_bert_layout(encoded.x, self.special)
        return dataclasses.replace(encoded, x=x)

    def build_model(self, backbone):
        return XLNetClassifier(backbone, len(self.task.labels) if self.task.labels else 1)


class XLNetNerTask(NerTask):
    """`--model=xlnet --task=ner`: CoNLL rows `pieces <sep> <cls>`, left-padded;
    each word's label on its first piece (moved with it), `XLNetTokenTagger`."""

    def __init__(self, tokenizer, **values):
        super().__init__(_XLNetPieces(tokenizer), **values)
        self.special = XLNetSpecialIds.of(tokenizer)

    def _encode(self, split):
        if split not in self._encoded:
            encoded = super()._encode(split)  # BERT's layout of XLNet's pieces
            x, source = from_bert_layout(encoded.x, self.special)

            def move(array):
                return np.take_along_axis(array, source, axis=-1)

            self._encoded[split] = dataclasses.replace(
                encoded, x=x, y=move(encoded.y), sample_weight=move(encoded.sample_weight),
                word_index=move(encoded.word_index), max_context=move(encoded.max_context))
        return self._encoded[split]

    def build_model(self, backbone):
        return XLNetTokenTagger(backbone, len(self.label_list))


class XLNetSwagTask(SwagTask):
    """`--model=xlnet --task=swag`: each ending a row `sent1 <sep> sent2 ending_k
    <sep> <cls>` (BERT's split of the texts), `(N, 4, S)`, `XLNetMultipleChoice`."""

    def __init__(self, tokenizer, **values):
        super().__init__(_XLNetPieces(tokenizer), **values)
        self.special = XLNetSpecialIds.of(tokenizer)

    def _encode(self, examples):
        encoded = super()._encode(examples)
        x, _ = from_bert_layout(encoded.x, self.special)
        return swag.EncodedSwag(x, encoded.y)

    def build_model(self, backbone):
        return XLNetMultipleChoice(backbone)


class XLNetSquadTask(SquadTask):
    """`--model=xlnet --task=squad`: the files read as BERT's; XLNet's windows
    (`xlnet_squad_features`), `XLNetQuestionAnswerer`, `decode_xlnet_squad`."""

    def _features(self, examples, is_training):
        return xlnet_squad_features(examples, self.tokenizer, self.max_seq_length,
                                    self.doc_stride, self.max_query_length, is_training)

    def _decode(self, examples, features, out, **threshold):
        return decode_xlnet_squad(
            examples, features, out["start_logits"], out["end_logits"],
            n_best_size=self.n_best_size, max_answer_length=self.max_answer_length,
            version_2_with_negative=self.version_2, **threshold)

    def build_model(self, backbone):
        return XLNetQuestionAnswerer(backbone)


class XLNetTextClassificationTask(XLNetGlueTask, TextClassificationTask):
    """`--model=xlnet --task=text_classification`: your files as XLNet reads GLUE."""


def make_xlnet_task(cfg, tokenizer):
    """The task object for `--model=xlnet` (`glue/<name>`, `text_classification`,
    `squad`, `ner` or `swag`): `task_values` of `cfg`."""
    values = task_values(cfg)
    if cfg.task.startswith("glue/"):
        return XLNetGlueTask(tokenizer, cfg.task.split("/", 1)[1], **values)
    if cfg.task == "text_classification":
        return XLNetTextClassificationTask(tokenizer, cfg.task, **values)
    tasks = {"squad": XLNetSquadTask, "ner": XLNetNerTask, "swag": XLNetSwagTask}
    if cfg.task not in tasks:
        raise SystemExit(f"Unknown --task={cfg.task!r} for --model=xlnet: use glue/<name> "
                         f"({', '.join(sorted(glue.TASKS))}), squad, ner or swag.")
    return tasks[cfg.task](tokenizer, **values)


# --- Training batches of similar length -------------------------------------------------------


def grouped_left_padded_batches(x, y, sample_weight, batch_size, group, seed):
    """`tf_records.length_grouping.grouped_batches` for XLNet's left-padded rows.

    The rows are read back to front (`input_mask` inverted: 1 on tokens,
    tokens first, as that module reads rows), grouped and cut there, then
    turned around again: each batch is cut to its longest row from the
    LEFT, where XLNet's padding is. Per-position targets (tagging labels,
    sample weights) turn with them; the SQuAD positions (`start_logits`,
    `end_logits`) move left by the number of columns cut. Relative attention
    sees only distances, so a row's outputs do not change with the padding
    cut from its left.

    Args:
        x: dict of `(rows, ..., S)` arrays in XLNet's layout.
        y: array or dict of arrays (per-position ones shaped like `input_mask`).
        sample_weight: None, or arrays shaped like `y`.
        batch_size: int. Rows per batch.
        group: int. Batches sorted together.
        seed: int. Shuffle seed.

    Returns:
        A `tf.data.Dataset` of `(x, y)` or `(x, y, sample_weight)` batches.
    """
    shape = np.shape(x["input_mask"])
    length = shape[-1]

    def turn(array):  # per-position arrays read back to front
        return array[..., ::-1] if np.shape(array) == shape else array

    per_position = keras.tree.map_structure(lambda a: np.shape(a) == shape, y)
    turned = {name: value[..., ::-1] for name, value in x.items()}
    turned["input_mask"] = 1 - turned["input_mask"]  # 1 on tokens, tokens first
    dataset = grouped_batches(turned, keras.tree.map_structure(turn, y),
                              None if sample_weight is None else
                              keras.tree.map_structure(turn, sample_weight),
                              batch_size, group, seed)

    def back(batch_x, batch_y, *batch_weight):
        cut = length - tf.shape(batch_x["input_mask"])[-1]  # columns cut from the left
        batch_x = {name: tf.reverse(value, [-1]) for name, value in batch_x.items()}
        batch_x["input_mask"] = 1 - batch_x["input_mask"]

        def restore(target, flag):
            return tf.reverse(target, [-1]) if flag else target

        batch_y = keras.tree.map_structure(restore, batch_y, per_position)
        if isinstance(batch_y, dict):
            batch_y = {name: value - tf.cast(cut, value.dtype) if name in SPAN_TARGETS else value
                       for name, value in batch_y.items()}
        batch_weight = [keras.tree.map_structure(restore, w, per_position) for w in batch_weight]
        return (batch_x, batch_y, *batch_weight)

    return dataset.map(plain(back))


class XLNetFinetune(FinetuneRecipe):
    """`--model=xlnet`: the original's settings, SentencePiece, XLNet's layout and export."""

    name = "xlnet"
    adam_epsilon = XLNET_ADAM_EPSILON
    task_learning_rates = XLNET_LEARNING_RATE
    task_max_seq_lengths = XLNET_MAX_SEQ_LENGTH
    warmup_proportion = XLNET_WARMUP_PROPORTION
    weight_decay = XLNET_WEIGHT_DECAY
    cased = True  # XLNet's released models are cased

    @classmethod
    def resolve_own(cls, cfg):
        return resolve_xlnet(cfg)

    def tokenizer(self):
        return XLNetTokenizer(self.flag.vocab_file, do_lower_case=self.flag.do_lower_case)

    def make_task(self, tokenizer):
        return make_xlnet_task(self.flag, tokenizer)

    def build_backbone(self, vocab_size):
        return build_xlnet_backbone(self.flag, vocab_size)

    def grouped_batches(self, x, y, sample_weight, batch_size, group, seed):
        # Left padding: rows are cut from the left.
        return grouped_left_padded_batches(x, y, sample_weight, batch_size, group, seed)

    def export(self, model, saved_model_dir, labels):
        flag = self.flag
        export_xlnet_task_saved_model(model, saved_model_dir, flag.vocab_file,
                                      flag.do_lower_case, flag.max_seq_length, labels=labels)

    def runtime_tokenizer(self):
        return runtime_tokenizer(self.flag.vocab_file, self.flag.do_lower_case)


RECIPE = XLNetFinetune
