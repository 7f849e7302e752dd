"""SQuAD for XLNet: windows in XLNet's layout and answers from its logits.

`training.tasks.squad` reads the files, `training.tasks.windows` cuts the paragraph, as for
BERT; what differs is XLNet's own (the original `run_squad.py` and
`squad_utils.py`, Yang et al. 2019): each window is `paragraph <sep>
question <sep> <cls>`, paragraph first, left-padded; "no answer" is the
`<cls>` position, the last one; SentencePiece pieces carry their
characters, so an answer is cut from the paragraph at the predicted
pieces' characters (it may end inside a word) instead of being rebuilt
from `##` pieces.
"""

import dataclasses

import numpy as np

from keras_bert_impl.xlnet.xlnet_inputs import XLNetSpecialIds
from keras_bert_impl.xlnet.xlnet_inputs import left_pad
from keras_bert_impl.xlnet.xlnet_inputs import pack_example
from keras_bert_impl.xlnet.xlnet_tokenizer import SPIECE_UNDERLINE
from training.tasks import squad
from training.tasks.windows import is_max_context
from training.tasks.windows import windows


@dataclasses.dataclass(frozen=True)
class XLNetSquadFeatures:
    """XLNet's SQuAD windows and what decoding needs to read them.

    Attributes:
        x: dict of int32 `(N, S)` `input_word_ids`, `input_type_ids`,
            `input_mask`: `paragraph window <sep> question <sep> <cls>`,
            left-padded.
        y: dict of int32 `(N,)` `start_logits`, `end_logits` (gold
            positions; S-1, `<cls>`, when the window misses the answer or
            there is none); None outside training.
        example_index: int32 `(N,)`. Which example each window reads.
        token_to_orig_map: list of N dicts, position -> word index.
        token_is_max_context: list of N dicts, position -> bool.
        token_chars: list of N dicts, position -> `(start, end)` characters
            of its word the piece spells, or None (then the whole word).
    """

    x: dict
    y: dict
    example_index: np.ndarray
    token_to_orig_map: list
    token_is_max_context: list
    token_chars: list

    def __len__(self):
        return len(self.token_to_orig_map)


def _surface(piece):
    return piece.replace(SPIECE_UNDERLINE, "")


def _piece_chars(word, pieces):
    """Each piece's `(start, end)` characters in `word`, when the pieces spell
    it one character for one (else None each: the piece stands for the word)."""
    lengths = [len(_surface(p)) for p in pieces]
    if sum(lengths) != len(word):
        return [None] * len(pieces)
    ends = np.cumsum(lengths).tolist()
    return [(end - length, end) for end, length in zip(ends, lengths)]


def _improve_answer_span(pieces, start, end, tokenizer, answer):
    """The first sub-span of `pieces[start:end + 1]` that spells the answer
    (pieces' text without "▁" and spaces), as the original BERT's
    `_improve_answer_span`; else the whole words."""
    target = "".join(_surface(p) for p in tokenizer.tokenize(answer))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if "".join(_surface(p) for p in pieces[new_start : new_end + 1]) == target:
                return new_start, new_end
    return start, end


def xlnet_squad_features(examples, tokenizer, max_seq_length=512, doc_stride=128,
                         max_query_length=64, is_training=False):
    """Windows of `paragraph <sep> question <sep> <cls>`, as the original `run_squad.py`.

    Args:
        examples: list of `training.tasks.squad.SquadExample`.
        tokenizer: `XLNetTokenizer`.
        max_seq_length: int. S, special tokens included.
        doc_stride: int. Pieces between window starts.
        max_query_length: int. Question pieces kept (the first).
        is_training: bool. Also make the gold positions `y`.

    Returns:
        `XLNetSquadFeatures`, one row per window, examples in order.
    """
    special = XLNetSpecialIds.of(tokenizer)
    rows, starts, ends, example_rows, to_orig_maps, max_context_maps, char_maps = (
        [], [], [], [], [], [], [])
    for example_index, example in enumerate(examples):
        query = tokenizer.encode(example.question_text)[:max_query_length]
        pieces, piece_word, piece_chars, word_start = _paragraph_pieces(example, tokenizer)
        ids = [tokenizer.piece_to_id(p) for p in pieces]
        answer_start = answer_end = -1
        if is_training and not example.is_impossible:
            answer_start, answer_end = _improve_answer_span(
                pieces, *squad.answer_pieces(example, word_start, len(pieces)), tokenizer,
                example.orig_answer_text)
        max_doc_pieces = max_seq_length - len(query) - 3  # <sep>, <sep>, <cls>
        if max_doc_pieces < 1:
            raise ValueError(
                f"max_seq_length={max_seq_length} leaves no room for the paragraph beside a "
                f"{len(query)}-piece question and 3 special tokens. Raise `max_seq_length` "
                f"or lower `max_query_length` (now {max_query_length}).")
        spans = windows(len(ids), max_doc_pieces, doc_stride)
        for span_index, span in enumerate(spans):
            row = pack_example(ids[span.start : span.end], query, special, max_seq_length)
            offset = max_seq_length - len(row[0])  # the paragraph starts after the padding
            positions = range(span.start, span.end)
            to_orig_maps.append({offset + p - span.start: piece_word[p] for p in positions})
            max_context_maps.append({offset + p - span.start: is_max_context(spans, span_index, p)
                                     for p in positions})
            char_maps.append({offset + p - span.start: piece_chars[p] for p in positions})
            start = end = max_seq_length - 1  # <cls>: no answer in this window
            if is_training and not example.is_impossible and (
                    span.start <= answer_start and answer_end < span.end):
                start = answer_start - span.start + offset
                end = answer_end - span.start + offset
            rows.append(row)
            starts.append(start)
            ends.append(end)
            example_rows.append(example_index)
    y = None
    if is_training:
        y = {"start_logits": np.array(starts, np.int32), "end_logits": np.array(ends, np.int32)}
    return XLNetSquadFeatures(
        x=left_pad(rows, max_seq_length, special.pad), y=y,
        example_index=np.array(example_rows, np.int32), token_to_orig_map=to_orig_maps,
        token_is_max_context=max_context_maps, token_chars=char_maps)


def _paragraph_pieces(example, tokenizer):
    """`(pieces, piece_word, piece_chars, word_start)` of the paragraph: its
    SentencePiece pieces, each piece's word and characters in it
    (`_piece_chars`), and each word's first piece."""
    pieces, piece_word, piece_chars, word_start = [], [], [], []
    for i, word in enumerate(example.doc_tokens):
        word_start.append(len(pieces))
        word_pieces = tokenizer.tokenize(word)
        pieces += word_pieces
        piece_word += [i] * len(word_pieces)
        piece_chars += _piece_chars(word, word_pieces)
    return pieces, piece_word, piece_chars, word_start


def _answer_text(doc_tokens, first, last, first_chars, last_chars):
    """The context's text from word `first` to word `last`, cut at the pieces'
    characters where known (the whole words otherwise)."""
    words = list(doc_tokens[first : last + 1])
    end = last_chars[1] if last_chars else len(words[-1])
    words[-1] = words[-1][:end]
    start = first_chars[0] if first_chars else 0
    words[0] = words[0][start:]
    text = " ".join(words)
    return text if text.strip() else " ".join(doc_tokens[first : last + 1])


def decode_xlnet_squad(examples, features, start_logits, end_logits, n_best_size=20,
                       max_answer_length=30, version_2_with_negative=False,
                       null_score_diff_threshold=0.0):
    """Answer text per question from XLNet's logits, as `training.tasks.squad.decode_predictions`
    (the original `write_predictions`' n-best search), with XLNet's layout:
    the null answer is scored at `<cls>`, the last position, and answers
    are cut from the context at the predicted pieces' characters.

    Args:
        examples: list of `SquadExample`, as given to the features.
        features: `XLNetSquadFeatures` of `examples`.
        start_logits, end_logits: float `(N, S)`, row i for window i.
        n_best_size: int. Candidates per window and answers kept per question.
        max_answer_length: int. Longest answer, in pieces.
        version_2_with_negative: bool. Consider "no answer".
        null_score_diff_threshold: float. "" when the null score beats the
            best span's by more than this (v2).

    Returns:
        `(predictions, nbest, null_odds)`, as `training.tasks.squad.decode_predictions`.
    """

    def span_text(example, row, i, j):  # cut at the pieces' characters
        to_orig, chars = features.token_to_orig_map[row], features.token_chars[row]
        return _answer_text(example.doc_tokens, to_orig[i], to_orig[j], chars[i], chars[j])

    return squad.search_answers(examples, features, start_logits, end_logits, span_text, -1,
                                n_best_size, max_answer_length, version_2_with_negative,
                                null_score_diff_threshold)
