"""XLNet's pretraining records, on token ids: streams, A/B splits, span masks.

A port of the original XLNet `data_utils.py` (`_create_data`, `batchify`,
`_split_a_and_b`, `_sample_mask`, `create_tfrecords`; Yang et al. 2019):

1. The documents become one token stream: sentences back to back, each
   document followed by `<eod>`, and a sentence id flipping at every
   sentence (`<eod>` shares the id of the sentence it ends), so sentence
   boundaries are where the id changes.
2. `batchify` cuts the stream into B rows of T tokens (with `bi_data`, B / 2
   rows and, for every replica, the same rows reversed).
3. At every R-th step of each row, a record: the R reuse tokens, then A,
   which follows them in the text, and B: half the time (or when A's text
   has no sentence boundary) from a random place of the same row, else the
   text after A; A and B are cut at sentence boundaries and trimmed, longer
   one first, to L - R - 3 tokens together.
4. Span masking (`sample_mask`): spans of n <= 5 tokens, p(n) ∝ 1 / n, each
   in a context of `n * mask_alpha // mask_beta` tokens, starting at a word
   start, until the part's share of `num_predict` is reached; single
   random tokens make up what the spans leave short.

As the original (its `_sample_mask` tests the span's first piece where it
means its end; zihangdai/xlnet pull request 16, which the authors found
trains as well), a span is n pieces from a word start; `whole_word_spans`
makes it n whole words instead. Randomness comes from one
`numpy.random.Generator` seeded by `random_seed`, drawn in the original's
order (the original mixes `random` and `np.random`; its stream is not
reproduced, its rules and statistics are).
"""

import numpy as np

from tf_records.xlnet.schema import SEGMENT_A
from tf_records.xlnet.schema import SEGMENT_B
from tf_records.xlnet.schema import SEGMENT_CLS

# N=tokens in the stream, B=batch (rows), T=tokens per row, L=seq_len, R=reuse_len

MAX_GRAM = 5  # the original's `max_gram`: spans of 1..5 tokens
_NGRAM_PROBABILITIES = 1.0 / np.arange(1, MAX_GRAM + 1) / (1.0 / np.arange(1, MAX_GRAM + 1)).sum()
_NGRAM_CDF = _NGRAM_PROBABILITIES.cumsum() / _NGRAM_PROBABILITIES.cumsum()[-1]  # as numpy's choice


def document_stream(documents, eod_id=None):
    """Documents -> the token stream and its sentence ids, as `_create_data`.

    Args:
        documents: iterable of documents, each a list of sentences, each a
            list of token ids. Empty sentences are skipped (the original
            would flip the sentence id on them, merging their neighbours).
        eod_id: optional int. Appended after every document, with the
            sentence id of the document's last sentence (the original's
            `use_eod`); None appends nothing.

    Returns:
        `(ids, sent_ids, documents, sentences)`: int32 `(N,)`, bool `(N,)`
        (flips at every sentence boundary), and the counts read.

    Example:

    >>> ids, sent_ids, _, _ = document_stream([[[10, 11], [12]], [[13]]], eod_id=7)
    >>> ids.tolist(), sent_ids.astype(int).tolist()
    ([10, 11, 12, 7, 13, 7], [1, 1, 0, 0, 1, 1])
    """
    chunks, flags = [], []
    sent_id, documents_read, sentences = True, 0, 0
    for document in documents:
        for sentence in document:
            if len(sentence):
                chunks.append(np.asarray(sentence, np.int64))
                flags.append(np.full(len(sentence), sent_id))
                sent_id = not sent_id
                sentences += 1
        if eod_id is not None:  # a blank line: the original flips twice around <eod>
            chunks.append(np.array([eod_id], np.int64))
            flags.append(np.array([not sent_id]))
        documents_read += 1
    if not chunks:
        return np.zeros(0, np.int32), np.zeros(0, bool), documents_read, sentences
    return (np.concatenate(chunks).astype(np.int32), np.concatenate(flags), documents_read,
            sentences)


def batchify(ids, sent_ids, schema):
    """The stream -> B rows, as the original's `batchify` (and its `bi_data` layout).

    Returns:
        `(rows, row_sent_ids, reverse)`: int32 `(B, T)`, bool `(B, T)`, and
        bool `(B,)`, True on the rows that read their stream backwards.
        Without `bi_data`, row k is the k-th of B equal pieces of the
        stream; with it, replica c's rows are its B / (2 C) pieces, then
        the same pieces reversed.
    """
    b, cores = schema.batch_size, schema.num_cores
    streams = b // 2 if schema.bi_data else b
    steps = len(ids) // streams
    rows = ids[:streams * steps].reshape(streams, steps)  # (B or B / 2, T)
    row_sent_ids = sent_ids[:streams * steps].reshape(streams, steps)
    if not schema.bi_data:
        return rows, row_sent_ids, np.zeros(b, bool)
    per_core = b // cores
    out = []
    for values in (rows, row_sent_ids):
        forward = values.reshape(cores, 1, per_core // 2, steps)  # (C, 1, B / 2C, T)
        both = np.concatenate([forward, forward[..., ::-1]], axis=1)  # (C, 2, B / 2C, T)
        out.append(both.reshape(b, steps))  # (B, T)
    reverse = (np.arange(b) // (per_core // 2)) % 2 == 1  # (B,)
    return out[0], out[1], reverse


def sentence_boundaries(sent_ids):
    """Positions k >= 1 where a sentence starts (`sent_ids[k] != sent_ids[k - 1]`)."""
    return np.flatnonzero(sent_ids[1:] != sent_ids[:-1]) + 1


def split_a_and_b(boundaries, data_len, begin_idx, tot_len, rng):
    """`_split_a_and_b` of the original, on one row: where A and B lie.

    Args:
        boundaries: int array, the row's `sentence_boundaries`.
        data_len: int. The row's length (T).
        begin_idx: int. Where A starts.
        tot_len: int. Tokens of A and B together (L - R - 3).
        rng: `numpy.random.Generator`.

    Returns:
        `(a_begin, a_end, b_begin, b_end, label)`, label 1 when B follows A
        in the text; or None when the row has no room left (the record
        would read past its end, next-token targets included).
    """
    if begin_idx + tot_len >= data_len:
        return None
    low = np.searchsorted(boundaries, begin_idx, side="right")  # first boundary after A's start
    high = np.searchsorted(boundaries, begin_idx + tot_len, side="left")
    cut_points = boundaries[low:high]  # where A may end: sentence starts within tot_len
    end_idx = int(boundaries[high]) if high < len(boundaries) else data_len
    a_begin = begin_idx
    if not len(cut_points) or rng.random() < 0.5:
        label = 0
        a_end = end_idx if not len(cut_points) else int(cut_points[rng.integers(len(cut_points))])
        b_len = max(1, tot_len - (a_end - a_begin))
        b_begin = int(rng.integers(0, data_len - 1 - b_len, endpoint=True))  # as the original
        b_end = b_begin + b_len
        before = np.searchsorted(boundaries, b_begin, side="right") - 1
        b_begin = int(boundaries[before]) if before >= 0 else 0  # back to its sentence's start
        after = np.searchsorted(boundaries, b_end, side="left")
        next_start = int(boundaries[after]) if after < len(boundaries) else data_len
        b_end = min(next_start, data_len - 1)  # on to its sentence's end
    else:
        label = 1
        a_end = int(cut_points[rng.integers(len(cut_points))])
        b_begin, b_end = a_end, end_idx
    excess = a_end - a_begin + b_end - b_begin - tot_len
    while excess > 0:  # trim the longer side's end, one token at a time, as the original
        if a_end - a_begin > b_end - b_begin:
            a_end -= 1
        else:
            b_end -= 1
        excess -= 1
    if a_end >= data_len or b_end >= data_len:  # the next-token targets would read past the row
        return None
    return a_begin, a_end, b_begin, b_end, label


def sample_mask(is_start, rng, goal_num_predict, mask_alpha, mask_beta, reverse=False,
                whole_word_spans=False):
    """`_sample_mask` of the original: the positions of one segment to predict.

    Args:
        is_start: bool `(S,)`. Whether each token starts a word (XLNet:
            its piece starts with `▁` or `<`, or is one punctuation mark).
        rng: `numpy.random.Generator`.
        goal_num_predict: int or None. Exactly this many positions (single
            random ones make up what the spans leave short); None: spans
            over the whole segment.
        mask_alpha: int. Context per span: `n * mask_alpha // mask_beta`.
        mask_beta: int.
        reverse: bool. Sample on the reversed segment (the backward rows of
            `bi_data`), returning the mask in the segment's order.
        whole_word_spans: bool. A span of n is n whole words (fewer when n
            would pass the goal); False: n pieces from a word start, as the
            original's code does.

    Returns:
        bool `(S,)`.
    """
    seg_len = len(is_start)
    if reverse:
        is_start = is_start[::-1]
    starts = np.flatnonzero(is_start)  # word starts, in order
    rank = np.searchsorted(starts, np.arange(seg_len + 1))  # (S + 1,): starts before each position
    mask = np.zeros(seg_len, bool)
    num_predict = cur_len = 0
    while cur_len < seg_len:
        if goal_num_predict is not None and num_predict >= goal_num_predict:
            break
        # `rng.choice(1..5, p=_NGRAM_PROBABILITIES)`, the same draw, a tenth of the time
        n = 1 + int(_NGRAM_CDF.searchsorted(rng.random(), side="right"))
        if goal_num_predict is not None:
            n = min(n, goal_num_predict - num_predict)
        ctx_size = n * mask_alpha // mask_beta
        l_ctx = int(rng.integers(ctx_size))
        r_ctx = ctx_size - l_ctx
        left = None if goal_num_predict is None else goal_num_predict - num_predict
        span = _span(starts, rank[min(cur_len + l_ctx, seg_len)], n, seg_len, whole_word_spans,
                     left)
        if span is None:
            break
        beg, end = span
        mask[beg:end] = True
        num_predict += end - beg
        cur_len = end + r_ctx
    while goal_num_predict is not None and num_predict < goal_num_predict:
        i = int(rng.integers(seg_len))
        if not mask[i]:
            mask[i] = True
            num_predict += 1
    return mask[::-1].copy() if reverse else mask


def _span(starts, first, n, seg_len, whole_word_spans, left):
    """`sample_mask`'s span of `n` from word start number `first`: `(beg,
    end)`, or None where the sampling stops (no word start left, or the span
    would reach the segment's end, as the original). `left`: positions the
    goal still needs (None: no goal)."""
    if first >= len(starts):
        return None
    beg = int(starts[first])
    if whole_word_spans:  # the start of the (n + 1)-th word
        end = int(starts[first + n]) if first + n < len(starts) else seg_len
    else:
        end = beg + n
    if end >= seg_len:  # as the original: a span may not reach the segment's end
        return None
    if whole_word_spans and left is not None:
        # n words may hold more pieces than the goal has left: fewer
        # whole words, or none (single tokens then make up the rest).
        words = n
        while end - beg > left and words > 0:
            words -= 1
            end = int(starts[first + words])
        if end == beg:
            return None
    return beg, end


def xlnet_batches(ids, sent_ids, schema, start_table, rng, whole_word_spans=False):
    """Yields the records of each batch, as `create_tfrecords` makes them.

    Args:
        ids: int `(N,)`. The token stream (`document_stream`).
        sent_ids: bool `(N,)`. Its sentence ids.
        schema: `XLNetRecordSchema`.
        start_table: bool `(V,)`. Whether each id starts a word.
        rng: `numpy.random.Generator`.
        whole_word_spans: bool. See `sample_mask`.

    Yields:
        dict of the record features (`FEATURE_NAMES`) -> int64 `(B, L)`
        arrays (`label`: `(B, 1)`), until a row has no room for the next
        record (that batch is dropped whole, as the original).
    """
    rows, row_sent_ids, reverse = batchify(ids, sent_ids, schema)
    b, steps = rows.shape
    length, reuse = schema.seq_len, schema.reuse_len
    tot_len = length - reuse - 3  # A and B; two <sep> and <cls> fill the rest
    boundaries = [sentence_boundaries(s) for s in row_sent_ids]
    tail = np.array([schema.sep_id, schema.cls_id], np.int64)
    i = 0
    while i + length <= steps:
        batch = {name: np.zeros((b, length), np.int64) for name in ("input", "is_masked",
                                                                      "seg_id", "target")}
        batch["label"] = np.zeros((b, 1), np.int64)
        for k in range(b):
            split = split_a_and_b(boundaries[k], steps, i + reuse, tot_len, rng)
            if split is None:
                return
            a_begin, a_end, b_begin, b_end, label = split
            row = rows[k]
            reuse_ids = row[i:i + reuse]  # (R,)
            rest = np.concatenate([row[a_begin:a_end], tail[:1], row[b_begin:b_end],
                                   tail])  # A <sep> B <sep> <cls>
            mask_0 = sample_mask(start_table[reuse_ids], rng, schema.num_predict_reuse,
                                 schema.mask_alpha, schema.mask_beta, reverse[k],
                                 whole_word_spans)
            mask_1 = sample_mask(start_table[rest], rng, schema.num_predict_rest,
                                 schema.mask_alpha, schema.mask_beta, reverse[k],
                                 whole_word_spans)
            a_len = a_end - a_begin
            batch["input"][k] = np.concatenate([reuse_ids, rest])
            batch["is_masked"][k] = np.concatenate([mask_0, mask_1])
            batch["seg_id"][k, :reuse + a_len + 1] = SEGMENT_A  # reuse, A, <sep>
            batch["seg_id"][k, reuse + a_len + 1:] = SEGMENT_B  # B, <sep>
            batch["seg_id"][k, -1] = SEGMENT_CLS
            # Next-token targets; the two last <cls> are padding, as the original's.
            batch["target"][k] = np.concatenate([
                row[i + 1:i + reuse + 1], row[a_begin + 1:a_end + 1], row[b_begin:b_end + 1],
                tail[1:], tail[1:]])
            batch["label"][k, 0] = label
        yield batch
        i += reuse


def start_piece_table(is_start_piece, vocab_size):
    """bool `(V,)` from a callable id -> bool (e.g. the tokenizer's `is_start_piece`)."""
    return np.array([bool(is_start_piece(i)) for i in range(vocab_size)], bool)
