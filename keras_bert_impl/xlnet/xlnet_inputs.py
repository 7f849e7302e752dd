"""XLNet's fine-tuning input layouts (the original `classifier_utils.py`, `run_squad.py`).

XLNet reads a text, or a pair, with its two special tokens after the text:

- one text:         `A <sep> <cls>`
- a pair:           `A <sep> B <sep> <cls>`
- multiple choice:  `context <sep> choice_k <sep> <cls>`, one row per choice
- SQuAD:            `paragraph <sep> question <sep> <cls>`

`<cls>` comes LAST: the classifier summarises a row by its last state
(`summary_type="last"`), which has attended to every token. Rows are padded
on the LEFT (`<pad>` ids), so `<cls>` is always at position S-1, and
`input_mask` is 1 on PADDING and 0 on tokens (the original's convention, the
inverse of BERT's). Segment ids: A and its `<sep>` 0, B and its `<sep>` 1,
`<cls>` 2, padding 4 (`SEG_ID_PAD` of `classifier_utils.py`; transformers'
tokenizer pads them with 3, and the original pads ids with 0 where
transformers uses `<pad>`): padding is never attended to, so neither choice
changes the outputs at real positions. Nor does the padding's side: relative
attention sees only distances between tokens, so a row's real states are
the same whatever number of padding positions precede them (the original
SQuAD code pads on the right).

Too long inputs are cut as the original `_truncate_seq_pair`: a text alone
to S-2 tokens; a pair one token at a time from the end of the longer part
(B when equal) until it fits in S-3, so a short part is kept whole.

SQuAD puts the paragraph first, as the original `run_squad.py` ("during
pretraining, B is always shorter than A") and transformers' SQuAD processor
for left-padding tokenizers do: a document window is A, the question B.

The readers in `training/tasks/` encode BERT's way (`[CLS] A [SEP] B [SEP]`, right
padding, `input_mask` 1 on tokens); `from_bert_layout` rearranges such rows
into XLNet's, column for column, and says where each position came from, so
per-position arrays (tagging labels, maps to words) follow their tokens.

The padded layouts are dicts of int32 numpy arrays `input_word_ids`,
`input_type_ids`, `input_mask`: what `XLNetClassifier` and the other task
models take.
"""

import dataclasses

import numpy as np

from keras_bert_impl.tokenizers.pairs import check_same_count
from keras_bert_impl.tokenizers.pairs import count_choices
from keras_bert_impl.tokenizers.pairs import truncate_seq_pair
from keras_bert_impl.xlnet.xlnet_tokenizer import SEG_ID_A
from keras_bert_impl.xlnet.xlnet_tokenizer import SEG_ID_B
from keras_bert_impl.xlnet.xlnet_tokenizer import SEG_ID_CLS
from keras_bert_impl.xlnet.xlnet_tokenizer import SEG_ID_PAD

# N=rows, B=examples, C=choices, S=max_seq_length

INPUT_NAMES = ("input_word_ids", "input_type_ids", "input_mask")


@dataclasses.dataclass(frozen=True)
class XLNetSpecialIds:
    """The ids of XLNet's `<sep>`, `<cls>` and `<pad>`.

    Args:
        sep: int. `<sep>`, after each part (4 in XLNet's SentencePiece model).
        cls: int. `<cls>`, last in every row (3).
        pad: int. `<pad>`, the padding id (5).

    Example (a tokenizer's ids; `XLNetTokenizer("spiece.model")` of XLNet's
    released model gives these):
    >>> import types
    >>> XLNetSpecialIds.of(types.SimpleNamespace(sep_id=4, cls_id=3, pad_id=5))
    XLNetSpecialIds(sep=4, cls=3, pad=5)
    """

    sep: int
    cls: int
    pad: int

    def __post_init__(self):
        values = (self.sep, self.cls, self.pad)
        if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0
               for v in values) or len(set(values)) != 3:
            raise ValueError(
                "The sep, cls and pad ids must be three different non-negative integers. "
                f"Received: sep={self.sep!r}, cls={self.cls!r}, pad={self.pad!r}.")

    @classmethod
    def of(cls, tokenizer):
        """The ids an `XLNetTokenizer` (or `GraphXLNetTokenizer`) reads from its model."""
        return cls(int(tokenizer.sep_id), int(tokenizer.cls_id), int(tokenizer.pad_id))


def _check_length(max_seq_length, minimum):
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, (int, np.integer)) or (
            max_seq_length < minimum):
        raise ValueError(
            f"`max_seq_length` must be an integer >= {minimum}: the special tokens and at least "
            f"one token. Received: max_seq_length={max_seq_length!r}.")


def _ids(tokens, what):
    tokens = list(tokens)
    if any(isinstance(t, bool) or not isinstance(t, (int, np.integer)) for t in tokens):
        raise ValueError(f"{what} must be a list of integer token ids. Received: {tokens[:10]!r}.")
    return tokens


def pack_example(ids_a, ids_b, special, max_seq_length):
    """One row, unpadded: `A <sep> <cls>`, or `A <sep> B <sep> <cls>` when
    `ids_b` is a list (an empty one too, as transformers' tokenizer), cut to
    `max_seq_length` as the original.

    Args:
        ids_a: list of int. Part A's token ids.
        ids_b: list of int, or None for a single text.
        special: `XLNetSpecialIds`.
        max_seq_length: int. S, special tokens included.

    Returns:
        `(ids, segment_ids)`, two lists of equal length <= S.

    Example:
    >>> pack_example([10, 11], [20], XLNetSpecialIds(4, 3, 5), 8)
    ([10, 11, 4, 20, 4, 3], [0, 0, 0, 1, 1, 2])
    """
    a = _ids(ids_a, "Part A")
    if ids_b is None:
        _check_length(max_seq_length, 3)
        a = a[: max_seq_length - 2]
        return [*a, special.sep, special.cls], [SEG_ID_A] * (len(a) + 1) + [SEG_ID_CLS]
    _check_length(max_seq_length, 4)
    b = _ids(ids_b, "Part B")
    truncate_seq_pair(a, b, max_seq_length - 3)
    ids = [*a, special.sep, *b, special.sep, special.cls]
    segment_ids = [SEG_ID_A] * (len(a) + 1) + [SEG_ID_B] * (len(b) + 1) + [SEG_ID_CLS]
    return ids, segment_ids


def left_pad(rows, max_seq_length, pad_id, shape=None):
    """Packed `(ids, segment_ids)` rows -> left-padded int32 arrays.

    Args:
        rows: list of N `(ids, segment_ids)` of at most S each.
        max_seq_length: int. S.
        pad_id: int. `<pad>`'s id.
        shape: the arrays' shape, `(N, S)` by default (e.g. `(B, C, S)`).

    Returns:
        dict of int32 `input_word_ids` (padded with `pad_id`),
        `input_type_ids` (padding 4) and `input_mask` (1 on padding).

    Example:
    >>> left_pad([([10, 4, 3], [0, 0, 2])], 5, pad_id=5)["input_word_ids"]
    array([[ 5,  5, 10,  4,  3]], dtype=int32)
    """
    shape = (len(rows), max_seq_length) if shape is None else tuple(shape)
    word_ids = np.full((len(rows), max_seq_length), pad_id, np.int32)
    type_ids = np.full((len(rows), max_seq_length), SEG_ID_PAD, np.int32)
    mask = np.ones((len(rows), max_seq_length), np.int32)
    for row, (ids, segment_ids) in enumerate(rows):
        if len(ids) != len(segment_ids) or not 0 < len(ids) <= max_seq_length:
            raise ValueError(
                f"Row {row} has {len(ids)} ids and {len(segment_ids)} segment ids; they must "
                f"be equal in number, 1 to max_seq_length={max_seq_length}.")
        start = max_seq_length - len(ids)
        word_ids[row, start:] = ids
        type_ids[row, start:] = segment_ids
        mask[row, start:] = 0
    return {"input_word_ids": word_ids.reshape(shape), "input_type_ids": type_ids.reshape(shape),
            "input_mask": mask.reshape(shape)}


def text_inputs(texts_a, texts_b, special, max_seq_length):
    """Texts or pairs as XLNet's classifier reads them (GLUE), `(N, S)`.

    Args:
        texts_a: list of N token-id lists.
        texts_b: list of N token-id lists (None entries: that row is a
            single text), or None: every row is a single text.
        special: `XLNetSpecialIds`.
        max_seq_length: int. S, special tokens included.

    Returns:
        dict of int32 `(N, S)` `input_word_ids`, `input_type_ids`, `input_mask`.

    Example:
    >>> x = text_inputs([[10, 11]], [[20]], XLNetSpecialIds(4, 3, 5), 8)
    >>> x["input_word_ids"].tolist(), x["input_type_ids"].tolist(), x["input_mask"].tolist()
    ([[5, 5, 10, 11, 4, 20, 4, 3]], [[4, 4, 0, 0, 0, 1, 1, 2]], [[1, 1, 0, 0, 0, 0, 0, 0]])
    """
    if texts_b is None:
        texts_b = [None] * len(texts_a)
    check_same_count(texts_a, texts_b, "texts_a", "texts_b")
    rows = [pack_example(a, b, special, max_seq_length) for a, b in zip(texts_a, texts_b)]
    return left_pad(rows, max_seq_length, special.pad)


def multiple_choice_inputs(contexts, choices, special, max_seq_length):
    """`context <sep> choice_k <sep> <cls>` for every choice, `(B, C, S)`.

    Each row is cut on its own (longer part first), as each is read on its
    own; the original RACE code reads one row per choice too.

    Args:
        contexts: list of B token-id lists.
        choices: list of B lists of C token-id lists (the same C for all).
        special: `XLNetSpecialIds`.
        max_seq_length: int. S, special tokens included.

    Returns:
        dict of int32 `(B, C, S)` `input_word_ids`, `input_type_ids`, `input_mask`.

    Example:
    >>> x = multiple_choice_inputs([[10]], [[[20], [21, 22]]], XLNetSpecialIds(4, 3, 5), 6)
    >>> x["input_word_ids"].tolist()
    [[[5, 10, 4, 20, 4, 3], [10, 4, 21, 22, 4, 3]]]
    """
    num_choices = count_choices(contexts, choices)
    rows = [pack_example(context, choice, special, max_seq_length)
            for context, example_choices in zip(contexts, choices) for choice in example_choices]
    return left_pad(rows, max_seq_length, special.pad,
                    shape=(len(contexts), num_choices, max_seq_length))


def from_bert_layout(x, special):
    """Rows encoded BERT's way, rearranged into XLNet's layout.

    A row `[c] A [s] (B [s])` followed by padding, with `input_mask` 1 on
    its n tokens (what `training.tasks.glue.encode_examples`, `training.tasks.swag.encode_swag`
    and `training.tasks.conll.encode_sentences` write), becomes `A [s] (B [s]) [c]`
    after S - n padding positions: its first token moves to the end, the
    others keep their order. Encode with `<cls>` and `<sep>` as the
    tokenizer's "[CLS]" and "[SEP]" ids and `<pad>` as its padding, and the
    result is XLNet's layout; the truncation is the same (both have S-2
    places for one text and S-3 for a pair).

    Args:
        x: dict of int `(..., S)` `input_word_ids`, `input_type_ids`
            (A 0, B 1), `input_mask` (1 on tokens, right padding).
        special: `XLNetSpecialIds`.

    Returns:
        `(inputs, source)`: `inputs` the dict of int32 `(..., S)` arrays in
        XLNet's layout (`input_mask` 1 on padding, segment ids A 0, B 1,
        `<cls>` 2, padding 4); `source` int `(..., S)`, the column of the
        BERT row each position came from: move a per-position array
        `(..., S)` (labels, maps to words) with
        `np.take_along_axis(array, source, axis=-1)`.

    Example:
    >>> bert = {"input_word_ids": np.array([[3, 10, 4, 0]]),
    ...         "input_type_ids": np.zeros((1, 4)), "input_mask": np.array([[1, 1, 1, 0]])}
    >>> x, source = from_bert_layout(bert, XLNetSpecialIds(4, 3, 5))
    >>> x["input_word_ids"].tolist(), source.tolist()
    ([[5, 10, 4, 3]], [[3, 1, 2, 0]])
    """
    missing = sorted(set(INPUT_NAMES) - set(x))
    if missing:
        raise ValueError(f"`x` must hold {list(INPUT_NAMES)}. Missing: {missing}.")
    shape = np.shape(x["input_word_ids"])
    length = shape[-1]
    mask = np.asarray(x["input_mask"]).reshape(-1, length)  # (N, S)
    n = mask.sum(axis=1)  # (N,) tokens per row
    columns = np.arange(length)
    if not np.array_equal(mask, columns[None, :] < n[:, None]) or (n < 1).any():
        raise ValueError(
            "`input_mask` must be 1 on each row's first n >= 1 positions and 0 after them "
            "(BERT's layout: tokens first, then padding).")
    padding = (length - n)[:, None]  # (N, 1)
    # Padding first (from the BERT row's padding), then tokens 1..n-1, then token 0.
    source = np.where(columns[None, :] < padding, n[:, None] + columns[None, :],
                      columns[None, :] - padding + 1)  # (N, S)
    source[:, -1] = 0
    is_padding = columns[None, :] < padding  # (N, S)
    word_ids = np.take_along_axis(np.asarray(x["input_word_ids"]).reshape(-1, length), source, 1)
    type_ids = np.take_along_axis(np.asarray(x["input_type_ids"]).reshape(-1, length), source, 1)
    type_ids[:, -1] = SEG_ID_CLS
    inputs = {
        "input_word_ids": np.where(is_padding, special.pad, word_ids),
        "input_type_ids": np.where(is_padding, SEG_ID_PAD, type_ids),
        "input_mask": is_padding,
    }
    inputs = {k: v.astype(np.int32).reshape(shape) for k, v in inputs.items()}
    return inputs, source.reshape(shape)
