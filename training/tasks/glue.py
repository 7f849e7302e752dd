"""GLUE: the nine tasks' files as examples, BERT inputs, and submission files.

Over 400 lines: the GLUE files' whole round trip (the nine tasks' layouts,
reading, encoding, windows, submission files), in one file as `squad.py` and
`conll.py` keep theirs.

Each task is one frozen `GlueTask` value saying where its texts and labels
sit in the files the GLUE download script writes (the columns Hugging Face's
`glue.py` processors and the original `run_classifier.py` read). Reading is
strict: a row with the wrong number of fields or an unknown label raises a
`ValueError` naming the file and line, unless `skip_bad_rows=True`, which
skips and counts such rows (Hugging Face's QQP reader skips them too). Encoding is the
original `convert_single_example`: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`,
truncated longest first; `stride=` instead reads long inputs in overlapping
windows, as `run_squad.py` reads long documents.

Paper: Wang et al., 2018, "GLUE: A Multi-Task Benchmark and Analysis Platform
for Natural Language Understanding"; Devlin et al., 2018, section 4.1.
"""

import csv
import dataclasses
import os

import numpy as np

from keras_bert_impl.bert.bert_tokenizer import padded_inputs
from keras_bert_impl.tokenizers.pairs import truncate_seq_pair
from training.tasks.bad_rows import BadRowError
from training.tasks.windows import windows

# N=examples or window rows, S=max_seq_length, C=classes


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """Where one GLUE task keeps its texts and labels, and how it is scored.

    Args:
        name: str. The GLUE directory name (`"CoLA"`, `"STS-B"`, ...).
        labels: tuple of str, or None for regression (STS-B).
        metrics: tuple of str. Names in `training.tasks.glue_metrics.METRICS`.
        text_columns: tuple of int. Segment A's (and B's) column in train/dev.
        label_column: int. The label's column in train/dev (-1: the last).
        test_text_columns: tuple of int. The text columns in test files.
        submissions: dict. Test split -> file name the GLUE server expects.
        header: bool. Whether train/dev have a header (test files always do).
        num_columns: int or None. Fields per row of a headerless train/dev.
        splits: tuple of str. Split names; the file is `{split}.tsv`.
    """

    name: str
    labels: tuple | None
    metrics: tuple
    text_columns: tuple
    label_column: int
    test_text_columns: tuple
    submissions: dict
    header: bool = True
    num_columns: int | None = None
    splits: tuple = ("train", "dev", "test")


# name, labels, metrics, text columns, label column, test text columns, submissions
TASKS = {
    "cola": GlueTask(
        "CoLA", ("0", "1"), ("matthews_corr",), (3,), 1, (1,), {"test": "CoLA.tsv"},
        header=False, num_columns=4,  # source, label, original mark, sentence
    ),
    "sst2": GlueTask("SST-2", ("0", "1"), ("accuracy",), (0,), 1, (1,), {"test": "SST-2.tsv"}),
    "mrpc": GlueTask(
        "MRPC", ("0", "1"), ("f1", "accuracy"), (3, 4), 0, (3, 4), {"test": "MRPC.tsv"}
    ),
    "qqp": GlueTask(
        "QQP", ("0", "1"), ("f1", "accuracy"), (3, 4), 5, (1, 2), {"test": "QQP.tsv"}
    ),
    "stsb": GlueTask(
        "STS-B", None, ("pearson", "spearman"), (7, 8), -1, (7, 8), {"test": "STS-B.tsv"}
    ),
    "mnli": GlueTask(
        "MNLI", ("contradiction", "entailment", "neutral"), ("accuracy",), (8, 9), -1, (8, 9),
        {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"},
        splits=("train", "dev_matched", "dev_mismatched", "test_matched", "test_mismatched"),
    ),
    "qnli": GlueTask(
        "QNLI", ("entailment", "not_entailment"), ("accuracy",), (1, 2), -1, (1, 2),
        {"test": "QNLI.tsv"},
    ),
    "rte": GlueTask(
        "RTE", ("entailment", "not_entailment"), ("accuracy",), (1, 2), -1, (1, 2),
        {"test": "RTE.tsv"},
    ),
    "wnli": GlueTask("WNLI", ("0", "1"), ("accuracy",), (1, 2), -1, (1, 2), {"test": "WNLI.tsv"}),
}


def get_task(task):
    """The `GlueTask` for a name as GLUE or Hugging Face spell it
    (`"SST-2"`, `"sst2"`, `"sts-b"`), or the `GlueTask` itself."""
    if isinstance(task, GlueTask):
        return task
    key = str(task).lower().replace("-", "").replace("_", "")
    if key not in TASKS:
        raise ValueError(f"Unknown GLUE task {task!r}. Expected one of {sorted(TASKS)}.")
    return TASKS[key]


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example: `guid` is `"{file stem}-{line}"` (`"dev_matched-2"`),
    naming the line it was read from; `label` is a label string, a float
    (regression) or None (test files)."""

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None


@dataclasses.dataclass(frozen=True)
class EncodedExamples:
    """`x`: dict of int32 `(N, S)` `input_word_ids`, `input_mask`,
    `input_type_ids`; `y`: int32 `(N,)` label ids, float32 `(N,)` scores, or
    None for unlabeled examples; `example_index`: int32 `(N,)`, the example
    each row came from (several rows per example with `stride=`)."""

    x: dict
    y: np.ndarray | None
    example_index: np.ndarray


class _BadRowError(ValueError):
    pass


def read_glue(task, data_dir, split, skip_bad_rows=False):
    """Reads one split of a GLUE task from its directory.

    Args:
        task: str or `GlueTask`. `"cola"`, `"sst2"`, `"mrpc"`, `"qqp"`,
            `"stsb"`, `"mnli"`, `"qnli"`, `"rte"` or `"wnli"`.
        data_dir: str. The task's folder (e.g. `glue_data/MRPC`).
        split: str. One of `task.splits` (`"train"`, `"dev"`, `"test"`;
            MNLI: `"dev_matched"`, `"dev_mismatched"`, `"test_matched"`, ...).
        skip_bad_rows: bool. Skip and count malformed rows instead of raising.

    Returns:
        `(examples, num_skipped)`: a list of `InputExample` (labels None for
        test splits) and the number of rows skipped.

    Example:
    >>> examples, skipped = read_glue("mrpc", "glue_data/MRPC", "dev")
    """
    task = get_task(task)
    if split not in task.splits:
        raise ValueError(f"{task.name} has splits {task.splits}. Received: split={split!r}.")
    is_test = split.startswith("test")
    return read_csv_examples(
        os.path.join(data_dir, f"{split}.tsv"),
        task.test_text_columns if is_test else task.text_columns,
        label_column=None if is_test else task.label_column,
        labels=task.labels,
        header=is_test or task.header,
        num_columns=None if is_test else task.num_columns,
        quoting=csv.QUOTE_NONE,  # as the original: GLUE texts hold bare quotes
        skip_bad_rows=skip_bad_rows,
    )


def read_csv_examples(
    path, text_columns, label_column=None, labels=None, delimiter="\t", header=True,
    num_columns=None, quoting=csv.QUOTE_MINIMAL, skip_bad_rows=False,
):
    """Reads a CSV/TSV of one- or two-text examples: any task, GLUE's too.

    Args:
        path: str. The file; its stem names the examples (`"{stem}-{line}"`).
        text_columns: one or two column names (needs `header=True`) or
            0-based indices: segment A and optionally segment B.
        label_column: name, index or None (no labels, as test files).
        labels: tuple of str (classification; other values are bad rows) or
            None (regression: the label must be a number).
        delimiter: str. `"\\t"` for TSV, `","` for CSV.
        header: bool. Whether the first row names the columns; rows must
            have as many fields as it.
        num_columns: int or None. Fields per row of a headerless file; None
            takes the first row's count.
        quoting: a `csv` constant. `csv.QUOTE_NONE` for GLUE-style TSVs.
        skip_bad_rows: bool. Skip and count malformed rows instead of raising.

    Returns:
        `(examples, num_skipped)`, as `read_glue`.
    """
    text_columns = (text_columns,) if isinstance(text_columns, (str, int)) else tuple(text_columns)
    if len(text_columns) not in (1, 2):
        raise ValueError(f"`text_columns` must name 1 or 2 columns. Received: {text_columns}.")
    if not header and any(isinstance(c, str) for c in (*text_columns, label_column)):
        raise ValueError("Columns can be named only when the file has a header; pass indices.")
    stem = os.path.splitext(os.path.basename(path))[0]
    separator = {"\t": "tab", ",": "comma"}.get(delimiter, repr(delimiter))
    examples, skipped = [], 0
    with open(path, encoding="utf-8-sig", newline="") as f:  # -sig: MRPC starts with a BOM
        reader = csv.reader(f, delimiter=delimiter, quoting=quoting)
        next_line, first = 1, True
        for row in reader:
            # A quoted field may span lines; errors name the record's first.
            line, next_line = next_line, reader.line_num + 1
            if not row:
                continue  # a blank line holds no example
            if first:  # the header, or a headerless file's first row, fixes the width
                first, names = False, row if header else None
                num_columns = len(row) if header or num_columns is None else num_columns
                text_columns = [_column_index(c, names, num_columns, path) for c in text_columns]
                if label_column is not None:
                    label_column = _column_index(label_column, names, num_columns, path)
                if header:
                    continue
            try:
                texts, label = _parse_row(
                    row, f"{path}, line {line}", num_columns, separator, text_columns,
                    label_column, labels,
                )
            except _BadRowError as e:
                if not skip_bad_rows:
                    raise BadRowError(str(e), "skip_bad_rows") from None
                skipped += 1
                continue
            examples.append(InputExample(f"{stem}-{line}", *texts, label=label))
    return examples, skipped


def _column_index(column, names, num_columns, path):
    # A column past the file's width is a wrong argument, not a bad row.
    if isinstance(column, str):
        if column not in names:
            raise ValueError(f"{path}, line 1: no column {column!r}. The header has {names}.")
        return names.index(column)
    if not -num_columns <= column < num_columns:
        raise ValueError(f"{path}: column {column} is out of range for {num_columns} fields.")
    return column


def _parse_row(row, where, num_columns, separator, text_columns, label_column, labels):
    if len(row) != num_columns:
        shown = repr(row) if len(repr(row)) < 300 else repr(row)[:300] + "..."
        raise _BadRowError(
            f"{where}: expected {num_columns} {separator}-separated fields, "
            f"received {len(row)}: {shown}."
        )
    texts = [row[c] for c in text_columns]  # one or two
    label = None
    if label_column is not None:
        label = row[label_column]
        if labels is None:
            try:
                label = float(label)
            except ValueError:
                raise _BadRowError(f"{where}: expected a number, received {label!r}.") from None
        elif label not in labels:
            raise _BadRowError(f"{where}: expected a label in {labels}, received {label!r}.")
    return texts, label


def encode_examples(examples, tokenizer, labels, max_seq_length=128, stride=None):
    """Packs examples into BERT inputs, as the original `convert_single_example`.

    `[CLS] A [SEP]` (type ids 0) or `[CLS] A [SEP] B [SEP]` (B and its [SEP]
    typed 1), then padding (`input_mask` 0); an empty `text_b` packs as a
    single text, as the original (`if example.text_b:`).

    Long inputs are truncated as the original, longest segment first. With
    `stride=k` they are instead read in windows whose starts are `k` tokens
    apart (`training.tasks.windows`, SQuAD's `doc_stride`), one row per window, each
    with the example's label: windows of the single text, or of segment B
    with A whole in every row, as SQuAD keeps the question. An A over half
    the room is first cut to half, so B keeps half of every row (SQuAD cuts
    questions to 64 of 384 tokens).

    Args:
        examples: list of `InputExample`.
        tokenizer: `keras_bert_impl.tokenizers.BertTokenizer`.
        labels: tuple of label strings (row `y` is the label's index), or
            None for regression (`y` is the float score), e.g. `task.labels`.
        max_seq_length: int. S, with the special tokens.
        stride: int or None. Window step in tokens; None truncates.

    Returns:
        `EncodedExamples` with `x` (int32 `(N, S)` arrays), `y` (`(N,)`, or
        None when the examples have no labels) and `example_index` `(N,)`.

    Example:
    >>> encoded = encode_examples(examples, tokenizer, TASKS["mrpc"].labels, 128)
    >>> encoded.x["input_word_ids"].shape
    (408, 128)
    """
    if max_seq_length < 4:  # [CLS], [SEP], [SEP] and one token
        raise ValueError(f"`max_seq_length` must be at least 4. Received: {max_seq_length}.")
    labeled = {example.label is not None for example in examples}
    if len(labeled) > 1:
        raise ValueError("Either every example has a label or none does (test files).")
    labeled = labeled == {True}
    label_ids = None if labels is None else {label: i for i, label in enumerate(labels)}
    rows, targets, example_index = [], [], []
    for index, example in enumerate(examples):
        a = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.text_a))
        b = []
        if example.text_b:
            b = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.text_b))
        target = _target(example, label_ids) if labeled else None
        for segment_a, segment_b in _segments(a, b, max_seq_length, stride):
            rows.append(_pack(tokenizer, segment_a, segment_b))
            targets.append(target)
            example_index.append(index)
    x = padded_inputs(rows, max_seq_length, tokenizer.pad_token_id)
    y = None
    if labeled:
        y = np.asarray(targets, np.float32 if labels is None else np.int32)
    return EncodedExamples(x, y, np.asarray(example_index, np.int32))


def _target(example, label_ids):
    if label_ids is None:
        return float(example.label)
    if example.label not in label_ids:
        raise ValueError(
            f"Example {example.guid}: label {example.label!r} is not one of {tuple(label_ids)}."
        )
    return label_ids[example.label]


def _segments(a, b, max_seq_length, stride):
    """`[(a, b), ...]`: the token ids of each row's segments (b may be [])."""
    if stride is None:
        if b:
            a, b = list(a), list(b)
            truncate_seq_pair(a, b, max_seq_length - 3)  # room for [CLS], [SEP], [SEP]
            return [(a, b)]
        return [(a[: max_seq_length - 2], [])]
    if not b:
        return [(a[w.start : w.end], []) for w in windows(len(a), max_seq_length - 2, stride)]
    a = a[: (max_seq_length - 3) // 2] if len(a) + len(b) > max_seq_length - 3 else a
    room = max_seq_length - 3 - len(a)
    return [(a, b[w.start : w.end]) for w in windows(len(b), room, stride)]


def _pack(tokenizer, a, b):
    ids = [tokenizer.cls_token_id, *a, tokenizer.sep_token_id]
    types = [0] * len(ids)
    if b:
        ids += [*b, tokenizer.sep_token_id]
        types += [1] * (len(b) + 1)
    return ids, types


def merge_window_logits(logits, example_index, num_examples=None):
    """One prediction per example from its windows' rows: the mean logits.

    Our choice: every window is an equal reading of the example, and the
    softmax of the mean logits is the normalized geometric mean of the
    windows' probabilities, so one confident window moves it without
    overruling the rest (as taking the most confident window would).

    Args:
        logits: `(N, C)` (or `(N,)` regression scores) for the rows.
        example_index: `(N,)` int, `EncodedExamples.example_index`.
        num_examples: int or None. Defaults to `max(example_index) + 1`.

    Returns:
        float `(num_examples, C)` (or `(num_examples,)`).
    """
    logits = np.asarray(logits, np.float64)
    example_index = np.asarray(example_index)
    if len(logits) != len(example_index):
        raise ValueError(f"Got {len(logits)} rows of logits but {len(example_index)} indices.")
    if num_examples is None:
        num_examples = int(example_index.max()) + 1 if len(example_index) else 0
    sums = np.zeros((num_examples, *logits.shape[1:]))
    np.add.at(sums, example_index, logits)
    counts = np.bincount(example_index, minlength=num_examples)
    if not counts.all():
        raise ValueError(f"Examples {np.flatnonzero(counts == 0)[:10].tolist()} have no rows.")
    return sums / counts.reshape(-1, *[1] * (logits.ndim - 1))


def decode_predictions(task, predictions):
    """Model outputs as GLUE answers: int `(N,)` label ids (the argmax of
    `(N, C)` logits, or ids as given) or float `(N,)` scores (regression)."""
    task = get_task(task)
    predictions = np.asarray(predictions)
    if task.labels is None:
        if predictions.ndim == 2 and predictions.shape[1] == 1:
            predictions = predictions[:, 0]
        if predictions.ndim != 1:
            raise ValueError(f"{task.name} wants (N,) scores. Received shape {predictions.shape}.")
        return predictions.astype(np.float64)
    if predictions.ndim == 2:
        predictions = predictions.argmax(axis=-1)  # logits or probabilities
    if predictions.ndim != 1 or not np.issubdtype(predictions.dtype, np.integer):
        raise ValueError(
            f"{task.name} wants (N,) int label ids or (N, C) logits. Received "
            f"{predictions.dtype} of shape {predictions.shape}."
        )
    if len(predictions) and not 0 <= predictions.min() <= predictions.max() < len(task.labels):
        raise ValueError(f"{task.name} label ids must be in [0, {len(task.labels)}).")
    return predictions


def write_submission_tsv(output_dir, task, predictions, split=None, index=None):
    """Writes one task's test predictions in the GLUE server's format.

    A header `index\\tprediction`, then per test example the label string
    (`entailment`, `1`, ...) or the STS-B score. Written to a temporary file
    then renamed, so a crash never leaves a half-written submission.

    Args:
        output_dir: str. Folder to zip and upload; created if missing.
        task: str or `GlueTask`.
        predictions: label ids `(N,)`, logits `(N, C)`, or scores (STS-B),
            in test-file order.
        split: str. The test split; needed for MNLI (`"test_matched"` ->
            `MNLI-m.tsv`, `"test_mismatched"` -> `MNLI-mm.tsv`).
        index: optional `(N,)` values of the test file's index column;
            defaults to 0..N-1, which they are when no row was skipped.

    Returns:
        The path written, e.g. `output_dir/CoLA.tsv`.
    """
    task = get_task(task)
    if split is None and len(task.submissions) == 1:
        (split,) = task.submissions
    if split not in task.submissions:
        raise ValueError(f"{task.name} submits {tuple(task.submissions)}. Received: split={split!r}.")
    values = decode_predictions(task, predictions)
    index = range(len(values)) if index is None else list(index)
    if len(index) != len(values):
        raise ValueError(f"Got {len(values)} predictions but {len(index)} index values.")
    if task.labels is None:
        answers = [f"{value:.6f}" for value in values]
    else:
        answers = [task.labels[value] for value in values]
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, task.submissions[split])
    temp = path + ".tmp"  # same folder, so same filesystem: the rename is atomic
    try:
        with open(temp, "w", encoding="utf-8", newline="") as f:
            f.write("index\tprediction\n")
            f.writelines(f"{i}\t{answer}\n" for i, answer in zip(index, answers))
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise
    return path
