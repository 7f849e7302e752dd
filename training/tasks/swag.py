"""SWAG: four-way choice of a video caption's ending, as BERT inputs.

The files are rowanz/swagaf's `train.csv`, `val.csv` (columns `video-id,
fold-ind,startphrase,sent1,sent2,gold-source,ending0..3,label`, after an
unnamed pandas index column) and `test.csv` (the same without `label`).
Columns are found by their header names, so the leading index column may be
there or not. A row with the wrong number of fields, a missing header column
or a label outside 0-3 raises a `ValueError` naming the file and line, unless
`skip_bad_rows=True`, which skips and counts such rows.

Paper: Zellers et al., 2018, "SWAG: A Large-Scale Adversarial Dataset for
Grounded Commonsense Inference"; Devlin et al., 2018, section 4.4.
"""

import csv
import dataclasses
import os

import numpy as np

from keras_bert_impl.tokenizers.pairs import truncate_seq_pair
from training.tasks.bad_rows import BadRowError

# N=examples, K=NUM_CHOICES, S=max_seq_length

NUM_CHOICES = 4
_TEXT_COLUMNS = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3")


@dataclasses.dataclass(frozen=True)
class SwagExample:
    """One question: `context` (sent1), `start` (sent2, the first words of
    the next sentence), four `endings`, `label` 0-3 or None (test).
    `guid` is `"{file stem}-{line}"`, the line it was read from."""

    guid: str
    context: str
    start: str
    endings: tuple
    label: int | None = None


@dataclasses.dataclass(frozen=True)
class EncodedSwag:
    """`x`: dict of int32 `(N, K, S)` `input_word_ids`, `input_mask`,
    `input_type_ids`; `y`: int32 `(N,)` gold ending, or None for test."""

    x: dict
    y: np.ndarray | None


class _BadRowError(ValueError):
    pass


def read_swag(path, skip_bad_rows=False):
    """Reads a SWAG CSV.

    Args:
        path: str. `train.csv`, `val.csv` or `test.csv`.
        skip_bad_rows: bool. Skip and count malformed rows instead of raising.

    Returns:
        `(examples, num_skipped)`: a list of `SwagExample` (labels None when
        the file has no `label` column) and the number of rows skipped.

    Example:
    >>> examples, skipped = read_swag("swagaf/data/val.csv")
    """
    stem = os.path.splitext(os.path.basename(path))[0]
    examples, skipped, names = [], 0, None
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)  # quoted fields: endings hold commas
        next_line = 1
        for row in reader:
            # A quoted field may span lines; errors name the record's first.
            line, next_line = next_line, reader.line_num + 1
            if not row:
                continue  # a blank line holds no example
            if names is None:
                names = row
                missing = [name for name in _TEXT_COLUMNS if name not in names]
                if missing:
                    raise ValueError(
                        f"{path}, line {line}: the header lacks {missing}; expected the "
                        f"SWAG columns {_TEXT_COLUMNS} (+ 'label'). Received: {names}."
                    )
                continue
            try:
                examples.append(_parse_row(row, names, f"{path}, line {line}", f"{stem}-{line}"))
            except _BadRowError as e:
                if not skip_bad_rows:
                    raise BadRowError(str(e), "skip_bad_rows") from None
                skipped += 1
    return examples, skipped


def _parse_row(row, names, where, guid):
    if len(row) != len(names):
        raise _BadRowError(
            f"{where}: expected {len(names)} comma-separated fields as the header, "
            f"received {len(row)}: {row!r}."
        )
    fields = dict(zip(names, row))
    label = None
    if "label" in fields:
        if fields["label"] not in ("0", "1", "2", "3"):
            raise _BadRowError(f"{where}: expected a label in 0-3, received {fields['label']!r}.")
        label = int(fields["label"])
    endings = tuple(fields[f"ending{k}"] for k in range(NUM_CHOICES))
    return SwagExample(guid, fields["sent1"], fields["sent2"], endings, label)


def encode_swag(examples, tokenizer, max_seq_length=128):
    """Packs each (context, ending) pair as BERT inputs, four rows per example.

    Choice `k` is `[CLS] sent1 [SEP] sent2 + " " + ending_k [SEP]`, the pair
    truncated longest first as `run_classifier.py` (what the paper means by
    "the given sentence (sentence A) and a possible continuation (sentence
    B)", and Hugging Face's `run_swag`). We put `sent2` with the ending, not
    with `sent1`: `sent2` is the first words of the very sentence the ending
    completes (`startphrase` = sent1 + sent2), so segment B reads as the whole
    candidate sentence and the four rows differ only in segment B. Tokenizing
    `sent2 + " " + ending` equals tokenizing them apart and joining, since
    whitespace always splits words.

    Args:
        examples: list of `SwagExample`.
        tokenizer: `keras_bert_impl.tokenizers.BertTokenizer`.
        max_seq_length: int. S, with the special tokens.

    Returns:
        `EncodedSwag`: `x` int32 `(N, 4, S)` arrays; `y` int32 `(N,)` or None
        when the examples have no labels.

    Example:
    >>> encoded = encode_swag(examples, tokenizer, max_seq_length=64)
    >>> encoded.x["input_word_ids"].shape
    (20006, 4, 64)
    """
    if max_seq_length < 4:
        raise ValueError(
            "`max_seq_length` must be at least 4 ([CLS], [SEP], [SEP] and one token). "
            f"Received: {max_seq_length}."
        )
    labeled = {example.label is not None for example in examples}
    if len(labeled) > 1:
        raise ValueError("Either every example has a label or none does (test files).")
    shape = (len(examples), NUM_CHOICES, max_seq_length)
    word_ids = np.full(shape, tokenizer.pad_token_id, np.int32)
    mask = np.zeros(shape, np.int32)
    type_ids = np.zeros(shape, np.int32)
    for n, example in enumerate(examples):
        if len(example.endings) != NUM_CHOICES:
            raise ValueError(
                f"Example {example.guid}: expected {NUM_CHOICES} endings, "
                f"received {len(example.endings)}."
            )
        context = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.context))
        for k, ending in enumerate(example.endings):
            a = list(context)  # truncation is in place; each choice starts whole
            b = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(f"{example.start} {ending}"))
            truncate_seq_pair(a, b, max_seq_length - 3)  # room for [CLS], [SEP], [SEP]
            ids = [tokenizer.cls_token_id, *a, tokenizer.sep_token_id, *b, tokenizer.sep_token_id]
            word_ids[n, k, : len(ids)] = ids
            mask[n, k, : len(ids)] = 1
            type_ids[n, k, len(a) + 2 : len(ids)] = 1  # B and its [SEP]
    x = {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}
    y = None
    if labeled == {True}:
        y = np.asarray([example.label for example in examples], np.int32)
    return EncodedSwag(x, y)
