"""Tokenized documents -> XLNet pretraining TFRecords + `manifest.json`.

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
reproduced, its rules and statistics are). Records are written batch
after batch, row k of a batch in place k, into shards of consecutive
batches; `xlnet_reader` reads them back in that order.

The stream is held in memory as int32 (the original holds it likewise);
write a large corpus as several folders. Every shard is written under a
temporary name and renamed when complete; the manifest is written last,
also atomically, so a crash leaves no shard or manifest that looks whole.
"""

import os
import sys
import time

import numpy as np

from keras_bert_impl.bert_config import write_json_atomic
from tf_records.schema import MANIFEST_FILE
from tf_records.schema import MANIFEST_VERSION
from tf_records.schema import file_sha256
from tf_records.writer import read_documents
from tf_records.xlnet_schema import SEGMENT_A
from tf_records.xlnet_schema import SEGMENT_B
from tf_records.xlnet_schema import SEGMENT_CLS
from tf_records.xlnet_schema import XLNetRecordSchema
from tf_records.xlnet_schema import encode_xlnet_examples

# N=tokens in the stream, B=batch (rows), T=tokens per row, L=seq_len, R=reuse_len

MAX_GRAM = 5  # the original's `max_gram`: spans of 1..5 tokens
_RECORDS_PER_ENCODE = 4096  # bounds the encoded bytes held at once
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
        first = rank[min(cur_len + l_ctx, seg_len)]  # the first word start from there
        if first >= len(starts):
            break
        beg = int(starts[first])
        if whole_word_spans:  # the start of the (n + 1)-th word
            end = int(starts[first + n]) if first + n < len(starts) else seg_len
        else:
            end = beg + n
        if end >= seg_len:  # as the original: a span may not reach the segment's end
            break
        if whole_word_spans and goal_num_predict is not None:
            # n words may hold more pieces than the goal has left: fewer
            # whole words, or none (single tokens then make up the rest).
            words = n
            while end - beg > goal_num_predict - num_predict and words > 0:
                words -= 1
                end = int(starts[first + words])
            if end == beg:
                break
        mask[beg:end] = True
        num_predict += end - beg
        cur_len = end + r_ctx
    while goal_num_predict is not None and num_predict < goal_num_predict:
        i = int(rng.integers(seg_len))
        if not mask[i]:
            mask[i] = True
            num_predict += 1
    return mask[::-1].copy() if reverse else mask


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


def write_xlnet_records(documents, output_dir, schema, vocab_size, is_start_piece, vocab_files,
                        eod_id=7, random_seed=12345, whole_word_spans=False,
                        batches_per_shard=1000, progress=True):
    """Writes shards and `manifest.json` into `output_dir`; returns the manifest.

    Args:
        documents: iterable of documents, each a list of sentences, each a
            list of SentencePiece ids (no `<sep>` or `<cls>` in them).
        output_dir: str. Folder for the shards and the manifest.
        schema: `XLNetRecordSchema`. Lengths, batch, masking, special ids.
        vocab_size: int. Ids must lie in [0, vocab_size).
        is_start_piece: callable id -> bool. Whether a piece starts a word
            (`▁`, `<...>` or a single punctuation mark, as the original).
        vocab_files: list of str. The SentencePiece model (and any other
            vocabulary file); their sha256 go into the manifest, so data
            and model can be matched.
        eod_id: int or None. Appended after every document (XLNet: 7).
        random_seed: int. Seed of A/B sampling and masking.
        whole_word_spans: bool. Spans of whole words (see `sample_mask`).
        batches_per_shard: int. Consecutive batches per shard file.
        progress: bool. Print counts to stderr.

    Example:

        write_xlnet_records(documents, "data/", XLNetRecordSchema(batch_size=16),
                            32000, tokenizer.is_start_piece, ["spiece.model"])
    """
    if not isinstance(schema, XLNetRecordSchema):
        raise ValueError(f"`schema` must be an XLNetRecordSchema. Received: schema={schema!r}.")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"`vocab_size` must be a positive integer. Received: "
                         f"vocab_size={vocab_size!r}.")
    for name, value in (("sep_id", schema.sep_id), ("cls_id", schema.cls_id), ("eod_id", eod_id)):
        if value is not None and not 0 <= value < vocab_size:
            raise ValueError(f"`{name}` must be in [0, {vocab_size}). Received: {name}={value}.")
    if isinstance(batches_per_shard, bool) or not isinstance(batches_per_shard, int) or (
            batches_per_shard < 1):
        raise ValueError("`batches_per_shard` must be a positive integer. Received: "
                         f"batches_per_shard={batches_per_shard!r}.")
    if isinstance(vocab_files, str):
        vocab_files = [vocab_files]
    if not vocab_files:
        raise ValueError("`vocab_files` is empty: pass the SentencePiece model (and any other "
                         "vocabulary file) to hash.")
    for path in vocab_files:
        if not os.path.isfile(path):
            raise ValueError(f"Vocabulary file {path} does not exist.")
    start = time.time()
    ids, sent_ids, num_documents, num_sentences = document_stream(documents, eod_id)
    if not num_sentences:
        raise ValueError("The documents hold no tokens (an empty corpus?).")
    _check_ids(ids, vocab_size, schema)
    streams = schema.batch_size // 2 if schema.bi_data else schema.batch_size
    if len(ids) // streams < schema.seq_len + 1:
        raise ValueError(
            f"The documents give {len(ids)} tokens, {len(ids) // streams} per row of the "
            f"{streams} streams: too few for one record of seq_len={schema.seq_len}. Give more "
            "text, or a smaller --batch_size or --seq_len.")
    start_table = start_piece_table(is_start_piece, vocab_size)

    os.makedirs(output_dir, exist_ok=True)
    for name in os.listdir(output_dir):  # leftovers of an interrupted run
        if name.startswith(".tmp-"):
            os.remove(os.path.join(output_dir, name))
    manifest_path = os.path.join(output_dir, MANIFEST_FILE)
    if os.path.exists(manifest_path):
        os.remove(manifest_path)  # the old manifest no longer describes the folder

    import tensorflow as tf  # here: the stream and its checks need none

    rng = np.random.default_rng(random_seed)
    shards, pending, batches, continuations = [], [], 0, 0

    def write_shard(batch_list):
        name = f"shard-{len(shards):05d}.tfrecord"
        tmp, path = os.path.join(output_dir, f".tmp-{name}"), os.path.join(output_dir, name)
        records = 0
        step = max(1, _RECORDS_PER_ENCODE // schema.batch_size)  # batches per encode
        try:
            with tf.io.TFRecordWriter(tmp) as writer:
                for begin in range(0, len(batch_list), step):
                    group = batch_list[begin:begin + step]
                    block = {key: np.concatenate([g[key] for g in group]) for key in group[0]}
                    for record in encode_xlnet_examples(block):
                        writer.write(record)
                        records += 1
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        shards.append({"file": name, "records": records, "sha256": file_sha256(path)})

    for batch in xlnet_batches(ids, sent_ids, schema, start_table, rng, whole_word_spans):
        pending.append(batch)
        batches += 1
        continuations += int(batch["label"].sum())
        if len(pending) == batches_per_shard:
            write_shard(pending)
            pending = []
    if pending:
        write_shard(pending)
    if not batches:
        raise ValueError(
            f"The documents give {len(ids)} tokens ({len(ids) // streams} per row): no row has "
            f"room for a record of seq_len={schema.seq_len} with its next-token targets. Give "
            "more text, or a smaller --batch_size or --seq_len.")
    records = batches * schema.batch_size
    if progress:
        print(f"{num_documents} documents, {len(ids)} tokens -> {batches} batches of "
              f"{schema.batch_size} x {schema.seq_len} ({time.time() - start:.0f} s)",
              file=sys.stderr, flush=True)
    manifest = {
        "version": MANIFEST_VERSION,
        "schema": schema.to_manifest(),
        "vocab_files": [{"file": os.path.basename(p), "sha256": file_sha256(p)}
                        for p in vocab_files],
        "vocab_size": vocab_size,
        "special_ids": {"sep": schema.sep_id, "cls": schema.cls_id, "eod": eod_id},
        "documents": num_documents,
        "sentences": num_sentences,
        "tokens": int(len(ids)),
        "tokens_per_row": int(len(ids) // streams),
        "batches": batches,
        "records": records,
        "continuation_records": continuations,  # label 1: B follows A in the text
        "writer_config": {"random_seed": random_seed, "whole_word_spans": whole_word_spans,
                          "max_gram": MAX_GRAM, "batches_per_shard": batches_per_shard},
        "shards": shards,
    }
    write_json_atomic(manifest_path, manifest)  # last: a manifest means every shard is whole
    return manifest


def _check_ids(ids, vocab_size, schema):
    """Every id in the vocabulary; no `<sep>` or `<cls>` in the text (the
    permutation treats those as the record's own functional tokens)."""
    bad = (ids < 0) | (ids >= vocab_size)
    if bad.any():
        raise ValueError(f"Token id {int(ids[bad][0])} is outside [0, {vocab_size}) "
                         "(the vocab_size).")
    for name, value in (("<sep>", schema.sep_id), ("<cls>", schema.cls_id)):
        where = np.flatnonzero(ids == value)
        if len(where):
            raise ValueError(
                f"The text holds the {name} id {value} (token {int(where[0])} of the stream): "
                "encode sentences without special tokens (the writer adds <sep> and <cls>).")


def tokenized_documents(input_files, tokenizer):
    """Documents of text files (one sentence per line, blank lines between
    documents, plain or .gz) -> lists of sentences of ids (`tokenizer.encode`)."""
    for path in input_files:
        if not os.path.isfile(path):
            raise ValueError(f"Input file {path} does not exist.")
    for document in read_documents(list(input_files)):
        yield [tokenizer.encode(line) for line in document]


def write_xlnet_data(input_files, tokenizer, output_dir, schema, vocab_files, random_seed=12345,
                     whole_word_spans=False, batches_per_shard=1000, progress=True):
    """Text files -> `write_xlnet_records` with a tokenizer's ids and pieces.

    Args:
        input_files: list of str. One sentence per line, blank lines
            between documents (plain or .gz), read in order.
        tokenizer: an object with `encode(text) -> list[int]` (no special
            tokens), `is_start_piece(id) -> bool`, `sep_id`, `cls_id`,
            `eod_id` and `vocab_size` (XLNet's SentencePiece tokenizer).
        output_dir, schema, vocab_files, random_seed, whole_word_spans,
        batches_per_shard, progress: as `write_xlnet_records`.
    """
    if not input_files:
        raise ValueError("No input files.")
    for name in ("sep_id", "cls_id"):
        if getattr(tokenizer, name) != getattr(schema, name):
            raise ValueError(
                f"The tokenizer's {name}={getattr(tokenizer, name)} differs from the schema's "
                f"{name}={getattr(schema, name)}: pass the tokenizer's ids in the schema.")
    vocab_size = tokenizer.vocab_size
    vocab_size = int(vocab_size() if callable(vocab_size) else vocab_size)
    return write_xlnet_records(
        tokenized_documents(input_files, tokenizer), output_dir, schema, vocab_size,
        tokenizer.is_start_piece, vocab_files, eod_id=tokenizer.eod_id, random_seed=random_seed,
        whole_word_spans=whole_word_spans, batches_per_shard=batches_per_shard,
        progress=progress)
