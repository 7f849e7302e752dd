"""GPT's side of fine-tuning (`training.finetune --model=gpt`): defaults, checkpoint, tasks.

Everything `--model=gpt` does differently from BERT's fine-tuning, in one
place: the original `train.py` defaults (`GPT_*`), `resolve_gpt` (its
refusals; vocab.json and merges.txt located), `build_gpt_backbone` (the
checkpoint or preset with `_start_`, `_delimiter_`, `_classify_` appended)
and the tasks (`GptGlueTask`, `GptNerTask`, `GptSwagTask`; SQuAD is BERT's
only). The tasks are BERT's (`training.finetuning.tasks`) with GPT's input
transformations (`keras_bert_impl.gpt.gpt_inputs`) and task models: the files
are read, scored and written the same way.

`training.finetuning.recipe.finetune_recipe` picks this module's `RECIPE`
for `--model=gpt`; it imports the base classes it builds on at the top.
"""

import dataclasses
import os

import numpy as np

from keras_bert_impl.gpt import GPT_PRESETS
from keras_bert_impl.gpt import GptBackbone
from keras_bert_impl.gpt import gpt_preset
from keras_bert_impl.gpt import grow_vocabulary
from keras_bert_impl.gpt import load_gpt_checkpoint
from keras_bert_impl.gpt.gpt_inputs import FineTuningIds
from keras_bert_impl.gpt.gpt_inputs import entailment_inputs
from keras_bert_impl.gpt.gpt_inputs import multiple_choice_inputs
from keras_bert_impl.gpt.gpt_inputs import similarity_inputs
from keras_bert_impl.gpt.gpt_inputs import text_inputs
from keras_bert_impl.gpt.gpt_serving import export_gpt_saved_model
from keras_bert_impl.gpt.gpt_task_models import GptClassifier
from keras_bert_impl.gpt.gpt_task_models import GptMultipleChoice
from keras_bert_impl.gpt.gpt_task_models import GptTokenTagger
from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
from tf_records.manifest import file_sha256
from training.finetuning.config import refuse_elmo_flags
from training.finetuning.recipe import FinetuneRecipe
from training.finetuning.recipe import backbone_in_keras_file
from training.finetuning.recipe import check_start
from training.finetuning.recipe import run_dtype
from training.finetuning.tasks import GlueTask
from training.finetuning.tasks import NerTask
from training.finetuning.tasks import SwagTask
from training.finetuning.tasks import _glue_labels
from training.finetuning.tasks import task_values
from training.finetuning.text_classification import TextClassificationTask
from training.gpt.recipe import runtime_tokenizer
from training.tasks import glue
from training.tasks import swag

# `--model=gpt`: the original `train.py` defaults (lr 6.25e-5, `lr_warmup`
# 0.002 of the steps, `lm_coef` 0.5, Adam epsilon 1e-8); batch 32 (8 x 4 GPUs),
# 3 epochs, clip 1.0 and weight decay 0.01 on matrices (`l2`) are BERT's too.
GPT_LEARNING_RATE = 6.25e-5
GPT_WARMUP_PROPORTION = 0.002
GPT_LM_COEF = 0.5
GPT_ADAM_EPSILON = 1e-8

# The GLUE tasks GPT reads with its similarity transformation (both orders,
# final states added): the GPT paper's semantic-similarity tasks (Sec. 4.1:
# MRPC, QQP, STS-B). Its other pair tasks use the entailment layout.
GPT_SIMILARITY_TASKS = ("MRPC", "QQP", "STS-B")


def resolve_gpt(cfg):
    """`--model=gpt`: its defaults filled in; checkpoint, vocab.json and merges.txt located."""
    if cfg.task == "squad":
        raise SystemExit("--task=squad is BERT's only: the GPT paper fine-tunes no span "
                         "question answering. Use --model=bert.")
    check_start("gpt", cfg.init_checkpoint, cfg.preset, GPT_PRESETS, "a GPT",
                "--init_checkpoint (a Hugging Face openai-gpt folder or one of our .keras "
                "files) or --preset=gpt_tiny|gpt_mini|gpt (random initialization): no GPT "
                "checkpoint is installed offline.")
    changes = {"lm_coef": GPT_LM_COEF} if cfg.lm_coef < 0 else {}
    beside = [os.path.dirname(cfg.vocab_file)] if cfg.vocab_file else []
    if cfg.init_checkpoint:
        beside.append(_checkpoint_folder(cfg.init_checkpoint))
    for field, name in (("vocab_file", "vocab.json"), ("merges_file", "merges.txt")):
        if not getattr(cfg, field):
            found = [os.path.join(d, name) for d in beside if os.path.exists(os.path.join(d, name))]
            if not found:
                raise SystemExit(f"No {name} beside --vocab_file or --init_checkpoint: pass "
                                 f"--{field} (GPT reads vocab.json and merges.txt).")
            changes[field] = found[0]
    cfg = dataclasses.replace(cfg, **changes)
    if cfg.init_checkpoint:
        _check_files_of_checkpoint(cfg.init_checkpoint, cfg.vocab_file, cfg.merges_file)
    return cfg


def _checkpoint_folder(path):
    return path if os.path.isdir(path) else os.path.dirname(path)


def _check_files_of_checkpoint(checkpoint, vocab_file, merges_file):
    """`SystemExit` unless the vocab.json and merges.txt given are the checkpoint's own (when
    it has them)."""
    folder = _checkpoint_folder(checkpoint)
    for field, name, given in (("vocab_file", "vocab.json", vocab_file),
                               ("merges_file", "merges.txt", merges_file)):
        own = os.path.join(folder, name)
        if os.path.exists(own) and os.path.exists(given) and (
                file_sha256(own) != file_sha256(given)):
            raise SystemExit(
                f"--{field}={given} (sha256 {file_sha256(given)[:12]}) is not the {name} "
                f"of --init_checkpoint={checkpoint} ({own}, sha256 "
                f"{file_sha256(own)[:12]}): its token ids would mean other tokens. Leave "
                f"--{field} empty to use the checkpoint's.")


def build_gpt_backbone(cfg, vocab_size):
    """The GPT backbone with `_start_`, `_delimiter_`, `_classify_` at rows
    `vocab_size` .. `vocab_size + 2` (`vocab_size`: the tokenizer's)."""
    dtype = run_dtype(cfg.mixed_precision)
    if not cfg.init_checkpoint:
        config = gpt_preset(cfg.preset).replace(vocab_size=vocab_size)
        return grow_vocabulary(GptBackbone.from_config_object(config, dtype=dtype), 3)
    if os.path.isdir(cfg.init_checkpoint):
        backbone = load_gpt_checkpoint(cfg.init_checkpoint, dtype=dtype)
    else:
        backbone = backbone_in_keras_file(cfg.init_checkpoint, GptBackbone, "GPT backbone")
        if dtype and backbone.dtype_policy.name != dtype:
            rebuilt = GptBackbone.from_config_object(backbone.gpt_config, dtype=dtype)
            rebuilt.set_weights(backbone.get_weights())
            backbone = rebuilt
    # 3 new rows; 4 when the tokenizer added the "<unk>" the checkpoint lacks;
    # none when the checkpoint was fine-tuned already and holds the three.
    missing = vocab_size + 3 - backbone.vocab_size
    if missing not in (0, 3, 4):
        raise SystemExit(f"{cfg.init_checkpoint} has {backbone.vocab_size} token rows but "
                         f"{cfg.vocab_file} holds {vocab_size} tokens: pass the checkpoint's own "
                         "vocab.json and merges.txt.")
    return grow_vocabulary(backbone, missing) if missing else backbone


class GptGlueTask(GlueTask):
    """`--model=gpt --task=glue/<name>`: GLUE read with GPT's input transformations.

    One text: `_start_ s _classify_`; MRPC, QQP and STS-B: both orders of
    the pair, `(N, 2, S)`, into `GptClassifier(similarity=True)`; the other
    pair tasks: `_start_ a _delimiter_ b _classify_`. Long inputs are
    truncated (longer part first); no windows. `lm_coef`: the weight of the
    auxiliary LM loss; the other values are the base task's.
    """

    def __init__(self, tokenizer, name, *, lm_coef, window_stride=0, **values):
        if window_stride:
            raise SystemExit("--window_stride reads long GLUE inputs in windows for BERT only; "
                             "with --model=gpt they are truncated, as the original. Leave it 0.")
        super().__init__(tokenizer, name, window_stride=window_stride, **values)
        self.lm_coef = lm_coef
        self.special = FineTuningIds.appended_to(tokenizer.vocab_size)
        self.similarity = self.task.name in GPT_SIMILARITY_TASKS

    def _encode(self, examples):
        encode, special, length = self.tokenizer.encode, self.special, self.max_seq_length
        texts_a = [encode(e.text_a) for e in examples]
        if len(self.task.text_columns) == 1:
            x = text_inputs(texts_a, special, length)
        else:
            texts_b = [encode(e.text_b or "") for e in examples]
            pack = similarity_inputs if self.similarity else entailment_inputs
            x = pack(texts_a, texts_b, special, length)
        return glue.EncodedExamples(x, _glue_labels(examples, self.task.labels),
                                    np.arange(len(examples), dtype=np.int32))

    def build_model(self, backbone):
        return GptClassifier(backbone, len(self.task.labels) if self.task.labels else 1,
                             self.special.classify, similarity=self.similarity,
                             lm_coef=self.lm_coef)


class _GptPieces:
    """GPT's BPE in the shape `training.tasks.conll.encode_sentences` reads a tokenizer.

    Each word's pieces are its BPE ids; the row is `_start_ pieces
    _classify_` (GPT's single-text layout) where BERT has `[CLS] pieces
    [SEP]`; padding is id 0 (masked out).
    """

    def __init__(self, tokenizer, special):
        self.encode = tokenizer.encode
        self.cls_token_id = special.start
        self.sep_token_id = special.classify
        self.pad_token_id = 0
        # A word that encodes to nothing still needs a position for its label.
        self.unk_token_id = getattr(tokenizer, "unk_token_id", special.delimiter)

    def tokenize(self, word):
        return self.encode(word)

    def convert_tokens_to_ids(self, ids):
        return list(ids)


class GptNerTask(NerTask):
    """`--model=gpt --task=ner`: CoNLL read as BERT's, rows `_start_ pieces _classify_`,
    tagged by `GptTokenTagger` (left context only). `lm_coef`: the weight of
    the auxiliary LM loss; the other values are `NerTask`'s."""

    def __init__(self, tokenizer, *, lm_coef, **values):
        self.special = FineTuningIds.appended_to(tokenizer.vocab_size)
        self.lm_coef = lm_coef
        super().__init__(_GptPieces(tokenizer, self.special), **values)

    def _encode(self, split):
        encoded = super()._encode(split)
        if "input_type_ids" in encoded.x:  # GPT has no segments
            encoded = dataclasses.replace(encoded, x={
                k: v for k, v in encoded.x.items() if k != "input_type_ids"})
            self._encoded[split] = encoded
        return encoded

    def build_model(self, backbone):
        return GptTokenTagger(backbone, len(self.label_list), lm_coef=self.lm_coef)


class GptSwagTask(SwagTask):
    """`--model=gpt --task=swag`: each ending is a row `_start_ sent1
    _delimiter_ sent2 ending_k _classify_` (GPT's multiple-choice layout,
    split as BERT's: sent2 goes with the ending it begins), `(N, 4, S)`.
    `lm_coef`: the weight of the auxiliary LM loss; the other values are
    `SwagTask`'s."""

    def __init__(self, tokenizer, *, lm_coef, **values):
        super().__init__(tokenizer, **values)
        self.lm_coef = lm_coef
        self.special = FineTuningIds.appended_to(tokenizer.vocab_size)

    def _encode(self, examples):
        encode = self.tokenizer.encode
        contexts = [encode(e.context) for e in examples]
        choices = [[encode(f"{e.start} {ending}") for ending in e.endings] for e in examples]
        x = multiple_choice_inputs(contexts, choices, self.special, self.max_seq_length)
        labeled = examples and examples[0].label is not None
        y = np.asarray([e.label for e in examples], np.int32) if labeled else None
        return swag.EncodedSwag(x, y)

    def build_model(self, backbone):
        return GptMultipleChoice(backbone, self.special.classify, lm_coef=self.lm_coef)


class GptTextClassificationTask(GptGlueTask, TextClassificationTask):
    """`--model=gpt --task=text_classification`: your files as GPT reads GLUE
    (`_start_ text _classify_`; pairs `_start_ a _delimiter_ b _classify_`)."""


def make_gpt_task(cfg, tokenizer):
    """The task object for `--model=gpt` (`glue/<name>`, `text_classification`, `ner` or
    `swag`): `task_values` of `cfg` and its `lm_coef`."""
    values = {**task_values(cfg), "lm_coef": cfg.lm_coef}
    if cfg.task.startswith("glue/"):
        return GptGlueTask(tokenizer, cfg.task.split("/", 1)[1], **values)
    if cfg.task == "text_classification":
        return GptTextClassificationTask(tokenizer, cfg.task, **values)
    tasks = {"ner": GptNerTask, "swag": GptSwagTask}
    if cfg.task not in tasks:
        raise SystemExit(f"Unknown --task={cfg.task!r} for --model=gpt: use glue/<name> "
                         f"({', '.join(sorted(glue.TASKS))}), ner or swag.")
    return tasks[cfg.task](tokenizer, **values)


class GptFinetune(FinetuneRecipe):
    """`--model=gpt`: the original `train.py`'s defaults, BPE, GPT's tasks and export."""

    name = "gpt"
    adam_epsilon = GPT_ADAM_EPSILON
    learning_rate = GPT_LEARNING_RATE
    warmup_proportion = GPT_WARMUP_PROPORTION
    flags = FinetuneRecipe.flags + ("merges_file", "lm_coef")

    @classmethod
    def resolve_own(cls, cfg):
        refuse_elmo_flags(cfg)
        return resolve_gpt(cfg)

    def tokenizer(self):
        return GptTokenizer(self.flag.vocab_file, self.flag.merges_file)

    def make_task(self, tokenizer):
        return make_gpt_task(self.flag, tokenizer)

    def build_backbone(self, vocab_size):
        return build_gpt_backbone(self.flag, vocab_size)

    def describe(self):
        return f", lm_coef {self.flag.lm_coef:g}"

    def export(self, model, saved_model_dir, labels):
        flag = self.flag
        export_gpt_saved_model(model, saved_model_dir, flag.vocab_file, flag.merges_file,
                               flag.max_seq_length, labels=labels)

    def runtime_tokenizer(self):
        return runtime_tokenizer(self.flag.vocab_file, self.flag.merges_file)


RECIPE = GptFinetune
