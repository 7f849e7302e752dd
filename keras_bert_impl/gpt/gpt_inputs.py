"""GPT's fine-tuning input transformations (Radford et al. 2018, Sec. 3.3, Fig. 1).

GPT reads one left-to-right sequence, so structured inputs become token
sequences with three tokens appended to the vocabulary (ids V, V+1, V+2 for
a vocabulary of V; `gpt_config.FINE_TUNING_TOKENS`):

- one text:         `_start_ s _classify_`
- entailment:       `_start_ premise _delimiter_ hypothesis _classify_`
- similarity:       both orders, `(B, 2, S)`:
                    `_start_ a _delimiter_ b _classify_` and
                    `_start_ b _delimiter_ a _classify_`
- multiple choice:  `_start_ context _delimiter_ choice_k _classify_` for each
                    of the C choices, `(B, C, S)`.

The functions work on token-id lists, so any tokenizer fits. Rows are
right-padded with id 0 to `max_seq_length`, and `input_mask` is 1 on the
real tokens. Too-long inputs lose tokens from the end of the longer part
first (the original `train.py` cuts every part to `n_ctx // 2 - 2` tokens;
that gives the same rows when both parts are long and keeps more of a long
part beside a short one); the `_start_`, `_delimiter_` and `_classify_`
tokens are always kept, since the classifier reads the state at
`_classify_`.

Returns int32 numpy dicts `input_word_ids`, `input_mask` that
`GptClassifier`, `GptMultipleChoice` and `GptTokenTagger` take.
"""

import dataclasses

import numpy as np

from keras_bert_impl.tokenizers.pairs import check_same_count
from keras_bert_impl.tokenizers.pairs import count_choices

# B=examples, C=choices (2 for similarity), S=max_seq_length


@dataclasses.dataclass(frozen=True)
class FineTuningIds:
    """The ids of GPT's three fine-tuning tokens.

    Args:
        start: int. `_start_`, first in every row.
        delimiter: int. `_delimiter_`, between the two parts of a pair.
        classify: int. `_classify_`, last in every row; the classifier reads
            the final state here.

    Example:
    >>> FineTuningIds.appended_to(40478)
    FineTuningIds(start=40478, delimiter=40479, classify=40480)
    """

    start: int
    delimiter: int
    classify: int

    def __post_init__(self):
        values = (self.start, self.delimiter, self.classify)
        if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0
               for v in values) or len(set(values)) != 3:
            raise ValueError(
                "The start, delimiter and classify ids must be three different non-negative "
                f"integers. Received: start={self.start!r}, delimiter={self.delimiter!r}, "
                f"classify={self.classify!r}.")

    @classmethod
    def appended_to(cls, vocab_size):
        """The ids the tokens take when appended to a vocabulary of `vocab_size`."""
        return cls(vocab_size, vocab_size + 1, vocab_size + 2)


def _check_length(max_seq_length, minimum, layout):
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, (int, np.integer)) or (
            max_seq_length < minimum):
        raise ValueError(
            f"`max_seq_length` must be an integer >= {minimum} for the {layout} layout "
            f"(its special tokens alone take {minimum - 1}). Received: {max_seq_length!r}.")


def _ids(tokens, what):
    tokens = list(tokens)
    if any(isinstance(t, bool) or not isinstance(t, (int, np.integer)) for t in tokens):
        raise ValueError(f"{what} must be a list of integer token ids. Received: {tokens[:10]!r}.")
    return tokens


def _truncate_pair(a, b, room):
    """Drops tokens from the end of the longer of `a`, `b` until both fit in `room`."""
    a, b = list(a), list(b)
    while len(a) + len(b) > room:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def pack_text(ids, special, max_seq_length):
    """`[_start_, *ids, _classify_]`, ids cut to `max_seq_length - 2`."""
    _check_length(max_seq_length, 2, "single-text")
    ids = _ids(ids, "The text")
    return [special.start, *ids[: max_seq_length - 2], special.classify]


def pack_pair(a, b, special, max_seq_length):
    """`[_start_, *a, _delimiter_, *b, _classify_]`, the longer part cut first."""
    _check_length(max_seq_length, 3, "pair")
    a, b = _truncate_pair(_ids(a, "Part a"), _ids(b, "Part b"), max_seq_length - 3)
    return [special.start, *a, special.delimiter, *b, special.classify]


def _padded(rows, shape):
    """Right-padded int32 `input_word_ids` (pad id 0) and `input_mask` of `shape`."""
    word_ids = np.zeros(shape, np.int32)
    mask = np.zeros(shape, np.int32)
    flat_ids, flat_mask = word_ids.reshape(-1, shape[-1]), mask.reshape(-1, shape[-1])
    for row, ids in enumerate(rows):
        flat_ids[row, : len(ids)] = ids
        flat_mask[row, : len(ids)] = 1
    return {"input_word_ids": word_ids, "input_mask": mask}


def text_inputs(texts, special, max_seq_length):
    """One text per row: `_start_ s _classify_` (CoLA, SST-2).

    Args:
        texts: list of B token-id lists.
        special: `FineTuningIds`.
        max_seq_length: int. S, special tokens included.

    Returns:
        dict of int32 `(B, S)` `input_word_ids`, `input_mask`.

    Example:
    >>> x = text_inputs([[5, 6]], FineTuningIds(10, 11, 12), 6)
    >>> x["input_word_ids"].tolist(), x["input_mask"].tolist()
    ([[10, 5, 6, 12, 0, 0]], [[1, 1, 1, 1, 0, 0]])
    """
    rows = [pack_text(ids, special, max_seq_length) for ids in texts]
    return _padded(rows, (len(rows), max_seq_length))


def entailment_inputs(premises, hypotheses, special, max_seq_length):
    """`_start_ premise _delimiter_ hypothesis _classify_` (MNLI, QNLI, RTE, WNLI).

    Args:
        premises: list of B token-id lists.
        hypotheses: list of B token-id lists.
        special: `FineTuningIds`.
        max_seq_length: int. S, special tokens included.

    Returns:
        dict of int32 `(B, S)` `input_word_ids`, `input_mask`.

    Example:
    >>> entailment_inputs([[5]], [[6, 7]], FineTuningIds(10, 11, 12), 7)["input_word_ids"]
    array([[10,  5, 11,  6,  7, 12,  0]], dtype=int32)
    """
    check_same_count(premises, hypotheses, "premises", "hypotheses")
    rows = [pack_pair(p, h, special, max_seq_length) for p, h in zip(premises, hypotheses)]
    return _padded(rows, (len(rows), max_seq_length))


def similarity_inputs(texts_a, texts_b, special, max_seq_length):
    """Both orders of each pair, `(B, 2, S)` (STS-B, MRPC, QQP).

    Similarity has no natural order, so GPT reads `_start_ a _delimiter_ b
    _classify_` (row 0) and `_start_ b _delimiter_ a _classify_` (row 1),
    and `GptClassifier(similarity=True)` adds their two final states.

    Args:
        texts_a: list of B token-id lists.
        texts_b: list of B token-id lists.
        special: `FineTuningIds`.
        max_seq_length: int. S, special tokens included.

    Returns:
        dict of int32 `(B, 2, S)` `input_word_ids`, `input_mask`.

    Example:
    >>> similarity_inputs([[5]], [[6, 7]], FineTuningIds(10, 11, 12), 6)["input_word_ids"]
    array([[[10,  5, 11,  6,  7, 12],
            [10,  6,  7, 11,  5, 12]]], dtype=int32)
    """
    check_same_count(texts_a, texts_b, "texts_a", "texts_b")
    rows = []
    for a, b in zip(texts_a, texts_b):
        rows += [pack_pair(a, b, special, max_seq_length), pack_pair(b, a, special, max_seq_length)]
    return _padded(rows, (len(texts_a), 2, max_seq_length))


def multiple_choice_inputs(contexts, choices, special, max_seq_length):
    """`_start_ context _delimiter_ choice_k _classify_` for every choice, `(B, C, S)`.

    Each row is cut on its own (the context keeps as much as its choice
    leaves room for), as each is read on its own.

    Args:
        contexts: list of B token-id lists.
        choices: list of B lists of C token-id lists (the same C for all).
        special: `FineTuningIds`.
        max_seq_length: int. S, special tokens included.

    Returns:
        dict of int32 `(B, C, S)` `input_word_ids`, `input_mask`.

    Example:
    >>> x = multiple_choice_inputs([[5]], [[[6], [7, 8]]], FineTuningIds(10, 11, 12), 6)
    >>> x["input_word_ids"].tolist()
    [[[10, 5, 11, 6, 12, 0], [10, 5, 11, 7, 8, 12]]]
    """
    num_choices = count_choices(contexts, choices)
    rows = [pack_pair(context, choice, special, max_seq_length)
            for context, example_choices in zip(contexts, choices) for choice in example_choices]
    return _padded(rows, (len(contexts), num_choices, max_seq_length))
