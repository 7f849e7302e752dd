"""`--task=text_classification`: fine-tuning on your own CSV / TSV / JSON Lines files.

    python -m training.finetune --task=text_classification \
        --train_file=news_train.csv --dev_file=news_dev.csv [--test_file=news_test.csv] \
        --text_column=title --text_b_column=body --label_column=label

`TextClassificationTask` is a GLUE task whose files, columns and labels come
from the flags instead of GLUE's layout: the files are read by
`training.tasks.text_classification` (format from the extension, delimiter sniffed,
errors naming file, line and column), the labels are the training file's,
sorted, and everything else (encoding, `--window_stride` windows, the
model) is the GLUE task's, so every family's GLUE task (`GptGlueTask`,
`ElmoGlueTask`, `XLNetGlueTask`) becomes its text classification task by
listing this class second: `class GptTextClassificationTask(GptGlueTask,
TextClassificationTask)`.

After each epoch dev is scored with accuracy, macro-F1 and per-class
precision / recall / F1; at the end the run folder gets `metrics.json`,
`dev_predictions.csv` (line, text(s), gold, predicted, probability),
`confusion_matrix.png` and, with `--test_file`, `test_predictions.csv`. The
label list (`class_labels`) is what the entry point saves with the model:
every family's SavedModel takes raw strings (`serving_text`, or
`serving_text_pair` with `--text_b_column`), tokenizes them in the graph as
this task's `_encode` does for that family, and returns `label` (strings)
and `probabilities` besides `logits`.
"""

import csv
import io
import json
import os

import numpy as np
from matplotlib.figure import Figure

from training.finetuning.tasks import GlueTask
from training.finetuning.tasks import _say
from training.tasks import glue
from training.tasks import text_classification as reading
from training.tasks.text_classification_metrics import classification_metrics

# N=examples, C=classes


def check_flags(cfg):
    """Refuses, before any model is built, flags that cannot make a text classification run."""
    if cfg.data_dir:
        raise SystemExit("--task=text_classification reads --train_file and --dev_file (and "
                         "--test_file), not --data_dir.")
    for flag in ("train_file", "dev_file"):
        if not getattr(cfg, flag):
            raise SystemExit(f"--task=text_classification needs --{flag} (a .csv, .tsv or "
                             ".jsonl file with a header naming its columns).")
    for flag in ("train_file", "dev_file", "test_file"):
        path = getattr(cfg, flag)
        if path:
            try:
                reading.file_format(path)
            except reading.BadInputError as e:
                raise SystemExit(f"--{flag}: {e}") from None
            if not os.path.isfile(path):
                raise SystemExit(f"--{flag}={path}: no such file.")
    if not cfg.text_column or not cfg.label_column:
        raise SystemExit("--text_column and --label_column must name columns of the files.")
    named = [c for c in (cfg.text_column, cfg.text_b_column, cfg.label_column) if c]
    if len(set(named)) != len(named):
        raise SystemExit(f"--text_column, --text_b_column and --label_column must differ. "
                         f"Received: {named}.")


def _softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)  # (N, C)


def _write_atomic(path, text):
    with open(path + ".tmp", "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


class TextClassificationTask(GlueTask):
    """`--task=text_classification`: `--train_file`, `--dev_file` (and `--test_file`).

    Args:
        tokenizer: the family's tokenizer.
        name: unused (the GLUE tasks' signature; the files name this one).
        train_file, dev_file: str. Labelled `.csv`, `.tsv` or `.jsonl` files.
        test_file: str. Unlabelled rows to predict; "": none.
        text_column, label_column: str. The columns of the text and the label.
        text_b_column: str. The column of a second text; "": one text.
        allow_many_labels: bool. Go on with labels that look like a measurement
            (real numbers, or most labels occurring once).
        max_seq_length: int. Tokens per input.
        batch_size: int. Rows per prediction batch.
        window_stride: int. Long inputs read in windows this many tokens
            apart; 0: truncated.
        skip_bad_input: bool. Skip bad rows (counted) instead of failing.
    """

    kind = "text_classification"

    def __init__(self, tokenizer, name=None, *, train_file, dev_file, test_file="", text_column,
                 label_column, text_b_column="", allow_many_labels=False, max_seq_length,
                 batch_size, window_stride=0, skip_bad_input=False):
        del name  # the GLUE tasks' signature; the files name this one
        self.tokenizer, self.max_seq_length, self.batch_size = tokenizer, max_seq_length, batch_size
        self.window_stride, self.skip_bad_input = window_stride, skip_bad_input
        self.text_column, self.text_b_column = text_column, text_b_column
        self.label_column = label_column
        self.files = {"train": train_file, "dev": dev_file}
        if test_file:
            self.files["test"] = test_file
        self._read = {}
        try:
            self.class_labels = reading.label_list(self._file("train").examples,
                                                   allow_many_labels)
        except reading.BadInputError as e:
            raise reading.BadInputError(f"--train_file={train_file}: {e}") from None
        for split in self.files:  # every file's errors show before training, not after
            self._file(split)
        pair = bool(text_b_column)
        # The GLUE task value the family classes read: labels, one or two texts.
        self.task = glue.GlueTask(
            name="text_classification", labels=self.class_labels, metrics=("accuracy",),
            text_columns=(0, 1) if pair else (0,), label_column=1,
            test_text_columns=(0, 1) if pair else (0,), submissions={})
        self.eval_splits = ["dev"]
        self._cache = {}

    def _path(self, split):
        return self.files[split]

    def _file(self, split):
        if split not in self._read:
            labeled = split != "test"
            read = reading.read_text_file(
                self.files[split], self.text_column, self.label_column if labeled else None,
                self.text_b_column or None, labels=None if split == "train" else (
                    self.class_labels), skip_bad_input=self.skip_bad_input, split=split)
            if read.num_skipped:
                counts = ", ".join(f"{n} {why}" for why, n in sorted(read.skipped.items()))
                _say(f"Skipped {read.num_skipped} bad rows in {read.path} ({counts}; "
                     "--skip_bad_input).")
            self._read[split] = read
        return self._read[split]

    def _encoded(self, split):
        if split not in self._cache:
            examples = self._file(split).examples
            self._cache[split] = (examples, self._encode(examples))
        return self._cache[split]

    def _scores(self, model, split):
        """`(metrics, probabilities (N, C))` of a labelled split."""
        examples, _, logits = self._logits(model, split)
        probabilities = _softmax(logits)
        ids = {label: i for i, label in enumerate(self.class_labels)}
        gold = np.asarray([ids[e.label] for e in examples])
        return classification_metrics(
            gold, probabilities.argmax(-1), self.class_labels), probabilities

    def evaluate(self, model, split):
        """Accuracy and macro-F1 for the epoch's line and history; the per-class
        scores printed as a table here (one line per label reads better than
        3 x C numbers on the epoch's line)."""
        metrics, probabilities = self._scores(model, split)
        width = max(len(label) for label in self.class_labels)
        lines = [f"{split} per class: {'label':{width}s} precision recall     f1 support"]
        for label, scores in metrics["per_class"].items():
            lines.append(f"{'':{len(split) + 12}s}{label:{width}s} {scores['precision']:9.4f} "
                         f"{scores['recall']:6.4f} {scores['f1']:6.4f} {scores['support']:7d}")
        _say("\n".join(lines))
        return {"accuracy": metrics["accuracy"], "macro_f1": metrics["macro_f1"]}, probabilities

    def write_predictions(self, model, folder):
        metrics, probabilities = self._scores(model, "dev")
        paths = [self._write_csv(folder, "dev", probabilities)]
        if "test" in self.files:
            _, _, logits = self._logits(model, "test")
            paths.append(self._write_csv(folder, "test", _softmax(logits)))
        png = os.path.join(folder, "confusion_matrix.png")
        plot_confusion_matrix(metrics["confusion_matrix"], self.class_labels, png,
                              title=f"{os.path.basename(self.files['dev'])}: accuracy "
                                    f"{metrics['accuracy']:.3f}, macro-F1 "
                                    f"{metrics['macro_f1']:.3f}")
        path = os.path.join(folder, "metrics.json")
        report = {
            "labels": list(self.class_labels), "dev": {**metrics, "rows": len(probabilities)},
            "files": {split: {"path": os.path.abspath(read.path),
                              "rows": len(read.examples), "skipped": read.skipped}
                      for split, read in self._read.items()}}
        _write_atomic(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        return [*paths, png, path]

    def _write_csv(self, folder, split, probabilities):
        """`{split}_predictions.csv`: line, text(s), (gold,) predicted, probability."""
        read = self._file(split)
        columns = [self.text_column] + ([self.text_b_column] if self.text_b_column else [])
        labeled = split != "test"
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["line", *columns, *(["gold"] if labeled else []), "predicted",
                         "probability"])
        predicted = probabilities.argmax(-1)
        for line, example, choice, row in zip(read.lines, read.examples, predicted,
                                              probabilities):
            texts = [example.text_a] + ([example.text_b] if self.text_b_column else [])
            writer.writerow([line, *texts, *([example.label] if labeled else []),
                             self.class_labels[choice], f"{row[choice]:.6f}"])
        path = os.path.join(folder, f"{split}_predictions.csv")
        _write_atomic(path, out.getvalue())
        return path


def plot_confusion_matrix(matrix, labels, path, title=""):
    """The confusion matrix as a PNG: rows gold, columns predicted, counts in
    the cells (drawn headless: a `Figure` needs no pyplot backend)."""
    matrix = np.asarray(matrix)
    size = max(4.0, 0.6 * len(labels) + 2.5)
    figure = Figure(figsize=(size + 1, size))
    ax = figure.subplots()
    image = ax.imshow(matrix, cmap="Blues")
    figure.colorbar(image, ax=ax, fraction=0.046)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(title, fontsize=9)
    middle = matrix.max() / 2 if matrix.size else 0
    for (i, j), count in np.ndenumerate(matrix):
        ax.text(j, i, str(count), ha="center", va="center",
                color="white" if count > middle else "black")  # readable on dark cells
    figure.tight_layout()
    figure.savefig(path + ".tmp.png", dpi=100)
    os.replace(path + ".tmp.png", path)
