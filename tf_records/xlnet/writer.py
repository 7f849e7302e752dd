"""Tokenized documents -> XLNet pretraining TFRecords + `manifest.json`.

The records are made by `xlnet.instances` (the original `data_utils.py`'s
rules); this module tokenizes text, checks ids and writes them. Records are
written batch after batch, row k of a batch in place k, into shards of
consecutive batches; `xlnet.reader` reads them back in that order.

The stream is held in memory as int32 (the original holds it likewise);
write a large corpus as several folders. Every shard is written under a
temporary name and renamed when complete; the manifest is written last,
also atomically, so a crash leaves no shard or manifest that looks whole.
"""

import os

import numpy as np

from keras_bert_impl.base.json_files import write_json_atomic
from tf_records.documents import read_documents
from tf_records.input_files import line_bytes
from tf_records.input_files import text_bytes
from tf_records.manifest import MANIFEST_FILE
from tf_records.manifest import MANIFEST_VERSION
from tf_records.manifest import check_batches_per_shard
from tf_records.manifest import checked_vocab_files
from tf_records.manifest import vocab_file_entries
from tf_records.records_folder import transactional
from tf_records.records_folder import write_shard
from tf_records.xlnet.instances import MAX_GRAM
from tf_records.xlnet.instances import document_stream
from tf_records.xlnet.instances import start_piece_table
from tf_records.xlnet.instances import xlnet_batches
from tf_records.xlnet.schema import XLNetRecordSchema
from tf_records.xlnet.schema import encode_xlnet_examples

_RECORDS_PER_ENCODE = 4096  # bounds the encoded bytes held at once


@transactional("xlnet")
def write_xlnet_records(documents, output_dir, schema, vocab_size, is_start_piece, vocab_files,
                        eod_id=7, random_seed=12345, whole_word_spans=False,
                        batches_per_shard=1000, progress=None):
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
        progress: None, or a reporter (`tf_records.command_line.progress.Reporter`: its
            `meter(what, total, unit, scale)` gives an object to `update`
            and `finish`) told the batches written (the total is the most
            the stream can give; the last may not find room for A and B).

    Example:

        write_xlnet_records(documents, "data/", XLNetRecordSchema(batch_size=16),
                            32000, tokenizer.is_start_piece, ["spiece.model"])
    """
    vocab_files = _checked_arguments(schema, vocab_size, eod_id, batches_per_shard, vocab_files)
    ids, sent_ids, num_documents, num_sentences = document_stream(documents, eod_id)
    streams = _check_stream(ids, num_sentences, vocab_size, schema)
    start_table = start_piece_table(is_start_piece, vocab_size)
    batches = xlnet_batches(ids, sent_ids, schema, start_table,
                            np.random.default_rng(random_seed), whole_word_spans)
    # The most batches: one every reuse_len tokens of a row while seq_len fit.
    most = (len(ids) // streams - schema.seq_len) // schema.reuse_len + 1
    shards, batches, continuations = _write_batches(batches, output_dir, schema,
                                                    batches_per_shard, progress, most)
    if not batches:
        raise ValueError(
            f"The documents give {len(ids)} tokens ({len(ids) // streams} per row): no row has "
            f"room for a record of seq_len={schema.seq_len} with its next-token targets. Give "
            "more text, or a smaller --batch_size or --seq_len.")
    manifest = {
        "version": MANIFEST_VERSION, "schema": schema.to_manifest(),
        "vocab_files": vocab_file_entries(vocab_files), "vocab_size": vocab_size,
        "special_ids": {"sep": schema.sep_id, "cls": schema.cls_id, "eod": eod_id},
        "documents": num_documents, "sentences": num_sentences, "tokens": int(len(ids)),
        "tokens_per_row": int(len(ids) // streams),
        "batches": batches, "records": batches * schema.batch_size,
        "continuation_records": continuations,  # label 1: B follows A in the text
        "writer_config": {"random_seed": random_seed, "whole_word_spans": whole_word_spans,
                          "max_gram": MAX_GRAM, "batches_per_shard": batches_per_shard},
        "shards": shards,
    }
    # Last: a manifest means every shard is whole.
    write_json_atomic(os.path.join(output_dir, MANIFEST_FILE), manifest)
    return manifest


def _checked_arguments(schema, vocab_size, eod_id, batches_per_shard, vocab_files):
    """`ValueError` naming the first argument at fault; returns `vocab_files` as a list."""
    if not isinstance(schema, XLNetRecordSchema):
        raise ValueError(f"`schema` must be an XLNetRecordSchema. Received: schema={schema!r}.")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"`vocab_size` must be a positive integer. Received: "
                         f"vocab_size={vocab_size!r}.")
    for name, value in (("sep_id", schema.sep_id), ("cls_id", schema.cls_id), ("eod_id", eod_id)):
        if value is not None and not 0 <= value < vocab_size:
            raise ValueError(f"`{name}` must be in [0, {vocab_size}). Received: {name}={value}.")
    check_batches_per_shard(batches_per_shard)
    return checked_vocab_files(vocab_files, "the SentencePiece model (and any other vocabulary "
                               "file) to hash")


def _write_batches(batches, output_dir, schema, batches_per_shard, progress, most):
    """Writes the batches, `batches_per_shard` consecutive ones per shard,
    `progress` (as `write_xlnet_records`'s) told each of at `most` batches;
    returns (the shards' manifest entries, the batches, the records whose B
    continues A)."""
    writing = progress.meter("Writing records", total=most, unit="batches") if progress else None
    shards, pending, count, continuations = [], [], 0, 0
    for batch in batches:
        pending.append(batch)
        count += 1
        continuations += int(batch["label"].sum())
        if len(pending) == batches_per_shard:
            shards.append(write_shard(output_dir, len(shards),
                                      _shard_records(pending, schema.batch_size)))
            pending = []
        if writing:
            writing.update(count, records=count * schema.batch_size, shards=len(shards))
    if pending:
        shards.append(write_shard(output_dir, len(shards),
                                  _shard_records(pending, schema.batch_size)))
    if writing and count:  # no batches: the caller raises
        writing.finish(records=count * schema.batch_size, shards=len(shards))
    return shards, count, continuations


def _shard_records(batch_list, batch_size):
    """The serialized records of consecutive batches, row k of a batch in
    place k, encoded a few thousand at a time."""
    step = max(1, _RECORDS_PER_ENCODE // batch_size)  # batches per encode
    for begin in range(0, len(batch_list), step):
        group = batch_list[begin:begin + step]
        block = {key: np.concatenate([g[key] for g in group]) for key in group[0]}
        yield from encode_xlnet_examples(block)


def _check_stream(ids, num_sentences, vocab_size, schema):
    """`ValueError` unless the token stream has ids to write and room for a
    record in every row; returns the streams it is split into."""
    if not num_sentences:
        raise ValueError("The documents hold no tokens (an empty corpus?).")
    _check_ids(ids, vocab_size, schema)
    streams = schema.batch_size // 2 if schema.bi_data else schema.batch_size
    if len(ids) // streams < schema.seq_len + 1:
        raise ValueError(
            f"The documents give {len(ids)} tokens, {len(ids) // streams} per row of the "
            f"{streams} streams: too few for one record of seq_len={schema.seq_len}. Give more "
            "text, or a smaller --batch_size or --seq_len.")
    return streams


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


def tokenized_documents(input_files, tokenizer, progress=None):
    """Documents of text files (one sentence per line, blank lines between
    documents, plain or .gz) -> lists of sentences of ids (`tokenizer.encode`).

    `progress`: None, or a reporter (as `write_xlnet_records`'s) told the
    text read (MB of the files), documents and tokens.
    """
    for path in input_files:
        if not os.path.isfile(path):
            raise ValueError(f"Input file {path} does not exist.")
    reading = progress.meter("Tokenizing documents", total=text_bytes(input_files), unit="MB",
                             scale=1e-6) if progress else None
    read = documents = tokens = 0
    for document in read_documents(list(input_files)):
        sentences = [tokenizer.encode(line) for line in document]
        yield sentences
        if reading:
            read += sum(line_bytes(line) for line in document)
            documents += 1
            tokens += sum(len(ids) for ids in sentences)
            reading.update(read, documents=documents, tokens=tokens)
    if reading:
        reading.finish(documents=documents, tokens=tokens)


def write_xlnet_data(input_files, tokenizer, output_dir, schema, vocab_files, random_seed=12345,
                     whole_word_spans=False, batches_per_shard=1000, progress=None,
                     overwrite=False):
    """Text files -> `write_xlnet_records` with a tokenizer's ids and pieces.

    Args:
        input_files: list of str. One sentence per line, blank lines
            between documents (plain or .gz), read in order.
        tokenizer: an object with `encode(text) -> list[int]` (no special
            tokens), `is_start_piece(id) -> bool`, `sep_id`, `cls_id`,
            `eod_id` and `vocab_size` (XLNet's SentencePiece tokenizer).
        output_dir, schema, vocab_files, random_seed, whole_word_spans,
        batches_per_shard: as `write_xlnet_records`.
        progress: None, or a reporter told the tokenizing
            (`tokenized_documents`) and the writing (`write_xlnet_records`).
        overwrite: bool. Replace records of another kind or settings
            (`records_folder.records_transaction`).
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
        tokenized_documents(input_files, tokenizer, progress), output_dir, schema, vocab_size,
        tokenizer.is_start_piece, vocab_files, eod_id=tokenizer.eod_id, random_seed=random_seed,
        whole_word_spans=whole_word_spans, batches_per_shard=batches_per_shard,
        progress=progress, overwrite=overwrite)
