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
import sys
import time

import numpy as np
import tensorflow as tf

from keras_bert_impl.bert_config import write_json_atomic
from tf_records.lm_schema import LmRecordSchema
from tf_records.lm_schema import encode_lm_examples
from tf_records.schema import MANIFEST_FILE
from tf_records.schema import MANIFEST_VERSION
from tf_records.schema import file_sha256
from tf_records.writer import read_documents

# N=tokens in the stream, S=max_seq_length, W=S+1 (tokens per window)

_WINDOWS_PER_ENCODE = 4096  # bounds the encoded bytes held at once


def write_lm_data(input_files, tokenizer, output_dir, max_seq_length, vocab_files, num_shards=1,
                  random_seed=12345, document_separator_id=None, progress=True):
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
        progress: bool. Print progress to stderr.

    Example:

        write_lm_data(["books.txt"], GptTokenizer("vocab.json", "merges.txt"),
                      "data/", 512, ["vocab.json", "merges.txt"], num_shards=8)
    """
    schema = LmRecordSchema(max_seq_length)
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(
            f"`num_shards` must be a positive integer. Received: num_shards={num_shards!r}.")
    if not input_files:
        raise ValueError("No input files.")
    for path in input_files:
        if not os.path.isfile(path):
            raise ValueError(f"Input file {path} does not exist.")
    if isinstance(vocab_files, str):
        vocab_files = [vocab_files]
    if not vocab_files:
        raise ValueError("`vocab_files` is empty: pass the tokenizer's vocabulary files to hash "
                         "(e.g. vocab.json and merges.txt).")
    for path in vocab_files:
        if not os.path.isfile(path):
            raise ValueError(f"Vocabulary file {path} does not exist.")
    vocab_size = tokenizer.vocab_size
    vocab_size = int(vocab_size() if callable(vocab_size) else vocab_size)
    if document_separator_id is not None and not 0 <= document_separator_id < vocab_size:
        raise ValueError(f"`document_separator_id` must be in [0, {vocab_size}). "
                         f"Received: document_separator_id={document_separator_id}.")
    os.makedirs(output_dir, exist_ok=True)
    for name in os.listdir(output_dir):  # leftovers of an interrupted run
        if name.startswith(".tmp-"):
            os.remove(os.path.join(output_dir, name))
    manifest_path = os.path.join(output_dir, MANIFEST_FILE)
    if os.path.exists(manifest_path):
        os.remove(manifest_path)  # the old manifest no longer describes the folder

    start = time.time()
    tokens, documents = _token_stream(input_files, tokenizer, vocab_size, document_separator_id)
    s = schema.max_seq_length
    num_windows = -(-(len(tokens) - 1) // s) if len(tokens) > 1 else 0  # ceil((N - 1) / S)
    if num_windows < num_shards:
        raise ValueError(
            f"{input_files} give {len(tokens)} tokens, {num_windows} windows of "
            f"{schema.window_length}: too few for num_shards={num_shards}. Give more text or "
            "fewer shards.")
    if progress:
        megabytes = sum(os.path.getsize(p) for p in input_files) / 1e6
        print(f"{documents} documents, {len(tokens)} tokens, {num_windows} windows; tokenized "
              f"{megabytes / max(time.time() - start, 1e-9):.2f} MB/s", file=sys.stderr, flush=True)

    order = np.random.default_rng(random_seed).permutation(num_windows)
    padded = np.concatenate([tokens, np.zeros(s, tokens.dtype)])  # the last window reads past N
    shards = []
    for index, windows in enumerate(np.array_split(order, num_shards)):
        name = f"shard-{index:05d}.tfrecord"
        tmp = os.path.join(output_dir, f".tmp-{name}")
        with tf.io.TFRecordWriter(tmp) as writer:
            for begin in range(0, len(windows), _WINDOWS_PER_ENCODE):
                starts = windows[begin:begin + _WINDOWS_PER_ENCODE] * s  # (B,)
                where = starts[:, None] + np.arange(schema.window_length)  # (B, W)
                mask = (where < len(tokens)).astype(np.int64)  # (B, W); 0 past the stream's end
                for record in encode_lm_examples(padded[where], mask):
                    writer.write(record)
        os.replace(tmp, os.path.join(output_dir, name))
        shards.append({"file": name, "records": len(windows),
                       "sha256": file_sha256(os.path.join(output_dir, name))})
        if progress:
            print(f"\r{len(shards)}/{num_shards} shards", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)

    manifest = {
        "version": MANIFEST_VERSION,
        "schema": schema.to_manifest(),
        "vocab_files": [{"file": os.path.basename(p), "sha256": file_sha256(p)}
                        for p in vocab_files],
        "vocab_size": vocab_size,
        "documents": documents,
        "tokens": int(len(tokens)),
        "writer_config": {"num_shards": num_shards, "random_seed": random_seed,
                          "document_separator_id": document_separator_id},
        "shards": shards,
    }
    write_json_atomic(manifest_path, manifest)  # last: a manifest means every shard is whole
    return manifest


def _documents(path):
    """`read_documents` of one file, with any read error naming the file."""
    try:
        yield from read_documents([path])
    except OSError as e:  # unreadable, a broken .gz, ...; not UTF-8 is a ValueError already
        raise ValueError(f"Cannot read input file {path}: {e}") from None


def _token_stream(input_files, tokenizer, vocab_size, separator_id):
    """All documents' ids, in order, as one int32 array `(N,)`; and the document count."""
    chunks, documents = [], 0
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
    tokens = np.concatenate(chunks) if chunks else np.zeros(0, np.int32)
    return tokens, documents
