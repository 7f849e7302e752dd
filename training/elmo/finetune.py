"""ELMo's side of fine-tuning (`training.finetune --model=elmo`): defaults, biLM, tasks.

Everything `--model=elmo` (ELMo as features: a frozen biLM, a scalar mix and
a BiLSTM task network, `keras_bert_impl.elmo.elmo_task_models`) does
differently from BERT's fine-tuning, in one place: its defaults (`ELMO_*`),
`elmo_checkpoint_files` and `resolve_elmo` (its refusals; bilm-tf's files
located), `build_elmo_backbone` (the biLM the task models freeze) and the
tasks (`ElmoGlueTask`, `ElmoNerTask`; no SQuAD or SWAG). GLUE and CoNLL are
read as BERT's tasks (`training.finetuning.tasks`) read them; the rows are
whole words (`<S> words </S>`: ELMo reads characters, not WordPieces), kept
as rows of a word table and turned into character ids batch by batch.

`training.finetuning.recipe.finetune_recipe` picks this module's `RECIPE`
for `--model=elmo`; it imports the helpers and base classes it builds on
at the top.
"""

import dataclasses
import glob
import os

import numpy as np
import tensorflow as tf

from keras_bert_impl.elmo import ELMO_PRESETS
from keras_bert_impl.elmo import ElmoBackbone
from keras_bert_impl.elmo import elmo_preset
from keras_bert_impl.elmo import load_elmo_checkpoint
from keras_bert_impl.elmo.char_ids import BOS_TOKEN
from keras_bert_impl.elmo.char_ids import EOS_TOKEN
from keras_bert_impl.elmo.char_ids import token_char_ids
from keras_bert_impl.elmo.elmo_checkpoint import elmo_hdf5_variables
from keras_bert_impl.elmo.elmo_task_models import DEFAULT_LSTM_UNITS
from keras_bert_impl.elmo.elmo_task_models import ElmoClassifier
from keras_bert_impl.elmo.elmo_task_models import ElmoPairClassifier
from keras_bert_impl.elmo.elmo_task_models import ElmoTokenTagger
from keras_bert_impl.elmo.elmo_task_serving import export_elmo_task_saved_model
from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer
from tf_records.plain import plain
from training.elmo.recipe import EXPORT_REFUSAL
from training.finetuning.recipe import FinetuneRecipe
from training.finetuning.recipe import backbone_in_keras_file
from training.finetuning.recipe import check_start
from training.finetuning.recipe import run_dtype
from training.finetuning.tasks import GlueTask
from training.finetuning.tasks import NerTask
from training.finetuning.tasks import _glue_labels
from training.finetuning.tasks import _say
from training.finetuning.tasks import task_values
from training.finetuning.text_classification import TextClassificationTask
from training.tasks import conll
from training.tasks import glue

# `--model=elmo`: the task network trains from scratch on frozen features,
# as AllenNLP's ELMo taggers and classifiers (Adam, lr 1e-3, no weight
# decay), far above fine-tuning's rates; no warmup.
ELMO_LEARNING_RATE = 1e-3
ELMO_WARMUP_PROPORTION = 0.0
ELMO_WEIGHT_DECAY = 0.0
# bilm-tf's README dumps weights.hdf5; its test model and our pretraining
# export (`training.pretrain --model=elmo`) hold lm_weights.hdf5.
ELMO_OPTIONS_FILE = "options.json"
ELMO_WEIGHT_FILES = ("weights.hdf5", "lm_weights.hdf5")


def elmo_checkpoint_files(path):
    """`(options.json, weight file)` of an ELMo `--init_checkpoint`.

    A folder: its `options.json` (else its one `*options.json`, as the
    published models name them) and `weights.hdf5` or `lm_weights.hdf5`
    (else its one `*weights.hdf5`). A `.hdf5` file: itself, with the
    options found so beside it.
    """
    if not os.path.exists(path):
        raise SystemExit(f"--init_checkpoint={path} does not exist.")
    folder, weights = (path, None) if os.path.isdir(path) else (os.path.dirname(path), path)

    def one(names, pattern, what):
        for name in names:
            if os.path.isfile(os.path.join(folder, name)):
                return os.path.join(folder, name)
        found = sorted(glob.glob(os.path.join(folder, pattern)))
        if len(found) == 1:
            return found[0]
        raise SystemExit(
            f"--model=elmo: no {what} in {folder or '.'}: expected {' or '.join(names)}"
            f"{f', or one {pattern} (found {len(found)})' if found else ''}. --init_checkpoint "
            "takes a folder with bilm-tf's options.json and (lm_)weights.hdf5, or the weight "
            "file.")

    options = one((ELMO_OPTIONS_FILE,), "*options.json", "options file")
    if weights is None:
        weights = one(ELMO_WEIGHT_FILES, "*weights.hdf5", "weight file")
    return options, weights


def resolve_elmo(cfg):
    """`--model=elmo`: refusals of what it does not do; the checkpoint located."""
    if cfg.task in ("squad", "swag"):
        raise SystemExit(f"--task={cfg.task} is not built for --model=elmo (the ELMo paper's "
                         "BiDAF and ESIM models are not here): use glue/<name> or ner.")
    if cfg.vocab_file or cfg.merges_file or cfg.lm_coef >= 0:
        raise SystemExit("--vocab_file, --merges_file and --lm_coef are not ELMo's: it reads "
                         "characters, with no vocabulary and no auxiliary LM loss.")
    check_start("elmo", cfg.init_checkpoint, cfg.preset, ELMO_PRESETS, "an ELMo",
                "--init_checkpoint (a folder with bilm-tf's options.json and lm_weights.hdf5, "
                "e.g. `training.pretrain --model=elmo`'s export folder) or --preset=elmo_tiny "
                "(a random biLM): no ELMo is installed offline.", not_both=True)
    if cfg.max_seq_length < 3:
        raise SystemExit(f"--max_seq_length={cfg.max_seq_length} leaves no word: ELMo's rows "
                         "are <S> words </S>.")
    if cfg.init_checkpoint and not cfg.init_checkpoint.endswith(".keras"):
        elmo_checkpoint_files(cfg.init_checkpoint)  # fails now, not after reading the data
    return dataclasses.replace(cfg, elmo_lstm_units=cfg.elmo_lstm_units or DEFAULT_LSTM_UNITS)


def build_elmo_backbone(cfg):
    """The biLM ELMo's task models freeze: bilm-tf files, a `.keras` ELMo model, or a preset."""
    dtype = run_dtype(cfg.mixed_precision)
    if not cfg.init_checkpoint:
        _say(f"Warning: --model=elmo from --preset={cfg.preset}: a randomly initialized biLM, "
            "frozen, gives random features (smoke tests only).")
        return ElmoBackbone.from_config_object(elmo_preset(cfg.preset), dtype=dtype)
    if cfg.init_checkpoint.endswith(".keras"):
        backbone = backbone_in_keras_file(cfg.init_checkpoint, ElmoBackbone, "ELMo biLM")
        # A stateless copy in this run's dtype (the task model freezes it).
        rebuilt = ElmoBackbone.from_config_object(backbone.elmo_config, dtype=dtype)
        source = elmo_hdf5_variables(backbone)
        for name, variable in elmo_hdf5_variables(rebuilt).items():
            variable.assign(source[name])
        return rebuilt
    options, weights = elmo_checkpoint_files(cfg.init_checkpoint)
    return load_elmo_checkpoint(options, weights, dtype=dtype)


class _ElmoWords:
    """Words as the rows of one table; a row's ELMo character ids are looked up late.

    Shaped as `training.tasks.conll.encode_sentences` reads a tokenizer: each word is
    one "piece" whose id is its row, `<S>` (row 1) and `</S>` (row 2) stand
    where BERT's `[CLS]` and `[SEP]` stand, and 0 is padding (ELMo's
    all-zero padding token). Rows of word ids are small; `char_table`
    gives each row's character ids, gathered batch by batch, so a data
    set's `(N, T, 50)` character ids are never held at once.
    """

    pad_token_id = 0
    cls_token_id = 1
    sep_token_id = 2

    def __init__(self):
        self.words = ["", BOS_TOKEN, EOS_TOKEN]  # row 0: padding
        self.ids = {BOS_TOKEN: 1, EOS_TOKEN: 2}
        self._table = None

    def tokenize(self, word):
        return [word]  # a CoNLL word is a whole ELMo token

    def convert_tokens_to_ids(self, words):
        ids = []
        for word in words:
            if word not in self.ids:
                self.ids[word] = len(self.words)
                self.words.append(word)
            ids.append(self.ids[word])
        return ids

    def rows(self, texts, length):
        """int32 `(N, length)`: `<S> words </S>` per text (lists of words that fit), 0 after."""
        ids = np.zeros((len(texts), length), np.int32)
        for i, words in enumerate(texts):
            ids[i, :len(words) + 2] = [1, *self.convert_tokens_to_ids(words), 2]
        return ids

    def char_table(self, max_chars):
        """int32 `(rows, max_chars)`: every word's character ids, row 0 zeros."""
        if self._table is None or self._table.shape != (len(self.words), max_chars):
            table = np.zeros((len(self.words), max_chars), np.int32)
            table[1:] = token_char_ids(self.words[1:], max_chars)  # <S>, </S>: boundary ids
            self._table = table
        return self._table


class _ElmoTask:
    """What the ELMo tasks share: rows of word-table ids -> `char_ids` batches.

    Their `x` is `input_word_ids` (rows of `_ElmoWords`, `(N, T)` or
    `(N, 2, T)`) and `input_mask` (1 on `<S> words </S>`), so the entry
    point's length grouping cuts their batches as BERT's. Each task sets
    `words`, `seed` (`--seed`), `batch_size` and `elmo_lstm_units`.
    """

    def char_id_batches(self, model, x, y=None, sample_weight=None, batch_size=None,
                        shuffle=False):
        """`({"char_ids": (B, ..., T, C)}, ...)` batches from word rows.

        Args:
            model: the ELMo task model (its biLM gives C).
            x: dict of word-row arrays, or a `tf.data.Dataset` of batches
                `(x, ...)` of them (e.g. `grouped_batches`).
            y, sample_weight: arrays, or None (prediction); with arrays only.
            batch_size: int. Rows per batch; None: the task's (`--batch_size`).
            shuffle: bool. Shuffle the rows each epoch (seeded by `--seed`).
        """
        table = tf.constant(self.words.char_table(model.backbone.max_characters_per_token))
        batches = x
        if not isinstance(x, tf.data.Dataset):
            data = (x,) if y is None else (x, y) if sample_weight is None else (
                x, y, sample_weight)
            batches = tf.data.Dataset.from_tensor_slices(data)
            if shuffle:
                batches = batches.shuffle(len(x["input_word_ids"]), seed=self.seed,
                                          reshuffle_each_iteration=True)
            batches = batches.batch(batch_size or self.batch_size)

        def char_ids(x, *targets):
            return ({"char_ids": tf.gather(table, x["input_word_ids"])}, *targets)  # (B, ..., T, C)

        return batches.map(plain(char_ids)).prefetch(tf.data.AUTOTUNE)

    def _predict(self, model, x):
        return model.predict(self.char_id_batches(model, x), verbose=0)


class ElmoGlueTask(_ElmoTask, GlueTask):
    """`--model=elmo --task=glue/<name>`: GLUE read as BERT's, each text split into
    words by BERT's basic tokenization without lowercasing (ELMo is cased).

    One text: rows `<S> words </S>` `(N, T)` for `ElmoClassifier`; pairs:
    both texts, `(N, 2, T)`, for `ElmoPairClassifier`. A text of more than
    `max_seq_length - 2` words is truncated (counted and reported); no windows.
    `elmo_lstm_units`: the task network's; `seed`: the shuffle's; the other
    values are the base task's.
    """

    def __init__(self, tokenizer, name, *, elmo_lstm_units, seed, window_stride=0, **values):
        if window_stride:
            raise SystemExit("--window_stride reads long GLUE inputs in windows for BERT only; "
                             "with --model=elmo texts are truncated to max_seq_length - 2 words. "
                             "Leave it 0.")
        super().__init__(tokenizer, name, window_stride=window_stride, **values)
        self.elmo_lstm_units, self.seed = elmo_lstm_units, seed
        self.words = _ElmoWords()
        self.pair = len(self.task.text_columns) == 2

    def _encode(self, examples):
        limit = self.max_seq_length - 2  # room for <S> and </S>
        texts = [[self.tokenizer.tokenize(e.text_a) for e in examples]]
        if self.pair:
            texts.append([self.tokenizer.tokenize(e.text_b or "") for e in examples])
        cut = sum(len(words) > limit for column in texts for words in column)
        if cut:
            _say(f"ELMo: {cut} of {len(examples)} examples' texts are longer than {limit} words "
                 f"(--max_seq_length={self.max_seq_length} with <S> and </S>); truncated.")
        length = min(max((len(w) for column in texts for w in column), default=0), limit) + 2
        rows = [self.words.rows([w[:limit] for w in column], length) for column in texts]
        ids = np.stack(rows, axis=1) if self.pair else rows[0]  # (N, 2, T) or (N, T)
        x = {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32)}
        return glue.EncodedExamples(x, _glue_labels(examples, self.task.labels),
                                    np.arange(len(examples), dtype=np.int32))

    def build_model(self, backbone):
        model = ElmoPairClassifier if self.pair else ElmoClassifier
        return model(backbone, len(self.task.labels) if self.task.labels else 1,
                     lstm_units=self.elmo_lstm_units)


class ElmoNerTask(_ElmoTask, NerTask):
    """`--model=elmo --task=ner`: CoNLL's words as they are, rows `<S> words </S>`,
    tagged by `ElmoTokenTagger`; labels, windows and decoding as BERT's, one
    label per word (every word is one token: no first-piece rule needed).
    `tokenizer` is unused (the words are CoNLL's); `elmo_lstm_units`: the
    task network's; `seed`: the shuffle's; the other values are `NerTask`'s."""

    def __init__(self, tokenizer, *, elmo_lstm_units, seed, **values):
        del tokenizer  # CoNLL's words as they are
        self.elmo_lstm_units, self.seed = elmo_lstm_units, seed
        self.words = _ElmoWords()
        super().__init__(self.words, **values)

    def _encode(self, split):
        if split not in self._encoded:
            encoded = conll.encode_sentences(
                self._data[split].sentences, self.words, self.label_list,
                self.max_seq_length, stride=self.window_stride or None)
            ids = encoded.x["input_word_ids"]  # (N, S): <S> words </S>, 0 after
            length = max(int(encoded.x["input_mask"].sum(axis=1).max(initial=0)), 2)  # longest

            def cut(array):
                return array[:, :length]

            encoded = dataclasses.replace(
                encoded, x={"input_word_ids": cut(ids), "input_mask": cut(encoded.x["input_mask"])},
                y=cut(encoded.y),
                sample_weight=cut(encoded.sample_weight), word_index=cut(encoded.word_index),
                max_context=cut(encoded.max_context))
            if encoded.num_truncated_words:
                _say(f"ELMo: {encoded.num_truncated_words} words of {split} are past "
                     f"--max_seq_length={self.max_seq_length} (with <S> and </S>) and are "
                     "predicted as 'O'; --window_stride reads them in windows.")
            self._encoded[split] = encoded
        return self._encoded[split]

    def build_model(self, backbone):
        return ElmoTokenTagger(backbone, len(self.label_list),
                               lstm_units=self.elmo_lstm_units)


class ElmoTextClassificationTask(ElmoGlueTask, TextClassificationTask):
    """`--model=elmo --task=text_classification`: your files as ELMo reads GLUE
    (words of each text, `ElmoClassifier`; pairs `ElmoPairClassifier`)."""


def make_elmo_task(cfg, tokenizer):
    """The task object for `--model=elmo` (`glue/<name>`, `text_classification` or `ner`):
    `task_values` of `cfg`, its `elmo_lstm_units` and `seed`."""
    values = {**task_values(cfg), "elmo_lstm_units": cfg.elmo_lstm_units, "seed": cfg.seed}
    if cfg.task.startswith("glue/"):
        return ElmoGlueTask(tokenizer, cfg.task.split("/", 1)[1], **values)
    if cfg.task == "text_classification":
        return ElmoTextClassificationTask(tokenizer, cfg.task, **values)
    if cfg.task != "ner":
        raise SystemExit(f"Unknown --task={cfg.task!r} for --model=elmo: use glue/<name> "
                         f"({', '.join(sorted(glue.TASKS))}) or ner.")
    return ElmoNerTask(tokenizer, **values)


class ElmoFinetune(FinetuneRecipe):
    """`--model=elmo`: the frozen biLM's features under a BiLSTM, Adam at 1e-3."""

    name = "elmo"
    learning_rate = ELMO_LEARNING_RATE
    warmup_proportion = ELMO_WARMUP_PROPORTION
    weight_decay = ELMO_WEIGHT_DECAY
    hub_checkpoints = False  # bilm-tf's files; none is on the Hub
    flags = FinetuneRecipe.flags + ("elmo_lstm_units", "seed")

    @classmethod
    def resolve_own(cls, cfg):
        return resolve_elmo(cfg)

    def tokenizer(self):
        return BasicTokenizer(do_lower_case=False)  # ELMo reads cased words

    def make_task(self, tokenizer):
        return make_elmo_task(self.flag, tokenizer)

    def build_backbone(self, vocab_size):
        del vocab_size  # characters: no vocabulary
        return build_elmo_backbone(self.flag)

    def describe(self):
        return f", BiLSTM {self.flag.elmo_lstm_units}"

    def epoch_batches(self, task, model, batches):
        return task.char_id_batches(model, batches)  # rows of word ids -> character ids

    def export(self, model, saved_model_dir, labels):
        export_elmo_task_saved_model(model, saved_model_dir, labels=labels,
                                     max_seq_length=self.flag.max_seq_length)

    # Measured (`docs/serving.md`): its LSTMs trace as a TensorFlow while
    # loop over TensorLists, which OpenVINO's converter does not take and
    # LiteRT runs only as Flex ops.
    export_formats = ("saved_model",)
    export_refusal = EXPORT_REFUSAL


RECIPE = ElmoFinetune
