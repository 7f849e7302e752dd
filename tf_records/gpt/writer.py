"""Text files -> sharded language-model TFRecords + `manifest.json` (GPT's data).

GPT (Radford et al. 2018) pretrains on contiguous text, 512-token windows
of BooksCorpus. So the documents (one sentence per line, blank lines
between documents, as BERT's writer reads them) are tokenized in order into
one stream, and windows may cross document boundaries. A window holds S + 1
tokens and the next one starts S tokens later: consecutive windows share one
token, so every token but the first is a target exactly once. Only the last
window can be short (its tail is padding). Windows are written in an order
shuffled by the seed, split into `num_shards` shards.

Memory: the token stream is held as int32 (4 bytes a token, ~1 MB per MB
of English text with a BPE vocabulary) and windows are encoded a few
thousand at a time.

Every shard is written under a temporary name and renamed when complete; the
manifest is written last, also atomically, so a crash leaves no shard or
manifest that looks whole.
"""

import os

import numpy as np

from keras_bert_impl.base.json_files import write_json_atomic
from tf_records.documents import read_documents
from tf_records.gpt.schema import LmRecordSchema
from tf_records.gpt.schema import encode_lm_examples
from tf_records.input_files import check_input_files
from tf_records.input_files import line_bytes
from tf_records.input_files import text_bytes
from tf_records.manifest import MANIFEST_FILE
from tf_records.manifest import MANIFEST_VERSION
from tf_records.manifest import checked_vocab_files
from tf_records.manifest import vocab_file_entries
from tf_records.records_folder import transactional
from tf_records.records_folder import write_shard

# N=tokens in the stream, S=max_seq_length, W=S+1 (tokens per window)

_WINDOWS_PER_ENCODE = 4096  # bounds the encoded bytes held at once


@transactional("lm")
def write_lm_data(input_files, tokenizer, output_dir, max_seq_length, vocab_files, num_shards=1,
                  random_seed=12345, document_separator_id=None, progress=None):
    """Writes shards and `manifest.json` into `output_dir`; returns the manifest.

    Args:
        input_files: list of str. Text files (plain or .gz), read in order.
        tokenizer: any object with `encode(text) -> list[int]` and
            `vocab_size` (e.g. `GptTokenizer`). A document is encoded as
            its lines joined by spaces.
        output_dir: str. Folder for the shards and the manifest.
        max_seq_length: int. Tokens the model reads (S); records hold S + 1.
        vocab_files: list of str. The tokenizer's vocabulary files (e.g.
            `vocab.json` and `merges.txt`); their sha256 go into the
            manifest, so data and model can be matched.
        num_shards: int. Shards to split the windows into (at least the
            number of input pipelines that will read them).
        random_seed: int. Seed of the window order.
        document_separator_id: optional int. A token appended after every
            document (e.g. an end-of-text id); GPT's release has none.
        progress: None, or a reporter (`tf_records.command_line.progress.Reporter`: its
            `meter(what, total, unit, scale)` gives an object to `update`
            and `finish`) told the documents tokenized (MB of the files
            read, documents, tokens), then the windows written.

    Example:

        write_lm_data(["books.txt"], GptTokenizer("vocab.json", "merges.txt"),
                      "data/", 512, ["vocab.json", "merges.txt"], num_shards=8)
    """
    schema = LmRecordSchema(max_seq_length)
    vocab_files, vocab_size = _checked_arguments(input_files, tokenizer, vocab_files, num_shards,
                                                 document_separator_id)
    reading = progress.meter("Tokenizing documents", total=text_bytes(input_files), unit="MB",
                             scale=1e-6) if progress else None
    tokens, documents = _token_stream(input_files, tokenizer, vocab_size, document_separator_id,
                                      reading)
    num_windows = _window_count(tokens, documents, input_files, schema, num_shards)
    writing = progress.meter("Writing windows", total=num_windows,
                             unit="windows") if progress else None
    order = np.random.default_rng(random_seed).permutation(num_windows)
    shards = _write_windows(tokens, order, schema, num_shards, output_dir, writing)
    if writing:
        writing.finish(shards=len(shards))
    manifest = {
        "version": MANIFEST_VERSION,
        "schema": schema.to_manifest(),
        "vocab_files": vocab_file_entries(vocab_files),
        "vocab_size": vocab_size,
        "documents": documents,
        "tokens": int(len(tokens)),
        "writer_config": {"num_shards": num_shards, "random_seed": random_seed,
                          "document_separator_id": document_separator_id},
        "shards": shards,
    }
    # Last: a manifest means every shard is whole.
    write_json_atomic(os.path.join(output_dir, MANIFEST_FILE), manifest)
    return manifest


def _window_count(tokens, documents, input_files, schema, num_shards):
    """The windows of the token stream, ceil((N - 1) / S); `ValueError` for
    no documents or fewer windows than shards."""
    s = schema.max_seq_length
    num_windows = -(-(len(tokens) - 1) // s) if len(tokens) > 1 else 0  # ceil((N - 1) / S)
    if not documents:
        raise ValueError(f"No documents in {', '.join(input_files)}: every line is blank.")
    if num_windows < num_shards:
        raise ValueError(
            f"{', '.join(input_files)} give {len(tokens)} tokens, {num_windows} windows of "
            f"{schema.window_length}: too few for num_shards={num_shards}. Give more text or "
            "fewer shards.")
    return num_windows


def _checked_arguments(input_files, tokenizer, vocab_files, num_shards, document_separator_id):
    """`ValueError` naming the first argument at fault; returns (`vocab_files`
    as a list, the tokenizer's vocabulary size)."""
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(
            f"`num_shards` must be a positive integer. Received: num_shards={num_shards!r}.")
    check_input_files(input_files)
    vocab_files = checked_vocab_files(vocab_files, "the tokenizer's vocabulary files to hash "
                                      "(e.g. vocab.json and merges.txt)")
    vocab_size = tokenizer.vocab_size
    vocab_size = int(vocab_size() if callable(vocab_size) else vocab_size)
    if document_separator_id is not None and not 0 <= document_separator_id < vocab_size:
        raise ValueError(f"`document_separator_id` must be in [0, {vocab_size}). "
                         f"Received: document_separator_id={document_separator_id}.")
    return vocab_files, vocab_size


def _write_windows(tokens, order, schema, num_shards, output_dir, writing):
    """The windows starting at `order` (window indices) split into `num_shards`
    shards, in that order; `writing` (a meter or None) told the windows
    written. Returns the shards' manifest entries."""
    padded = np.concatenate([tokens, np.zeros(schema.max_seq_length, tokens.dtype)])  # past N
    shards, written = [], 0

    def shard_records(windows):
        nonlocal written
        for begin in range(0, len(windows), _WINDOWS_PER_ENCODE):
            starts = windows[begin:begin + _WINDOWS_PER_ENCODE] * schema.max_seq_length  # (B,)
            where = starts[:, None] + np.arange(schema.window_length)  # (B, W)
            mask = (where < len(tokens)).astype(np.int64)  # (B, W); 0 past the end
            yield from encode_lm_examples(padded[where], mask)
            written += len(starts)
            if writing:
                writing.update(written, shards=len(shards))

    for index, windows in enumerate(np.array_split(order, num_shards)):
        shards.append(write_shard(output_dir, index, shard_records(windows)))
    return shards


def _documents(path):
    """`read_documents` of one file, with any read error naming the file."""
    try:
        yield from read_documents([path])
    except OSError as e:  # unreadable, a broken .gz, ...; not UTF-8 is a ValueError already
        raise ValueError(f"Cannot read input file {path}: {e}") from None


def _token_stream(input_files, tokenizer, vocab_size, separator_id, meter=None):
    """All documents' ids, in order, as one int32 array `(N,)`; and the
    document count. `meter`: None, or `update`d with the bytes read."""
    chunks, documents, read, count = [], 0, 0, 0
    for path in input_files:
        for number, document in enumerate(_documents(path), start=1):
            ids = np.asarray(tokenizer.encode(" ".join(document)), np.int64)
            if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
                bad = ids[(ids < 0) | (ids >= vocab_size)][0]
                raise ValueError(
                    f"{path}: document {number} was encoded to id {bad}, outside "
                    f"[0, {vocab_size}) (the tokenizer's vocab_size).")
            if separator_id is not None:
                ids = np.append(ids, separator_id)
            chunks.append(ids.astype(np.int32))
            documents += 1
            if meter:
                read += sum(line_bytes(line) for line in document)
                count += len(ids)
                meter.update(read, documents=documents, tokens=count)
    if meter:
        meter.finish(documents=documents, tokens=count)
    tokens = np.concatenate(chunks) if chunks else np.zeros(0, np.int32)
    return tokens, documents
