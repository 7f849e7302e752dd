"""Your own labelled texts: CSV, TSV or JSON Lines files as classification examples.

`read_text_file` reads one file of rows with a text column, optionally a
second text column (sentence pairs) and a label column, the columns named by
the file's header (CSV/TSV) or keys (JSON Lines):

- the format comes from the extension: `.csv`, `.tsv`, `.jsonl`,
  `.json-lines` or `.ndjson`;
- a CSV/TSV's delimiter is sniffed (`csv.Sniffer` on the first 64 KiB, among
  `,` `;` tab `|`, checked against the header), so `;`-separated exports of
  spreadsheet programs read as they are; quoted fields, doubled quotes and
  newlines inside quotes are the `csv` module's;
- every example remembers the physical line its record starts on, and every
  error names the file, that line and the column: a column the header lacks,
  an empty text or label, a row with the wrong number of fields, a label the
  training file never had (dev), bytes that are not UTF-8, JSON that does
  not parse. `skip_bad_input=True` skips such rows instead and counts them
  by reason (a missing header column or an unknown extension still stops).

Labels are strings (a JSON number or boolean as JSON writes it: `1`,
`true`), stripped of surrounding spaces; `label_list` sorts the training
file's, so label ids stay the same across runs. The scores are
`training.tasks.text_classification_metrics`.
"""

import bisect
import collections
import csv
import dataclasses
import io
import json
import math
import os

from training.tasks.bad_rows import BadRowError
from training.tasks.glue import InputExample

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json-lines": "jsonl",
           ".ndjson": "jsonl"}
DELIMITERS = ",;\t|"
SNIFF_CHARS = 65536


class BadInputError(ValueError):
    """A file that cannot be read as asked; the message names file, line and column."""


class _BadRow(BadInputError):
    """One bad row: skipped and counted under `skip_bad_input=True`."""

    def __init__(self, message, reason):
        super().__init__(message)
        self.reason = reason


class _BadRowToSkip(BadRowError, BadInputError):
    """A bad row not skipped: its hint names `skip_bad_input` (a command
    line, `BadRowError.with_flag`, names its flag instead)."""


@dataclasses.dataclass(frozen=True)
class TextFile:
    """One file read: `examples` (`training.tasks.glue.InputExample`, guid
    `"{split}-{line}"`, label None when no label column was asked for),
    `lines` (the physical line each example's record starts on, 1-based) and
    `skipped` (reason -> rows skipped)."""

    path: str
    examples: list
    lines: list
    skipped: dict

    @property
    def num_skipped(self):
        return sum(self.skipped.values())


def file_format(path):
    """`"csv"`, `"tsv"` or `"jsonl"` from the file's extension."""
    lowered = path.lower()
    for extension, kind in FORMATS.items():
        if lowered.endswith(extension):
            return kind
    raise BadInputError(f"{path}: unknown format; name the file *.csv, *.tsv or *.jsonl "
                        f"(accepted: {', '.join(FORMATS)}).")


def read_text_file(path, text_column, label_column=None, text_b_column=None, labels=None,
                   skip_bad_input=False, split=None):
    """Reads a CSV, TSV or JSON Lines file of texts (and labels).

    Args:
        path: str. The file; its extension says the format.
        text_column: str. The text's column (header name or JSON key).
        label_column: str or None. The label's column; None reads no labels
            (a test file).
        text_b_column: str or None. The second text of sentence pairs.
        labels: tuple of str or None. The labels allowed (dev: the training
            file's); None allows any.
        skip_bad_input: bool. Skip and count bad rows instead of raising.
        split: str or None. Names the examples (`"{split}-{line}"`); None:
            the file's stem.

    Returns:
        A `TextFile`.

    Raises:
        BadInputError: naming the file, line and column of what is wrong.

    Example:
    >>> train = read_text_file("news.csv", "title", "label", text_b_column="body")
    >>> train.examples[0].text_a, train.examples[0].label, train.lines[0]
    ('Markets rally as rates hold', 'business', 2)
    """
    kind = file_format(path)
    text = _file_text(path)
    columns = [c for c in (text_column, text_b_column, label_column) if c]
    reader = _read_jsonl if kind == "jsonl" else _read_csv
    examples, lines, skipped = [], [], {}
    stem = split or os.path.splitext(os.path.basename(path))[0]
    kinds = {}  # JSON type of the labels -> first line: an integer among strings is named
    for line, values in reader(path, text, columns, kind):
        if label_column and isinstance(values, dict) and values.get(label_column) is not None:
            _check_label_kind(path, line, values[label_column], label_column, kinds)
        try:
            texts, label = _check_row(path, line, values, text_column, text_b_column,
                                      label_column, labels)
        except _BadRow as e:
            if not skip_bad_input:
                raise _BadRowToSkip(str(e), "skip_bad_input") from None
            skipped[e.reason] = skipped.get(e.reason, 0) + 1
            continue
        examples.append(InputExample(f"{stem}-{line}", *texts, label=label))
        lines.append(line)
    if not examples:
        raise BadInputError(f"{path}: no rows{' left after skipping bad ones' if skipped else ''}.")
    return TextFile(path, examples, lines, skipped)


def _file_text(path):
    """The file's text, BOM removed."""
    if not os.path.isfile(path):
        raise BadInputError(f"{path}: no such file.")
    with open(path, "rb") as f:
        raw = f.read()
    # Bytes that are not UTF-8 become lone surrogates, found per row below,
    # so one bad row names its line (or is skipped) instead of failing the file.
    return raw.decode("utf-8", "surrogateescape").removeprefix("\ufeff")


def _check_label_kind(path, line, raw, label_column, kinds):
    """BadInputError when a JSON label's type (`raw`, on `line`) differs from
    the first label's; `kinds` records each type's first line."""
    kinds.setdefault(_json_kind(raw), line)
    if len(kinds) > 1:
        (first, at), (second, now) = list(kinds.items())[:2]
        raise BadInputError(
            f"{path}, line {now}, column {label_column!r}: a {second} label "
            f"({json.dumps(raw)[:40]}) among {first} labels (the first on line {at}). "
            "Write every label the same way (all strings, or all numbers).")


def label_list(examples, allow_many_labels=False):
    """The sorted label strings of `examples`; at least two are needed.

    Labels that look like a measurement rather than classes stop here unless
    `allow_many_labels`: real numbers ("0.37"; each value would become a
    class of its own), or a column where most labels occur once (of 10 or
    more labels): a regression target, or the wrong column.
    """
    found = sorted({e.label for e in examples})
    if len(found) < 2:
        raise BadInputError(f"Classification needs at least 2 labels; the training file has "
                            f"{found}.")
    if allow_many_labels:
        return tuple(found)
    counts = collections.Counter(e.label for e in examples)
    reals = [label for label in found if _is_real(label) and not _is_integer(label)]
    if reals and all(_is_real(label) for label in found):
        raise BadInputError(
            f"The labels look like real numbers ({', '.join(repr(x) for x in reals[:5])}, ...; "
            f"{len(found)} values in {len(examples)} rows): classification would make each "
            "value a class. Predict a number with a regression task, or name the right "
            "--label_column; --allow_many_labels to go on.")
    once = [label for label in found if counts[label] == 1]
    if len(found) >= 10 and len(once) > len(found) / 2:
        raise BadInputError(
            f"{len(once)} of the {len(found)} labels occur once in {len(examples)} rows (e.g. "
            f"{', '.join(repr(x) for x in once[:5])}): a classifier cannot learn those. Is "
            "--label_column a text or an id column? --allow_many_labels to go on.")
    return tuple(found)


def _json_kind(value):
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "true/false"
    return "number" if isinstance(value, int | float) else type(value).__name__


def _is_real(text):
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _is_integer(text):
    return text.lstrip("+-").isdigit()


# --- Reading ---------------------------------------------------------------------------------


def _line_starts(text):
    """Offset of each physical line in `text`, as the `csv` module counts lines."""
    starts, offset = [], 0
    for line in io.StringIO(text, newline=""):
        starts.append(offset)
        offset += len(line)
    return starts or [0]


def _sniff_delimiter(path, text, columns, kind):
    """The delimiter whose header holds every asked-for column: csv.Sniffer's
    guess first, the extension's next, then the others; the extension's if
    none fits (the missing-column error then shows that header)."""
    default = "\t" if kind == "tsv" else ","
    sample = text[:SNIFF_CHARS]
    if len(text) > SNIFF_CHARS and "\n" in sample:
        sample = sample[: sample.rindex("\n")]  # whole lines only
    try:
        sniffed = csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:
        sniffed = default
    candidates = [sniffed, default] + [d for d in DELIMITERS if d not in (sniffed, default)]
    header = text.splitlines()[0] if text else ""
    for delimiter in candidates:
        names = [n.strip() for n in next(csv.reader([header], delimiter=delimiter), [])]
        if all(c in names for c in columns):
            return delimiter
    return default


def _read_csv(path, text, columns, kind):
    """`(line, {column: value})` per record of a CSV/TSV, the header checked."""
    delimiter = _sniff_delimiter(path, text, columns, kind)
    starts = _line_starts(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quotechar='"',
                        doublequote=True)
    shown = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}[delimiter]
    next_line, names = 1, None
    while True:
        line = next_line
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:  # e.g. a NUL byte, or a field past csv's size limit
            raise BadInputError(f"{path}, line {reader.line_num}: not {kind.upper()} ({e}).") \
                from None
        next_line = reader.line_num + 1  # a quoted field may span lines; name the first
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # a blank line holds no record
        if names is None:
            names = [n.strip() for n in row]
            if any(_is_surrogate(ch) for name in names for ch in name):
                raise BadInputError(f"{path}, line 1: the header is not UTF-8; save the "
                                    "file as UTF-8.")
            repeated = sorted({n for n in names if names.count(n) > 1 and n in columns})
            if repeated:
                at = [i + 1 for i, n in enumerate(names) if n == repeated[0]]
                raise BadInputError(
                    f"{path}, line 1: the header names column {repeated[0]!r} more than once "
                    f"(fields {', '.join(map(str, at))}); rename one.")
            missing = [c for c in columns if c not in names]
            if missing:
                raise BadInputError(
                    f"{path}, line 1: no column {missing[0]!r} in the header ({shown}-"
                    f"separated, sniffed): {names}. Name the column with --text_column, "
                    "--text_b_column or --label_column.")
            continue
        if len(row) != len(names):
            where = names[len(row)] if len(row) < len(names) else f"{len(names) + 1} (past " \
                f"the header's {len(names)})"
            yield line, _BadRow(
                f"{path}, line {line}, column {where!r}: expected {len(names)} {shown}-separated "
                f"fields (the header's), found {len(row)}"
                f"{' (an unclosed quote?)' if len(row) < len(names) else ''}.", "wrong fields")
            continue
        values = {c: row[names.index(c)] for c in columns}
        bad = _undecodable_field(path, text, starts, line, values)
        yield line, bad or values
    if names is None:
        raise BadInputError(f"{path}: empty file (no header).")


def _read_jsonl(path, text, columns, kind):
    """`(line, {column: value})` per JSON object line."""
    # "\n" only: U+2028 and friends may sit raw inside JSON strings.
    for line, record in enumerate(text.split("\n"), start=1):
        record = record.removesuffix("\r")
        if not record.strip():
            continue
        try:
            value = json.loads(record)
        except json.JSONDecodeError as e:
            yield line, _BadRow(f"{path}, line {line}, column {e.colno}: not JSON ({e.msg}).",
                                "not JSON")
            continue
        if not isinstance(value, dict):
            yield line, _BadRow(f"{path}, line {line}, column 1: expected a JSON object "
                                f"{{...}}, found {type(value).__name__}.", "not an object")
            continue
        missing = [c for c in columns if c not in value]
        if missing:
            yield line, _BadRow(f"{path}, line {line}, column {missing[0]!r}: no such key; the "
                                f"object has {sorted(value)}.", "missing column")
            continue
        values = {c: value[c] for c in columns}
        position = next((i for i, ch in enumerate(record) if _is_surrogate(ch)), None)
        if position is not None:
            key = next((c for c, v in values.items() if isinstance(v, str)
                        and any(map(_is_surrogate, v))), None)
            where = f"{key!r} (character {position + 1})" if key else position + 1
            yield line, _not_utf8(path, line, where, record[position])
            continue
        yield line, values


def _is_surrogate(ch):
    return "\udc80" <= ch <= "\udcff"  # an undecodable byte under surrogateescape


def _not_utf8(path, line, where, ch):
    byte = ord(ch) - 0xDC00
    return _BadRow(f"{path}, line {line}, column {where}: byte 0x{byte:02x} is not UTF-8; save "
                   "the file as UTF-8.", "not UTF-8")


def _undecodable_field(path, text, starts, line, values):
    """A `_BadRow` when a field of the record starting at `line` holds bytes
    that are not UTF-8 (naming their physical line and column), else None."""
    for column, value in values.items():
        ch = next((c for c in value if _is_surrogate(c)), None)
        if ch is not None:
            position = text.index(ch, starts[line - 1])
            at = bisect.bisect_right(starts, position)  # the 1-based physical line
            return _not_utf8(path, at, f"{column!r} (character {position - starts[at - 1] + 1})",
                             ch)
    return None


def _check_row(path, line, values, text_column, text_b_column, label_column, labels):
    """`([text_a(, text_b)], label)` of one record, or `_BadRow` raised."""
    if isinstance(values, _BadRow):
        raise values
    texts = []
    for column in (text_column, text_b_column):
        if not column:
            continue
        value = values[column]
        if value is not None and not isinstance(value, str):
            raise _BadRow(f"{path}, line {line}, column {column!r}: expected text, found "
                          f"{json.dumps(value)[:80]}.", "not text")
        if not value or not value.strip():
            raise _BadRow(f"{path}, line {line}, column {column!r}: empty text.", "empty text")
        texts.append(value)
    label = None
    if label_column:
        label = values[label_column]
        label = (label if isinstance(label, str) else json.dumps(label)).strip()
        if not label or label == "null":
            raise _BadRow(f"{path}, line {line}, column {label_column!r}: empty label.",
                          "empty label")
        if labels is not None and label not in labels:
            shown = ", ".join(repr(x) for x in labels[:20]) + (", ..." if len(labels) > 20 else "")
            raise _BadRow(f"{path}, line {line}, column {label_column!r}: label {label!r} is "
                          f"not in the training file (its {len(labels)} labels: {shown}).",
                          "unseen label")
    return texts, label
