"""CoNLL-2003 NER: read the column files, encode for BERT, decode, write.

The BERT paper's tagging setup (Devlin et al., 2018, section 5.3): each word
is split into WordPieces and the model predicts the word's label at its
first piece only; the other pieces, [CLS], [SEP] and padding are left out of
the loss. Here that is `sample_weight` 0 (with label id 0), so plain
`model.fit(x, y, sample_weight)` trains a per-token softmax on the right
positions and no custom loss is needed.

A sentence longer than `max_seq_length - 2` pieces is either truncated
(the words whose first piece is cut lose their prediction, and the count is
reported) or read in overlapping windows (`training.tasks.windows`), each word then
taking its label from the window where its first piece has the most
context, as the original `run_squad.py` merges document windows.
"""

import dataclasses
import os
import tempfile

import numpy as np

from training.tasks.bad_rows import BadRowError
from training.tasks.windows import Window
from training.tasks.windows import max_context_window
from training.tasks.windows import windows

_DOCSTART = "-DOCSTART-"  # CoNLL-2003's document-boundary line, not a word


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One sentence: its words and one label per word."""

    words: tuple
    labels: tuple


@dataclasses.dataclass(frozen=True)
class ConllData:
    """What `read_conll` read.

    Attributes:
        sentences: list of `Sentence`, in file order.
        label_list: tuple of str. The labels seen, sorted (so the same label
            set gives the same ids whatever the file order; save it with the
            model and pass it to `encode_sentences` for every split).
        skipped_lines: tuple of int. 1-based numbers of the lines that
            `skip_bad_lines=True` dropped (each one word; its sentence kept).
    """

    sentences: list
    label_list: tuple
    skipped_lines: tuple


@dataclasses.dataclass(frozen=True)
class EncodedSentences:
    """Model inputs for tagging, and the map back to sentences and words.

    B=rows (one per sentence, or per window of a long one), S=max_seq_length.

    Attributes:
        x: dict of int32 (B, S) `input_word_ids`, `input_mask`,
            `input_type_ids`.
        y: int32 (B, S). The word's label id at its first piece, 0 elsewhere.
        sample_weight: float32 (B, S). 1 at first pieces, 0 elsewhere.
        sentence_index: int32 (B,). The sentence each row holds.
        word_index: int32 (B, S). The word whose first piece is at that
            position, -1 elsewhere.
        max_context: bool (B, S). True where the row is the word's
            max-context window: the prediction `decode_predictions` keeps.
        num_words: tuple of int. Words per sentence.
        num_truncated_words: int. Words whose first piece did not fit
            (`stride=None` only); they are predicted as `default_label`.
        num_windowed_sentences: int. Sentences read in more than one window.
    """

    x: dict
    y: np.ndarray
    sample_weight: np.ndarray
    sentence_index: np.ndarray
    word_index: np.ndarray
    max_context: np.ndarray
    num_words: tuple
    num_truncated_words: int
    num_windowed_sentences: int


def read_conll(path, label_column=-1, skip_bad_lines=False, encoding="utf-8"):
    """Reads a CoNLL-2003 column file (`word POS chunk NER` per line).

    Fields are split on whitespace; a blank line ends a sentence; a
    `-DOCSTART- -X- -X- O` line is a document boundary and is skipped. Every
    data line must have as many fields as the file's first data line.

    Args:
        path: str. The file (e.g. `eng.train`).
        label_column: int. Which field is the label: -1 for NER, 2 for
            chunking, 1 for POS tags. Field 0 is always the word.
        skip_bad_lines: bool. Drop lines with the wrong number of fields
            (reported in `skipped_lines`) instead of raising.
        encoding: str. Text encoding (the German files are latin-1).

    Returns:
        `ConllData`: sentences, the sorted label list, the skipped lines.

    Example:
    >>> data = read_conll("eng.train")
    >>> data.sentences[0].words[:2], data.label_list[-1]
    (('EU', 'rejects'), 'O')
    """
    sentences, skipped = [], []
    words, labels = [], []
    expected = None
    with open(path, encoding=encoding) as f:
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if not fields or fields[0] == _DOCSTART:
                if words:
                    sentences.append(Sentence(tuple(words), tuple(labels)))
                words, labels = [], []
                continue
            if expected is None:
                expected = len(fields)
                if not -expected <= label_column < expected or label_column % expected == 0:
                    raise ValueError(
                        f"`label_column={label_column}` is not a label field of {path}: its "
                        f"first data line (line {number}) has {expected} fields and field 0 "
                        "is the word. Use -1 for the last field."
                    )
            elif len(fields) != expected:
                if skip_bad_lines:
                    skipped.append(number)
                    continue
                raise BadRowError(
                    f"{path}, line {number}: expected {expected} fields (as the first data "
                    f"line) but got {len(fields)}: {line.rstrip()!r}. Fix the line.",
                    "skip_bad_lines", "lines")
            words.append(fields[0])
            labels.append(fields[label_column])
    if words:
        sentences.append(Sentence(tuple(words), tuple(labels)))
    if not sentences:
        raise ValueError(f"{path} holds no sentences. Check the path and the file format.")
    label_list = tuple(sorted({label for s in sentences for label in s.labels}))
    return ConllData(sentences, label_list, tuple(skipped))


def encode_sentences(sentences, tokenizer, label_list, max_seq_length=128, stride=None):
    """Sentences -> `(x, y, sample_weight)` with each label on its first piece.

    Args:
        sentences: list of `Sentence`.
        tokenizer: `keras_bert_impl.tokenizers.BertTokenizer`.
        label_list: sequence of str. Label ids are indices into it.
        max_seq_length: int. Row length, [CLS] and [SEP] included.
        stride: int or None. None truncates long sentences; an int reads
            them in windows of `max_seq_length - 2` pieces whose starts are
            `stride` pieces apart (the original's `doc_stride`).

    Returns:
        `EncodedSentences`; `fit(enc.x, enc.y, sample_weight=enc.sample_weight)`.

    Example:
    >>> enc = encode_sentences(data.sentences, tokenizer, data.label_list, 128)
    >>> enc.x["input_word_ids"].shape == enc.y.shape
    True
    """
    if max_seq_length < 3:
        raise ValueError(
            "`max_seq_length` must leave room for [CLS], [SEP] and one piece. "
            f"Received: max_seq_length={max_seq_length}."
        )
    label_ids = {label: index for index, label in enumerate(label_list)}
    max_pieces = max_seq_length - 2
    columns = {name: [] for name in ("ids", "mask", "y", "word_index", "max_context", "sentence")}
    num_truncated = num_windowed = 0
    for sentence_index, sentence in enumerate(sentences):
        _check_sentence(sentence_index, sentence, label_ids, label_list)
        pieces, first_piece = _word_pieces(sentence, tokenizer)
        if stride is None:
            spans = [Window(0, min(len(pieces), max_pieces))]
            num_truncated += sum(position >= max_pieces for position in first_piece)
        else:
            spans = windows(len(pieces), max_pieces, stride)
            num_windowed += len(spans) > 1
        best = [max_context_window(spans, position) for position in first_piece]
        word_labels = [label_ids[label] for label in sentence.labels]
        for span_index, span in enumerate(spans):
            _add_window(columns, tokenizer, max_seq_length, pieces, span, first_piece,
                        word_labels, [window == span_index for window in best])
            columns["sentence"].append(sentence_index)
    return _encoded(columns, sentences, max_seq_length, num_truncated, num_windowed)


def _check_sentence(sentence_index, sentence, label_ids, label_list):
    """ValueError unless the sentence has one known label per word."""
    if len(sentence.words) != len(sentence.labels):
        raise ValueError(
            f"Sentence {sentence_index} has {len(sentence.words)} words but "
            f"{len(sentence.labels)} labels; give one label per word."
        )
    unknown = sorted(set(sentence.labels) - set(label_ids))
    if unknown:
        raise ValueError(
            f"Sentence {sentence_index} has labels {unknown} that are not in "
            f"`label_list` {list(label_list)}. Build the label list from every split."
        )


def _word_pieces(sentence, tokenizer):
    """`(piece ids, first_piece)`: the sentence's wordpiece ids and each
    word's first piece."""
    pieces, first_piece = [], []
    for word in sentence.words:
        first_piece.append(len(pieces))
        word_pieces = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))
        # A word that cleans to nothing (a lone control or zero-width
        # character) still needs a position to carry its label.
        pieces += word_pieces or [tokenizer.unk_token_id]
    return pieces, first_piece


def _add_window(columns, tokenizer, max_seq_length, pieces, span, first_piece, word_labels,
                is_best):
    """One row: `[CLS] pieces of span [SEP]`, padded, each word that starts
    in it labelled at its first piece (`is_best`: per word, whether this is
    its max-context window)."""
    ids = [tokenizer.cls_token_id, *pieces[span.start : span.end], tokenizer.sep_token_id]
    padding = max_seq_length - len(ids)
    labels = [0] * max_seq_length
    words = [-1] * max_seq_length
    chosen = [False] * max_seq_length
    for word, position in enumerate(first_piece):
        if span.start <= position < span.end:
            column = position - span.start + 1  # +1 for [CLS]
            labels[column] = word_labels[word]
            words[column] = word
            chosen[column] = is_best[word]
    columns["ids"].append(ids + [tokenizer.pad_token_id] * padding)
    columns["mask"].append([1] * len(ids) + [0] * padding)
    columns["y"].append(labels)
    columns["word_index"].append(words)
    columns["max_context"].append(chosen)


def _encoded(columns, sentences, max_seq_length, num_truncated, num_windowed):
    """`EncodedSentences` of the rows in `columns`."""

    def stacked(name, dtype):  # (B, S); reshape keeps the shape when B = 0
        return np.asarray(columns[name], dtype).reshape(-1, max_seq_length)

    word_ids = stacked("ids", np.int32)
    word_index = stacked("word_index", np.int32)
    return EncodedSentences(
        x={
            "input_word_ids": word_ids,
            "input_mask": stacked("mask", np.int32),
            "input_type_ids": np.zeros_like(word_ids),  # one segment
        },
        y=stacked("y", np.int32),
        # Every window trains on the words it starts, as the original trains
        # on every SQuAD document window; only decoding picks one window.
        sample_weight=(word_index >= 0).astype(np.float32),
        sentence_index=np.asarray(columns["sentence"], np.int32),
        word_index=word_index,
        max_context=stacked("max_context", bool),
        num_words=tuple(len(s.words) for s in sentences),
        num_truncated_words=int(num_truncated),
        num_windowed_sentences=int(num_windowed),
    )


def decode_predictions(logits_or_ids, encoded, label_list, default_label="O"):
    """Per-word label strings from per-piece predictions.

    Each word takes the prediction at its first piece in its max-context
    window; a word truncated away gets `default_label`.

    Args:
        logits_or_ids: (B, S, num_labels) logits or probabilities, or
            (B, S) integer label ids, rows as in `encoded`.
        encoded: `EncodedSentences` the predictions were made on.
        label_list: sequence of str. The list used to encode.
        default_label: str. Label for words with no prediction.

    Returns:
        list of lists of str: one label per word, per sentence.

    Example:
    >>> logits = model.predict(enc.x)
    >>> predictions = decode_predictions(logits, enc, data.label_list)
    """
    values = np.asarray(logits_or_ids)
    if values.ndim == 3:
        ids = values.argmax(axis=-1)  # (B, S, L) -> (B, S)
    elif values.ndim == 2 and np.issubdtype(values.dtype, np.integer):
        ids = values
    else:
        raise ValueError(
            "`logits_or_ids` must be (batch, seq, num_labels) logits or (batch, seq) integer "
            f"ids. Received: shape={values.shape}, dtype={values.dtype}."
        )
    if ids.shape != encoded.word_index.shape:
        raise ValueError(
            f"Predictions have rows and positions {ids.shape} but the encoded data has "
            f"{encoded.word_index.shape}; predict on `encoded.x` in order."
        )
    predictions = [[default_label] * count for count in encoded.num_words]
    rows, columns = np.nonzero(encoded.max_context)
    chosen = ids[rows, columns]
    if chosen.size and (chosen.min() < 0 or chosen.max() >= len(label_list)):
        raise ValueError(
            f"Predicted label ids span {chosen.min()}..{chosen.max()} but `label_list` has "
            f"{len(label_list)} labels; the model's output size must equal it."
        )
    for row, column, label_id in zip(rows, columns, chosen):
        sentence = encoded.sentence_index[row]
        predictions[sentence][encoded.word_index[row, column]] = label_list[label_id]
    return predictions


def write_predictions(path, sentences, predictions):
    """Writes `word gold predicted` lines, a blank line after each sentence.

    This is conlleval's input format (`training.tasks.conll_metrics.conlleval_file`
    and the original `conlleval` script read it). Written to a temporary
    file in the same folder and moved into place, so a crash never leaves a
    half-written file that a later evaluation would score.

    Args:
        path: str. Output file.
        sentences: list of `Sentence` (words and gold labels).
        predictions: list of lists of str, one label per word.
    """
    if len(sentences) != len(predictions):
        raise ValueError(
            f"Got {len(sentences)} sentences but {len(predictions)} predictions; they pair "
            "up one to one."
        )
    lines = []
    for index, (sentence, predicted) in enumerate(zip(sentences, predictions)):
        if len(predicted) != len(sentence.words):
            raise ValueError(
                f"Sentence {index} has {len(sentence.words)} words but {len(predicted)} "
                "predicted labels; give one per word."
            )
        for word, gold, label in zip(sentence.words, sentence.labels, predicted):
            if len(word.split()) != 1:
                # conlleval splits lines on spaces; such a word would shift columns.
                raise ValueError(f"Sentence {index}: word {word!r} is empty or has whitespace.")
            lines.append(f"{word} {gold} {label}\n")
        lines.append("\n")
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".conll-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.writelines(lines)
        os.chmod(temporary, 0o644)  # mkstemp makes it owner-only; a report file is shared
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
