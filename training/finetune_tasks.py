"""The fine-tuning entry point's tasks: files in, model, metric, predictions out.

One small class per kind of task (GLUE, SQuAD, CoNLL NER, SWAG), each with
the same five methods the entry point calls in order:

- `train_arrays()` -> `(x, y, sample_weight or None)` for `model.fit`,
- `build_model(backbone)` -> the task model (compiled by the caller),
- `eval_splits` -> the labelled splits scored each epoch (`prepare(split)`
  reads and encodes one ahead of training),
- `evaluate(model, split)` -> `(metrics, predictions)` with the official metric
  (on the scale its script prints: GLUE and SWAG 0..1, SQuAD and conlleval 0..100),
- `write_predictions(model, folder)` -> paths written in the official formats.

With `--model=gpt` the same tasks read their files the same way and are
scored, written and exported the same way; only the encoding (GPT's input
transformations, `keras_bert_impl.gpt.gpt_inputs`) and the model differ
(`GptGlueTask`, `GptNerTask`, `GptSwagTask`; SQuAD is BERT's only).

With `--model=elmo` (ELMo as features: a frozen biLM, a scalar mix and a
BiLSTM task network, `keras_bert_impl.elmo.elmo_task_models`) GLUE and
CoNLL are read the same way too; the rows are whole words (`<S> words
</S>`, ELMo reads characters, not WordPieces), kept as rows of a word table
and turned into character ids batch by batch (`ElmoGlueTask`, `ElmoNerTask`;
no SQuAD or SWAG).

The data and metrics live in `tasks/`; this file only wires them together.
"""

import dataclasses
import glob
import os

import numpy as np

from keras_bert_impl import BertClassifier
from keras_bert_impl import BertMultipleChoice
from keras_bert_impl import BertQuestionAnswerer
from keras_bert_impl import BertTokenTagger
from keras_bert_impl.elmo.char_ids import BOS_TOKEN
from keras_bert_impl.elmo.char_ids import EOS_TOKEN
from keras_bert_impl.elmo.char_ids import token_char_ids
from keras_bert_impl.elmo.elmo_task_models import ElmoClassifier
from keras_bert_impl.elmo.elmo_task_models import ElmoPairClassifier
from keras_bert_impl.elmo.elmo_task_models import ElmoTokenTagger
from keras_bert_impl.gpt.gpt_inputs import FineTuningIds
from keras_bert_impl.gpt.gpt_inputs import entailment_inputs
from keras_bert_impl.gpt.gpt_inputs import multiple_choice_inputs
from keras_bert_impl.gpt.gpt_inputs import similarity_inputs
from keras_bert_impl.gpt.gpt_inputs import text_inputs
from keras_bert_impl.gpt.gpt_task_models import GptClassifier
from keras_bert_impl.gpt.gpt_task_models import GptMultipleChoice
from keras_bert_impl.gpt.gpt_task_models import GptTokenTagger
from tasks import conll
from tasks import conll_metrics
from tasks import glue
from tasks import glue_metrics
from tasks import squad
from tasks import squad_metrics
from tasks import swag

# The paper's fine-tuning settings (Sec. 4, Appendix A.3): learning rates
# from its grid {5e-5, 3e-5, 2e-5}: GLUE 5e-5 (the original
# run_classifier.py default), SQuAD 3e-5 (the original README's run),
# SWAG 2e-5 (Sec. 4.4), NER 5e-5.
DEFAULT_LEARNING_RATE = {"glue": 5e-5, "squad": 3e-5, "ner": 5e-5, "swag": 2e-5}
DEFAULT_MAX_SEQ_LENGTH = {"glue": 128, "squad": 384, "ner": 128, "swag": 128}

# The GLUE tasks GPT reads with its similarity transformation (both orders,
# final states added): the GPT paper's semantic-similarity tasks (Sec. 4.1:
# MRPC, QQP, STS-B). Its other pair tasks use the entailment layout.
GPT_SIMILARITY_TASKS = ("MRPC", "QQP", "STS-B")


def _say(message):
    print(message, flush=True)


def _find(data_dir, names, what):
    for name in names:
        matches = sorted(glob.glob(os.path.join(data_dir, name)))
        if matches:
            return matches[0]
    raise SystemExit(f"No {what} in {data_dir}: expected one of {list(names)}.")


def _maybe_find(data_dir, names):
    try:
        return _find(data_dir, names, "")
    except SystemExit:
        return None


def _report_skipped(num_skipped, path):
    if num_skipped:
        _say(f"Skipped {num_skipped} bad rows in {path} (--skip_bad_input).")


def _predict(model, x, batch_size):
    return model.predict(x, batch_size=batch_size, verbose=0)


def _write_lines(path, lines):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.writelines(lines)
    os.replace(path + ".tmp", path)


class GlueTask:
    """`--task=glue/<name>`: `<data_dir>/{train,dev,test}.tsv` as GLUE lays them out."""

    kind = "glue"

    def __init__(self, cfg, tokenizer, name):
        self.cfg, self.tokenizer, self.task = cfg, tokenizer, glue.get_task(name)
        self.eval_splits = [s for s in self.task.splits if s.startswith("dev")
                            and os.path.exists(self._path(s))]
        self._cache = {}

    def _path(self, split):
        return os.path.join(self.cfg.data_dir, f"{split}.tsv")

    def _encoded(self, split):
        if split not in self._cache:
            examples, skipped = glue.read_glue(self.task, self.cfg.data_dir, split,
                                               skip_bad_rows=self.cfg.skip_bad_input)
            _report_skipped(skipped, self._path(split))
            self._cache[split] = (examples, self._encode(examples))
        return self._cache[split]

    def _encode(self, examples):
        return glue.encode_examples(examples, self.tokenizer, self.task.labels,
                                    self.cfg.max_seq_length,
                                    stride=self.cfg.window_stride or None)

    def prepare(self, split):
        self._encoded(split)

    def train_arrays(self):
        _, encoded = self._encoded("train")
        return encoded.x, encoded.y, None

    def build_model(self, backbone):
        return BertClassifier(backbone, len(self.task.labels) if self.task.labels else 1)

    def _predict(self, model, x):
        return _predict(model, x, self.cfg.batch_size)

    def _logits(self, model, split):
        examples, encoded = self._encoded(split)
        rows = self._predict(model, encoded.x)
        return examples, encoded, glue.merge_window_logits(rows, encoded.example_index,
                                                           len(examples))

    def evaluate(self, model, split):
        examples, encoded, logits = self._logits(model, split)
        labels = np.zeros(len(examples), encoded.y.dtype)
        labels[encoded.example_index] = encoded.y  # every window carries its example's label
        return glue_metrics.glue_metrics(self.task, logits, labels), logits

    def write_predictions(self, model, folder):
        paths = []
        for split in self.eval_splits:
            examples, _, logits = self._logits(model, split)
            values = glue.decode_predictions(self.task, logits)
            answers = values if self.task.labels is None else [self.task.labels[v] for v in values]
            path = os.path.join(folder, f"{split}_predictions.tsv")
            _write_lines(path, ["guid\tprediction\tlabel\n"] + [
                f"{e.guid}\t{a}\t{e.label}\n" for e, a in zip(examples, answers)])
            paths.append(path)
        for split in self.task.submissions:
            if os.path.exists(self._path(split)):
                _, _, logits = self._logits(model, split)
                paths.append(glue.write_submission_tsv(os.path.join(folder, "glue_submission"),
                                                       self.task, logits, split=split))
        return paths


class SquadTask:
    """`--task=squad`: `train-v*.json` and `dev-v*.json` in the official format.

    v2.0 (questions may have no answer) is read from the file name or its
    "version" field; its null-score threshold is searched on dev each time
    dev is scored, as the paper tuned it.
    """

    kind = "squad"

    def __init__(self, cfg, tokenizer):
        self.cfg, self.tokenizer = cfg, tokenizer
        self.train_file = _maybe_find(cfg.data_dir, ("train-v*.json", "train*.json"))
        self.dev_file = _maybe_find(cfg.data_dir, ("dev-v*.json", "dev*.json"))
        some = self.train_file or self.dev_file
        if some is None:
            raise SystemExit(f"No SQuAD train-v*.json or dev-v*.json in {cfg.data_dir}.")
        self.version_2 = "v2" in os.path.basename(some) or str(
            _json_version(some)).startswith("v2")
        self.eval_splits = ["dev"] if self.dev_file else []
        self._cache = {}

    def train_arrays(self):
        if not self.train_file:
            raise SystemExit(f"No SQuAD training file (train-v*.json) in {self.cfg.data_dir}.")
        examples, skipped = squad.read_squad_examples(
            self.train_file, True, self.version_2, skip_bad_answers=self.cfg.skip_bad_input)
        _report_skipped(skipped, self.train_file)
        features = squad.convert_examples_to_features(
            examples, self.tokenizer, self.cfg.max_seq_length, self.cfg.doc_stride,
            self.cfg.max_query_length, is_training=True)
        return features.x, features.y, None

    def build_model(self, backbone):
        return BertQuestionAnswerer(backbone)

    def prepare(self, split):
        self._dev()

    def _dev(self):
        if "dev" not in self._cache:
            examples, _ = squad.read_squad_examples(self.dev_file, False, self.version_2)
            features = squad.convert_examples_to_features(
                examples, self.tokenizer, self.cfg.max_seq_length, self.cfg.doc_stride,
                self.cfg.max_query_length, is_training=False)
            self._cache["dev"] = (examples, features, squad.load_squad_json(self.dev_file))
        return self._cache["dev"]

    def evaluate(self, model, split):
        examples, features, dataset = self._dev()
        out = _predict(model, features.x, self.cfg.batch_size)
        decode = dict(n_best_size=self.cfg.n_best_size,
                      max_answer_length=self.cfg.max_answer_length,
                      do_lower_case=self.cfg.do_lower_case, version_2_with_negative=self.version_2)
        predictions, nbest, null_odds = squad.decode_predictions(
            examples, features, out["start_logits"], out["end_logits"], **decode)
        if not self.version_2:
            return squad_metrics.evaluate_v1(dataset, predictions), (predictions, nbest, null_odds)
        threshold = squad_metrics.search_null_threshold(dataset, nbest, null_odds)
        predictions, nbest, null_odds = squad.decode_predictions(
            examples, features, out["start_logits"], out["end_logits"],
            null_score_diff_threshold=threshold, **decode)
        metrics = squad_metrics.evaluate_v2(dataset, predictions, na_probs=null_odds)
        metrics["null_score_diff_threshold"] = threshold
        return metrics, (predictions, nbest, null_odds)

    def write_predictions(self, model, folder):
        if not self.dev_file:
            return []
        _, (predictions, nbest, null_odds) = self.evaluate(model, "dev")
        paths = [os.path.join(folder, "predictions.json"),
                 os.path.join(folder, "nbest_predictions.json")]
        squad.write_predictions_json(paths[0], predictions)
        squad.write_predictions_json(paths[1], nbest)
        if self.version_2:
            paths.append(os.path.join(folder, "null_odds.json"))
            squad.write_predictions_json(paths[-1], null_odds)
        return paths


def _json_version(path):
    import json

    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f).get("version", "")
        except (json.JSONDecodeError, AttributeError):
            return ""


class NerTask:
    """`--task=ner`: CoNLL-2003 column files (`eng.train`/`train.txt`, `eng.testa`/`dev.txt`)."""

    kind = "ner"

    def __init__(self, cfg, tokenizer):
        self.cfg, self.tokenizer = cfg, tokenizer
        self.files = {"train": _find(cfg.data_dir, ("train.txt", "eng.train"), "CoNLL train file")}
        dev = _maybe_find(cfg.data_dir, ("dev.txt", "valid.txt", "eng.testa"))
        test = _maybe_find(cfg.data_dir, ("test.txt", "eng.testb"))
        self.files.update({k: v for k, v in (("dev", dev), ("test", test)) if v})
        self.eval_splits = [s for s in ("dev", "test") if s in self.files]
        self._data = {}
        for split, path in self.files.items():
            data = conll.read_conll(path, skip_bad_lines=self.cfg.skip_bad_input)
            if data.skipped_lines:
                _report_skipped(len(data.skipped_lines), path)
            self._data[split] = data
        # Every tag of every file, sorted: ids stay the same across runs.
        self.label_list = tuple(sorted({t for d in self._data.values() for t in d.label_list}))
        self._encoded = {}

    def _encode(self, split):
        if split not in self._encoded:
            self._encoded[split] = conll.encode_sentences(
                self._data[split].sentences, self.tokenizer, self.label_list,
                self.cfg.max_seq_length, stride=self.cfg.window_stride or None)
        return self._encoded[split]

    def train_arrays(self):
        encoded = self._encode("train")
        return encoded.x, encoded.y, encoded.sample_weight

    def build_model(self, backbone):
        return BertTokenTagger(backbone, len(self.label_list))

    def prepare(self, split):
        self._encode(split)

    def _predict(self, model, x):
        return _predict(model, x, self.cfg.batch_size)

    def evaluate(self, model, split):
        encoded = self._encode(split)
        logits = self._predict(model, encoded.x)
        predicted = conll.decode_predictions(logits, encoded, self.label_list)
        gold = [list(s.labels) for s in self._data[split].sentences]
        metrics = conll_metrics.conlleval(gold, predicted)
        metrics.pop("per_type", None)
        return metrics, predicted

    def write_predictions(self, model, folder):
        paths = []
        for split in self.eval_splits:
            _, predicted = self.evaluate(model, split)
            path = os.path.join(folder, f"{split}_predictions.txt")
            conll.write_predictions(path, self._data[split].sentences, predicted)
            paths.append(path)
        return paths


class SwagTask:
    """`--task=swag`: `train.csv`, `val.csv` (and `test.csv`) in SWAG's format."""

    kind = "swag"

    def __init__(self, cfg, tokenizer):
        self.cfg, self.tokenizer = cfg, tokenizer
        self.files = {"train": _find(cfg.data_dir, ("train.csv",), "SWAG train.csv")}
        for split, name in (("val", "val.csv"), ("test", "test.csv")):
            path = _maybe_find(cfg.data_dir, (name,))
            if path:
                self.files[split] = path
        self.eval_splits = ["val"] if "val" in self.files else []
        self._cache = {}

    def _encoded(self, split):
        if split not in self._cache:
            examples, skipped = swag.read_swag(self.files[split],
                                               skip_bad_rows=self.cfg.skip_bad_input)
            _report_skipped(skipped, self.files[split])
            self._cache[split] = (examples, self._encode(examples))
        return self._cache[split]

    def _encode(self, examples):
        return swag.encode_swag(examples, self.tokenizer, self.cfg.max_seq_length)

    def train_arrays(self):
        _, encoded = self._encoded("train")
        return encoded.x, encoded.y, None

    def build_model(self, backbone):
        return BertMultipleChoice(backbone)

    def prepare(self, split):
        self._encoded(split)

    def evaluate(self, model, split):
        _, encoded = self._encoded(split)
        choice = np.asarray(_predict(model, encoded.x, self.cfg.batch_size)).argmax(-1)
        return {"accuracy": float((choice == encoded.y).mean())}, choice

    def write_predictions(self, model, folder):
        paths = []
        for split in [s for s in ("val", "test") if s in self.files]:
            examples, encoded = self._encoded(split)
            choice = np.asarray(_predict(model, encoded.x, self.cfg.batch_size)).argmax(-1)
            path = os.path.join(folder, f"{split}_predictions.csv")
            _write_lines(path, ["guid,prediction\n"] + [
                f"{e.guid},{c}\n" for e, c in zip(examples, choice)])
            paths.append(path)
        return paths


class GptGlueTask(GlueTask):
    """`--model=gpt --task=glue/<name>`: GLUE read with GPT's input transformations.

    One text: `_start_ s _classify_`; MRPC, QQP and STS-B: both orders of
    the pair, `(N, 2, S)`, into `GptClassifier(similarity=True)`; the other
    pair tasks: `_start_ a _delimiter_ b _classify_`. Long inputs are
    truncated (longer part first); no windows.
    """

    def __init__(self, cfg, tokenizer, name):
        if cfg.window_stride:
            raise SystemExit("--window_stride reads long GLUE inputs in windows for BERT only; "
                             "with --model=gpt they are truncated, as the original. Leave it 0.")
        super().__init__(cfg, tokenizer, name)
        self.special = FineTuningIds.appended_to(tokenizer.vocab_size)
        self.similarity = self.task.name in GPT_SIMILARITY_TASKS

    def _encode(self, examples):
        encode, special, length = self.tokenizer.encode, self.special, self.cfg.max_seq_length
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
                             lm_coef=self.cfg.lm_coef)


def _glue_labels(examples, labels):
    """int32 label ids, float32 scores (regression), or None (test files)."""
    if not examples or examples[0].label is None:
        return None
    if labels is None:
        return np.asarray([float(e.label) for e in examples], np.float32)
    ids = {label: i for i, label in enumerate(labels)}
    return np.asarray([ids[e.label] for e in examples], np.int32)  # the reader checked them


class _GptPieces:
    """GPT's BPE in the shape `tasks.conll.encode_sentences` reads a tokenizer.

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
    tagged by `GptTokenTagger` (left context only)."""

    def __init__(self, cfg, tokenizer):
        self.special = FineTuningIds.appended_to(tokenizer.vocab_size)
        super().__init__(cfg, _GptPieces(tokenizer, self.special))

    def _encode(self, split):
        encoded = super()._encode(split)
        if "input_type_ids" in encoded.x:  # GPT has no segments
            encoded = dataclasses.replace(encoded, x={
                k: v for k, v in encoded.x.items() if k != "input_type_ids"})
            self._encoded[split] = encoded
        return encoded

    def build_model(self, backbone):
        return GptTokenTagger(backbone, len(self.label_list), lm_coef=self.cfg.lm_coef)


class GptSwagTask(SwagTask):
    """`--model=gpt --task=swag`: each ending is a row `_start_ sent1
    _delimiter_ sent2 ending_k _classify_` (GPT's multiple-choice layout,
    split as BERT's: sent2 goes with the ending it begins), `(N, 4, S)`."""

    def __init__(self, cfg, tokenizer):
        super().__init__(cfg, tokenizer)
        self.special = FineTuningIds.appended_to(tokenizer.vocab_size)

    def _encode(self, examples):
        encode = self.tokenizer.encode
        contexts = [encode(e.context) for e in examples]
        choices = [[encode(f"{e.start} {ending}") for ending in e.endings] for e in examples]
        x = multiple_choice_inputs(contexts, choices, self.special, self.cfg.max_seq_length)
        labeled = examples and examples[0].label is not None
        y = np.asarray([e.label for e in examples], np.int32) if labeled else None
        return swag.EncodedSwag(x, y)

    def build_model(self, backbone):
        return GptMultipleChoice(backbone, self.special.classify, lm_coef=self.cfg.lm_coef)


class _ElmoWords:
    """Words as the rows of one table; a row's ELMo character ids are looked up late.

    Shaped as `tasks.conll.encode_sentences` reads a tokenizer: each word is
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
    point's length grouping cuts their batches as BERT's.
    """

    def char_id_batches(self, model, x, y=None, sample_weight=None, batch_size=None,
                        shuffle=False):
        """`({"char_ids": (B, ..., T, C)}, ...)` batches from word rows.

        Args:
            model: the ELMo task model (its biLM gives C).
            x: dict of word-row arrays, or a `tf.data.Dataset` of batches
                `(x, ...)` of them (e.g. `grouped_batches`).
            y, sample_weight: arrays, or None (prediction); with arrays only.
            batch_size: int. Rows per batch; None: `--batch_size`.
            shuffle: bool. Shuffle the rows each epoch (seeded by `--seed`).
        """
        import tensorflow as tf

        table = tf.constant(self.words.char_table(model.backbone.max_characters_per_token))
        batches = x
        if not isinstance(x, tf.data.Dataset):
            data = (x,) if y is None else (x, y) if sample_weight is None else (
                x, y, sample_weight)
            batches = tf.data.Dataset.from_tensor_slices(data)
            if shuffle:
                batches = batches.shuffle(len(x["input_word_ids"]), seed=self.cfg.seed,
                                          reshuffle_each_iteration=True)
            batches = batches.batch(batch_size or self.cfg.batch_size)

        def char_ids(x, *targets):
            return ({"char_ids": tf.gather(table, x["input_word_ids"])}, *targets)  # (B, ..., T, C)

        return batches.map(char_ids).prefetch(tf.data.AUTOTUNE)

    def _predict(self, model, x):
        return model.predict(self.char_id_batches(model, x), verbose=0)


class ElmoGlueTask(_ElmoTask, GlueTask):
    """`--model=elmo --task=glue/<name>`: GLUE read as BERT's, each text split into
    words by BERT's basic tokenization without lowercasing (ELMo is cased).

    One text: rows `<S> words </S>` `(N, T)` for `ElmoClassifier`; pairs:
    both texts, `(N, 2, T)`, for `ElmoPairClassifier`. A text of more than
    `max_seq_length - 2` words is truncated (counted and reported); no windows.
    """

    def __init__(self, cfg, tokenizer, name):
        if cfg.window_stride:
            raise SystemExit("--window_stride reads long GLUE inputs in windows for BERT only; "
                             "with --model=elmo texts are truncated to max_seq_length - 2 words. "
                             "Leave it 0.")
        super().__init__(cfg, tokenizer, name)
        self.words = _ElmoWords()
        self.pair = len(self.task.text_columns) == 2

    def _encode(self, examples):
        limit = self.cfg.max_seq_length - 2  # room for <S> and </S>
        texts = [[self.tokenizer.tokenize(e.text_a) for e in examples]]
        if self.pair:
            texts.append([self.tokenizer.tokenize(e.text_b or "") for e in examples])
        cut = sum(len(words) > limit for column in texts for words in column)
        if cut:
            _say(f"ELMo: {cut} of {len(examples)} examples' texts are longer than {limit} words "
                 f"(--max_seq_length={self.cfg.max_seq_length} with <S> and </S>); truncated.")
        length = min(max((len(w) for column in texts for w in column), default=0), limit) + 2
        rows = [self.words.rows([w[:limit] for w in column], length) for column in texts]
        ids = np.stack(rows, axis=1) if self.pair else rows[0]  # (N, 2, T) or (N, T)
        x = {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32)}
        return glue.EncodedExamples(x, _glue_labels(examples, self.task.labels),
                                    np.arange(len(examples), dtype=np.int32))

    def build_model(self, backbone):
        model = ElmoPairClassifier if self.pair else ElmoClassifier
        return model(backbone, len(self.task.labels) if self.task.labels else 1,
                     lstm_units=self.cfg.elmo_lstm_units)


class ElmoNerTask(_ElmoTask, NerTask):
    """`--model=elmo --task=ner`: CoNLL's words as they are, rows `<S> words </S>`,
    tagged by `ElmoTokenTagger`; labels, windows and decoding as BERT's, one
    label per word (every word is one token: no first-piece rule needed)."""

    def __init__(self, cfg, tokenizer):
        self.words = _ElmoWords()
        super().__init__(cfg, self.words)

    def _encode(self, split):
        if split not in self._encoded:
            encoded = conll.encode_sentences(
                self._data[split].sentences, self.words, self.label_list,
                self.cfg.max_seq_length, stride=self.cfg.window_stride or None)
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
                     f"--max_seq_length={self.cfg.max_seq_length} (with <S> and </S>) and are "
                     "predicted as 'O'; --window_stride reads them in windows.")
            self._encoded[split] = encoded
        return self._encoded[split]

    def build_model(self, backbone):
        return ElmoTokenTagger(backbone, len(self.label_list),
                               lstm_units=self.cfg.elmo_lstm_units)


def make_task(cfg, tokenizer):
    """The task object for `--task` (`glue/<name>`, `squad`, `ner`, `swag`) and `--model`."""
    if cfg.model == "elmo":
        if cfg.task.startswith("glue/"):
            return ElmoGlueTask(cfg, tokenizer, cfg.task.split("/", 1)[1])
        if cfg.task != "ner":
            raise SystemExit(f"Unknown --task={cfg.task!r} for --model=elmo: use glue/<name> "
                             f"({', '.join(sorted(glue.TASKS))}) or ner.")
        return ElmoNerTask(cfg, tokenizer)
    if cfg.model == "gpt":
        if cfg.task.startswith("glue/"):
            return GptGlueTask(cfg, tokenizer, cfg.task.split("/", 1)[1])
        tasks = {"ner": GptNerTask, "swag": GptSwagTask}
        if cfg.task not in tasks:
            raise SystemExit(f"Unknown --task={cfg.task!r} for --model=gpt: use glue/<name> "
                             f"({', '.join(sorted(glue.TASKS))}), ner or swag.")
        return tasks[cfg.task](cfg, tokenizer)
    if cfg.task.startswith("glue/"):
        return GlueTask(cfg, tokenizer, cfg.task.split("/", 1)[1])
    tasks = {"squad": SquadTask, "ner": NerTask, "swag": SwagTask}
    if cfg.task not in tasks:
        raise SystemExit(f"Unknown --task={cfg.task!r}: use glue/<name> "
                         f"({', '.join(sorted(glue.TASKS))}), squad, ner or swag.")
    return tasks[cfg.task](cfg, tokenizer)
