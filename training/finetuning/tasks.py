"""The fine-tuning entry point's tasks: files in, model, metric, predictions out.

Over 400 lines: one class per kind of task and the helpers they share, kept
together because GPT's, ELMo's and XLNet's tasks build on both from here.

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
(`GptGlueTask`, `GptNerTask`, `GptSwagTask` in `training/gpt/finetune.py`;
SQuAD is BERT's only).

With `--model=elmo` (ELMo as features: a frozen biLM, a scalar mix and a
BiLSTM task network, `keras_bert_impl.elmo.elmo_task_models`) GLUE and
CoNLL are read the same way too; the rows are whole words (`<S> words
</S>`, ELMo reads characters, not WordPieces), kept as rows of a word table
and turned into character ids batch by batch (`ElmoGlueTask`, `ElmoNerTask`
in `training/elmo/finetune.py`; no SQuAD or SWAG).

This file holds BERT's tasks, the helpers all tasks share, and BERT's
`make_task`; GPT's and ELMo's tasks build on these classes in those two
files (`make_gpt_task`, `make_elmo_task`), which this file never imports.
The data and metrics live in `training/tasks/`; this file only wires them together.
"""

import glob
import hashlib
import json
import os
import weakref

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl import BertClassifier
from keras_bert_impl import BertMultipleChoice
from keras_bert_impl import BertQuestionAnswerer
from keras_bert_impl import BertTokenTagger
from tf_records.command_line.progress import batch_progress
from tf_records.length_grouping import length_sorted_batches
from training.tasks import conll
from training.tasks import conll_metrics
from training.tasks import glue
from training.tasks import glue_metrics
from training.tasks import squad
from training.tasks import squad_metrics
from training.tasks import swag


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


def check_rows(count, path, split, skipped=0, what="examples"):
    """Raises `ValueError` naming the file of a split with no rows: found
    when the data is read, not by `predict` after a training epoch."""
    if not count:
        left = f" ({skipped} bad ones skipped)" if skipped else ""
        raise ValueError(f"{path}: the {split} split holds no {what}{left}; give it some, or "
                         "remove the file.")


# model -> {id(x): (x, batch_size, weights fingerprint, outputs)}: the last
# scores of each input, reused while the weights are the ones that made
# them (the predictions written after `fit` are the last epoch's dev scores,
# not a second pass over dev). Entries go with their model.
_LAST_SCORES = weakref.WeakKeyDictionary()


def _weights_fingerprint(model):
    """A digest of every weight's value (trainable or not)."""
    digest = hashlib.blake2b(digest_size=16)
    for variable in model.weights:
        digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(variable)).view(np.uint8))
    return digest.digest()


def _predict(model, x, batch_size):
    """`model.predict(x)`, or the outputs of the last call on this `x` object
    while `model`'s weights are unchanged (about a tenth of a second for
    MiniLM's 90 MB to fingerprint, against seconds for a dev pass)."""
    fingerprint = _weights_fingerprint(model)
    scores = _LAST_SCORES.setdefault(model, {})
    last = scores.get(id(x))
    if last is not None and last[0] is x and last[1:3] == (batch_size, fingerprint):
        return keras.tree.map_structure(np.copy, last[3])  # a caller may change its copy
    rows = len(next(iter(keras.tree.flatten(x))))
    callbacks = [batch_progress("Scoring", total=-(-rows // batch_size))]
    if _rows_outputs(model, x):
        outputs = _predict_sorted_by_length(model, x, batch_size, callbacks)
    else:
        outputs = model.predict(x, batch_size=batch_size, verbose=0, callbacks=callbacks)
    scores[id(x)] = (x, batch_size, fingerprint, keras.tree.map_structure(np.copy, outputs))
    return outputs


def _rows_outputs(model, x):
    """Whether `model` is a BERT classifier or multiple-choice model (one
    output vector per row, not per token; right padding, masked: a row's
    outputs do not depend on its padding), off TPUs (which want static
    shapes)."""
    if not isinstance(model, BertClassifier | BertMultipleChoice) or not isinstance(x, dict):
        return False
    return "input_mask" in x and not isinstance(model.distribute_strategy,
                                                tf.distribute.TPUStrategy)


def _predict_sorted_by_length(model, x, batch_size, callbacks):
    """`model.predict(x)` on the rows sorted by length, each batch cut to
    its longest row (`cut_padding`), the outputs put back in row order:
    training's batches are cut this way too, and a dev set of short rows is
    mostly padding at `--max_seq_length`."""
    batches, back = length_sorted_batches(x, batch_size)
    outputs = model.predict(batches, verbose=0, callbacks=callbacks)
    return keras.tree.map_structure(lambda out: out[back], outputs)


def _write_lines(path, lines):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.writelines(lines)
    os.replace(path + ".tmp", path)


def _glue_labels(examples, labels):
    """int32 label ids, float32 scores (regression), or None (test files)."""
    if not examples or examples[0].label is None:
        return None
    if labels is None:
        return np.asarray([float(e.label) for e in examples], np.float32)
    ids = {label: i for i, label in enumerate(labels)}
    return np.asarray([ids[e.label] for e in examples], np.int32)  # the reader checked them


class GlueTask:
    """`--task=glue/<name>`: `<data_dir>/{train,dev,test}.tsv` as GLUE lays them out.

    Args:
        tokenizer: the family's tokenizer.
        name: str. The GLUE task (`training.tasks.glue.TASKS`).
        data_dir: str. The folder of the `.tsv` files.
        max_seq_length: int. Tokens per input.
        batch_size: int. Rows per prediction batch.
        window_stride: int. Long inputs read in windows this many tokens
            apart; 0: truncated.
        skip_bad_input: bool. Skip bad rows (counted) instead of failing.
    """

    kind = "glue"

    def __init__(self, tokenizer, name, *, data_dir, max_seq_length, batch_size, window_stride=0,
                 skip_bad_input=False):
        self.tokenizer, self.task = tokenizer, glue.get_task(name)
        self.data_dir, self.max_seq_length, self.batch_size = data_dir, max_seq_length, batch_size
        self.window_stride, self.skip_bad_input = window_stride, skip_bad_input
        self.eval_splits = [s for s in self.task.splits if s.startswith("dev")
                            and os.path.exists(self._path(s))]
        # Predicted at the end; read with the dev splits, before training.
        self.test_splits = [s for s in self.task.submissions if os.path.exists(self._path(s))]
        self._cache = {}

    def _path(self, split):
        return os.path.join(self.data_dir, f"{split}.tsv")

    def _encoded(self, split):
        if split not in self._cache:
            examples, skipped = glue.read_glue(self.task, self.data_dir, split,
                                               skip_bad_rows=self.skip_bad_input)
            _report_skipped(skipped, self._path(split))
            check_rows(len(examples), self._path(split), split, skipped)
            self._cache[split] = (examples, self._encode(examples))
        return self._cache[split]

    def _encode(self, examples):
        return glue.encode_examples(examples, self.tokenizer, self.task.labels,
                                    self.max_seq_length,
                                    stride=self.window_stride or None)

    def prepare(self, split):
        self._encoded(split)

    def train_arrays(self):
        _, encoded = self._encoded("train")
        return encoded.x, encoded.y, None

    def build_model(self, backbone):
        return BertClassifier(backbone, len(self.task.labels) if self.task.labels else 1)

    def _predict(self, model, x):
        return _predict(model, x, self.batch_size)

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
        for split in self.test_splits:
            _, _, logits = self._logits(model, split)
            paths.append(glue.write_submission_tsv(os.path.join(folder, "glue_submission"),
                                                   self.task, logits, split=split))
        return paths


class SquadTask:
    """`--task=squad`: `train-v*.json` and `dev-v*.json` in the official format.

    v2.0 (questions may have no answer) is read from the file name or its
    "version" field; its null-score threshold is searched on dev each time
    dev is scored, as the paper tuned it.

    Args:
        tokenizer: the family's tokenizer.
        data_dir: str. The folder of the `.json` files.
        max_seq_length: int. Tokens per window.
        doc_stride: int. Tokens between the starts of a paragraph's windows.
        max_query_length: int. Question tokens kept.
        max_answer_length: int. Longest answer predicted, in tokens.
        n_best_size: int. Candidate answers kept per question.
        batch_size: int. Rows per prediction batch.
        do_lower_case: bool. Whether the tokenizer lowercases (answers are
            mapped back to the original text).
        skip_bad_input: bool. Skip training answers that do not fit their
            paragraph (counted) instead of failing.
    """

    kind = "squad"

    def __init__(self, tokenizer, *, data_dir, max_seq_length, doc_stride, max_query_length,
                 max_answer_length, n_best_size, batch_size, do_lower_case, skip_bad_input=False):
        self.tokenizer, self.data_dir, self.batch_size = tokenizer, data_dir, batch_size
        self.max_seq_length, self.doc_stride = max_seq_length, doc_stride
        self.max_query_length, self.max_answer_length = max_query_length, max_answer_length
        self.n_best_size, self.do_lower_case = n_best_size, do_lower_case
        self.skip_bad_input = skip_bad_input
        self.train_file = _maybe_find(data_dir, ("train-v*.json", "train*.json"))
        self.dev_file = _maybe_find(data_dir, ("dev-v*.json", "dev*.json"))
        some = self.train_file or self.dev_file
        if some is None:
            raise SystemExit(f"No SQuAD train-v*.json or dev-v*.json in {data_dir}.")
        self.version_2 = "v2" in os.path.basename(some) or str(
            _json_version(some)).startswith("v2")
        self.eval_splits = ["dev"] if self.dev_file else []
        self._cache = {}

    def train_arrays(self):
        if not self.train_file:
            raise SystemExit(f"No SQuAD training file (train-v*.json) in {self.data_dir}.")
        examples, skipped = squad.read_squad_examples(
            self.train_file, True, self.version_2, skip_bad_answers=self.skip_bad_input)
        _report_skipped(skipped, self.train_file)
        check_rows(len(examples), self.train_file, "train", skipped, "questions")
        features = self._features(examples, is_training=True)
        return features.x, features.y, None

    def _features(self, examples, is_training):
        """The windows of `examples` the model reads (`training.tasks.squad`'s)."""
        return squad.convert_examples_to_features(
            examples, self.tokenizer, self.max_seq_length, self.doc_stride, self.max_query_length,
            is_training=is_training)

    def _decode(self, examples, features, out, **threshold):
        """`(predictions, nbest, null_odds)` from the model's outputs `out`;
        `threshold`: SQuAD v2's `null_score_diff_threshold`, once searched."""
        return squad.decode_predictions(
            examples, features, out["start_logits"], out["end_logits"],
            n_best_size=self.n_best_size, max_answer_length=self.max_answer_length,
            do_lower_case=self.do_lower_case, version_2_with_negative=self.version_2,
            **threshold)

    def build_model(self, backbone):
        return BertQuestionAnswerer(backbone)

    def prepare(self, split):
        self._dev()

    def _dev(self):
        if "dev" not in self._cache:
            examples, _ = squad.read_squad_examples(self.dev_file, False, self.version_2)
            check_rows(len(examples), self.dev_file, "dev", what="questions")
            features = self._features(examples, is_training=False)
            self._cache["dev"] = (examples, features, squad.load_squad_json(self.dev_file))
        return self._cache["dev"]

    def evaluate(self, model, split):
        examples, features, dataset = self._dev()
        out = _predict(model, features.x, self.batch_size)
        predictions, nbest, null_odds = self._decode(examples, features, out)
        if not self.version_2:
            return squad_metrics.evaluate_v1(dataset, predictions), (predictions, nbest, null_odds)
        threshold = squad_metrics.search_null_threshold(dataset, nbest, null_odds)
        predictions, nbest, null_odds = self._decode(examples, features, out,
                                                     null_score_diff_threshold=threshold)
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
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f).get("version", "")
        except (json.JSONDecodeError, AttributeError):
            return ""


class NerTask:
    """`--task=ner`: CoNLL-2003 column files (`eng.train`/`train.txt`, `eng.testa`/`dev.txt`).

    Args:
        tokenizer: the family's tokenizer (or a stand-in shaped as one).
        data_dir: str. The folder of the column files.
        max_seq_length: int. Tokens per row.
        batch_size: int. Rows per prediction batch.
        window_stride: int. Long sentences read in windows this many tokens
            apart; 0: the words past the row are predicted as "O".
        skip_bad_input: bool. Skip bad lines (counted) instead of failing.
    """

    kind = "ner"

    def __init__(self, tokenizer, *, data_dir, max_seq_length, batch_size, window_stride=0,
                 skip_bad_input=False):
        self.tokenizer, self.max_seq_length, self.batch_size = tokenizer, max_seq_length, batch_size
        self.window_stride = window_stride
        self.files = {"train": _find(data_dir, ("train.txt", "eng.train"), "CoNLL train file")}
        dev = _maybe_find(data_dir, ("dev.txt", "valid.txt", "eng.testa"))
        test = _maybe_find(data_dir, ("test.txt", "eng.testb"))
        self.files.update({k: v for k, v in (("dev", dev), ("test", test)) if v})
        self.eval_splits = [s for s in ("dev", "test") if s in self.files]
        self._data = {}
        for split, path in self.files.items():
            data = conll.read_conll(path, skip_bad_lines=skip_bad_input)
            if data.skipped_lines:
                _report_skipped(len(data.skipped_lines), path)
            check_rows(len(data.sentences), path, split, len(data.skipped_lines), "sentences")
            self._data[split] = data
        # Every tag of every file, sorted: ids stay the same across runs.
        self.label_list = tuple(sorted({t for d in self._data.values() for t in d.label_list}))
        self._encoded = {}

    def _encode(self, split):
        if split not in self._encoded:
            self._encoded[split] = conll.encode_sentences(
                self._data[split].sentences, self.tokenizer, self.label_list,
                self.max_seq_length, stride=self.window_stride or None)
        return self._encoded[split]

    def train_arrays(self):
        encoded = self._encode("train")
        return encoded.x, encoded.y, encoded.sample_weight

    def build_model(self, backbone):
        return BertTokenTagger(backbone, len(self.label_list))

    def prepare(self, split):
        self._encode(split)

    def _predict(self, model, x):
        return _predict(model, x, self.batch_size)

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
    """`--task=swag`: `train.csv`, `val.csv` (and `test.csv`) in SWAG's format.

    Args:
        tokenizer: the family's tokenizer.
        data_dir: str. The folder of the `.csv` files.
        max_seq_length: int. Tokens per ending's row.
        batch_size: int. Examples per prediction batch.
        skip_bad_input: bool. Skip bad rows (counted) instead of failing.
    """

    kind = "swag"

    def __init__(self, tokenizer, *, data_dir, max_seq_length, batch_size, skip_bad_input=False):
        self.tokenizer, self.max_seq_length, self.batch_size = tokenizer, max_seq_length, batch_size
        self.skip_bad_input = skip_bad_input
        self.files = {"train": _find(data_dir, ("train.csv",), "SWAG train.csv")}
        for split, name in (("val", "val.csv"), ("test", "test.csv")):
            path = _maybe_find(data_dir, (name,))
            if path:
                self.files[split] = path
        self.eval_splits = ["val"] if "val" in self.files else []
        self.test_splits = ["test"] if "test" in self.files else []  # read before training
        self._cache = {}

    def _encoded(self, split):
        if split not in self._cache:
            examples, skipped = swag.read_swag(self.files[split],
                                               skip_bad_rows=self.skip_bad_input)
            _report_skipped(skipped, self.files[split])
            check_rows(len(examples), self.files[split], split, skipped)
            self._cache[split] = (examples, self._encode(examples))
        return self._cache[split]

    def _encode(self, examples):
        return swag.encode_swag(examples, self.tokenizer, self.max_seq_length)

    def train_arrays(self):
        _, encoded = self._encoded("train")
        return encoded.x, encoded.y, None

    def build_model(self, backbone):
        return BertMultipleChoice(backbone)

    def prepare(self, split):
        self._encoded(split)

    def evaluate(self, model, split):
        _, encoded = self._encoded(split)
        choice = np.asarray(_predict(model, encoded.x, self.batch_size)).argmax(-1)
        return {"accuracy": float((choice == encoded.y).mean())}, choice

    def write_predictions(self, model, folder):
        paths = []
        for split in [s for s in ("val", "test") if s in self.files]:
            examples, encoded = self._encoded(split)
            choice = np.asarray(_predict(model, encoded.x, self.batch_size)).argmax(-1)
            path = os.path.join(folder, f"{split}_predictions.csv")
            _write_lines(path, ["guid,prediction\n"] + [
                f"{e.guid},{c}\n" for e, c in zip(examples, choice)])
            paths.append(path)
        return paths


# The flags `task_values` reads: what every recipe holds for its tasks.
TASK_FLAGS = ("task", "max_seq_length", "batch_size", "skip_bad_input", "data_dir",
              "train_file", "dev_file", "test_file", "text_column", "text_b_column",
              "label_column", "allow_many_labels", "window_stride", "doc_stride",
              "max_query_length", "max_answer_length", "n_best_size", "do_lower_case")


def task_values(cfg):
    """The keyword values the task object of `--task` takes, read off the
    resolved config or a recipe's values (`cfg`: anything with the
    `TASK_FLAGS` as attributes): the one place the tasks' settings come
    from (BERT's `make_task` and each family's pass them on, with the
    family's own).

    Returns:
        dict: `max_seq_length`, `batch_size`, `skip_bad_input`; `data_dir`,
        or `text_classification`'s files, columns and `allow_many_labels`;
        `window_stride` for GLUE, `text_classification` and NER; SQuAD's
        `doc_stride`, `max_query_length`, `max_answer_length`, `n_best_size`
        and `do_lower_case`.
    """
    kind = "glue" if cfg.task.startswith("glue/") else cfg.task
    values = {"max_seq_length": cfg.max_seq_length, "batch_size": cfg.batch_size,
              "skip_bad_input": cfg.skip_bad_input}
    if kind == "text_classification":
        values.update(train_file=cfg.train_file, dev_file=cfg.dev_file, test_file=cfg.test_file,
                      text_column=cfg.text_column, text_b_column=cfg.text_b_column,
                      label_column=cfg.label_column, allow_many_labels=cfg.allow_many_labels)
    else:
        values["data_dir"] = cfg.data_dir
    if kind in ("glue", "text_classification", "ner"):
        values["window_stride"] = cfg.window_stride
    if kind == "squad":
        values.update(doc_stride=cfg.doc_stride, max_query_length=cfg.max_query_length,
                      max_answer_length=cfg.max_answer_length, n_best_size=cfg.n_best_size,
                      do_lower_case=cfg.do_lower_case)
    return values


def make_task(cfg, tokenizer):
    """BERT's task object for `--task` (`glue/<name>`, `squad`, `ner`, `swag`),
    given the values `task_values` reads off `cfg`.

    GPT's and ELMo's are `training.gpt.finetune.make_gpt_task` and
    `training.elmo.finetune.make_elmo_task`, BERT's `text_classification`
    `text_classification.TextClassificationTask` (they build on the
    classes here, so this file imports none of them)."""
    if cfg.task.startswith("glue/"):
        return GlueTask(tokenizer, cfg.task.split("/", 1)[1], **task_values(cfg))
    tasks = {"squad": SquadTask, "ner": NerTask, "swag": SwagTask}
    if cfg.task not in tasks:
        raise SystemExit(f"Unknown --task={cfg.task!r}: use glue/<name> "
                         f"({', '.join(sorted(glue.TASKS))}), text_classification, squad, ner "
                         "or swag.")
    return tasks[cfg.task](tokenizer, **task_values(cfg))
