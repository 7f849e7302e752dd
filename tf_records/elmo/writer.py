"""Tokenized text -> ELMo TFRecords (bilm-tf's training batches) + `manifest.json`.

bilm-tf's data format: one whitespace-tokenized sentence per line (blank
lines, which end a document in BERT's format, are skipped) and a
vocabulary starting `<S>`, `</S>`, `<UNK>` (`keras_bert_impl.elmo.elmo_vocab`).
`stream_windows` packs the sentences as bilm-tf's `_get_batch` does: B
rows, each filling its `unroll_steps`-token window from its current
sentence and taking the next sentence of the corpus when that one is used
up, so every row is a stream of whole sentences packed back to back and
row k of batch t + 1 continues row k of batch t. Where bilm-tf drops the
incomplete last batch, this pads it (`target_mask` 0), so every token is
trained on. Records are written batch after batch, row by row, into
shards of consecutive batches; `elmo.reader.elmo_dataset` reads them back
in that order.

The sentences are held in memory (bilm-tf loads a whole shard of its
corpus likewise); write a large corpus as several folders, or in pieces.
Every shard is written under a temporary name and renamed when complete;
the manifest is written last, also atomically, so a crash leaves no shard
or manifest that looks whole.
"""

import itertools
import os
import shutil

import numpy as np

from keras_bert_impl.base.json_files import write_json_atomic
from keras_bert_impl.elmo.char_ids import BOS_TOKEN
from keras_bert_impl.elmo.char_ids import EOS_TOKEN
from keras_bert_impl.elmo.elmo_vocab import UNK_TOKEN
from keras_bert_impl.elmo.elmo_vocab import learn_elmo_vocab
from keras_bert_impl.elmo.elmo_vocab import load_elmo_vocab
from tf_records.documents import read_documents
from tf_records.elmo.schema import SUFFIX
from tf_records.elmo.schema import ElmoRecordSchema
from tf_records.elmo.schema import encode_elmo_example
from tf_records.input_files import line_bytes
from tf_records.input_files import text_bytes
from tf_records.manifest import MANIFEST_FILE
from tf_records.manifest import MANIFEST_VERSION
from tf_records.manifest import check_batches_per_shard
from tf_records.manifest import vocab_file_entries
from tf_records.records_folder import transactional
from tf_records.records_folder import write_shard

# B=batch (streams), T=unroll_steps


def read_sentences(paths, meter=None):
    """Every non-blank line of the files (plain or .gz), split on whitespace.

    `meter`: None, or a progress meter (`tf_records.command_line.progress.Progress`)
    `update`d after each document with the bytes read and the sentences.
    """
    for path in paths:
        if not os.path.isfile(path):
            raise ValueError(f"Input file {path} does not exist.")
    read = sentences = 0
    for document in read_documents(paths):
        for line in document:
            yield line.split()
        if meter:
            read += sum(line_bytes(line) for line in document)
            sentences += len(document)
            meter.update(read, sentences=sentences)


def learn_vocab_from_text(paths, max_size=None, progress=None):
    """`learn_elmo_vocab` of the sentences of text files (plain or .gz).

    `progress`: None, or a reporter (as `write_elmo_data`'s) told the text
    read (MB of the files) and the vocabulary's size.
    """
    reading = progress.meter("Counting words", total=text_bytes(paths), unit="MB",
                             scale=1e-6) if progress else None
    tokens = learn_elmo_vocab(read_sentences(paths, reading), max_size=max_size)
    if reading:
        reading.finish(vocabulary=len(tokens))
    return tokens


def stream_windows(sentences, vocab, batch_size, unroll_steps=20):
    """Yields bilm-tf's training batches, the last ones padded.

    Args:
        sentences: iterable of token lists (no `<S>` / `</S>`); empty ones
            are skipped.
        vocab: list of str, the vocabulary (id order, `<UNK>` at 2).
        batch_size: int. Streams (B).
        unroll_steps: int. Tokens per window (T).

    Yields:
        dict of the record features (`ElmoRecordSchema.feature_spec`'s
        names) -> `(B, T)` arrays: `tokens` / `tokens_reverse` (object, str;
        "" on padding), `token_ids`, `next_token_id`, `token_ids_reverse`,
        `next_token_id_reverse` (int64; 0 on padding) and `target_mask`
        (int64, 1 on real positions). Stops after the last batch with a
        real position.

    Example:
    >>> batch = next(stream_windows([["a", "b"]], ["<S>", "</S>", "<UNK>", "a"], 1, 4))
    >>> batch["tokens"].tolist(), batch["next_token_id"].tolist()
    ([['<S>', 'a', 'b', '']], [[3, 2, 1, 0]])
    >>> batch["tokens_reverse"].tolist(), batch["next_token_id_reverse"].tolist()
    ([['</S>', 'b', 'a', '']], [[2, 3, 0, 0]])
    """
    schema = ElmoRecordSchema(unroll_steps, batch_size)  # validates both
    b, t = schema.batch_size, schema.unroll_steps
    ids = {token: i for i, token in enumerate(vocab)}
    unk = ids[UNK_TOKEN]
    pending = iter(sentences)
    rows = [None] * b  # per row: [forward ids, reverse ids, forward str, reverse str, offset]
    exhausted = False
    while True:
        window = _Window(b, t)
        for k in range(b):
            position = 0
            while position < t:
                if rows[k] is None or rows[k][4] == len(rows[k][0]) - 1:
                    rows[k] = None
                    sentence = None if exhausted else next(pending, None)
                    if sentence is None:
                        exhausted = True
                        break  # the stream has ended: the rest stays padding
                    if not sentence:
                        continue
                    rows[k] = _sentence_row(sentence, ids, unk)
                position += window.take(rows[k], k, position)
        if not window.mask.any():
            return
        yield window.batch()


def _sentence_row(sentence, ids, unk):
    """A stream's current sentence: [forward ids, reverse ids, forward
    tokens, reverse tokens, offset of the next position]."""
    forward = [BOS_TOKEN, *sentence, EOS_TOKEN]
    reverse = [EOS_TOKEN, *sentence[::-1], BOS_TOKEN]
    return [[ids.get(w, unk) for w in forward], [ids.get(w, unk) for w in reverse],
            forward, reverse, 0]


class _Window:
    """One batch of `stream_windows` being filled: `(B, T)` arrays per
    direction, padding until `take` copies a sentence's positions in."""

    def __init__(self, b, t):
        self.t = t
        self.tokens = {d: np.full((b, t), "", object) for d in SUFFIX}
        self.token_ids = {d: np.zeros((b, t), np.int64) for d in SUFFIX}
        self.targets = {d: np.zeros((b, t), np.int64) for d in SUFFIX}
        self.mask = np.zeros((b, t), np.int64)

    def take(self, row, k, position):
        """Copies the sentence `row`'s next positions, as many as fit, into
        row `k` from `position`; advances the row; returns how many."""
        forward_ids, reverse_ids, forward, reverse, offset = row
        n = min(len(forward) - 1 - offset, self.t - position)  # positions taken now
        span, source = slice(position, position + n), slice(offset, offset + n)
        after = slice(offset + 1, offset + n + 1)
        for d, words, word_ids in (("forward", forward, forward_ids),
                                   ("backward", reverse, reverse_ids)):
            self.tokens[d][k, span] = words[source]
            self.token_ids[d][k, span] = word_ids[source]
            self.targets[d][k, span] = word_ids[after]
        self.mask[k, span] = 1
        row[4] += n
        return n

    def batch(self):
        """The record features (`ElmoRecordSchema.feature_spec`'s names)."""
        batch = {"target_mask": self.mask}
        for d, suffix in SUFFIX.items():
            batch[f"tokens{suffix}"] = self.tokens[d]
            batch[f"token_ids{suffix}"] = self.token_ids[d]
            batch[f"next_token_id{suffix}"] = self.targets[d]
        return batch


VOCAB_FILE = "vocab.txt"


# A vocabulary create_elmo_data learned (`copy_vocab`) lies beside the records;
# a rerun may read it there (--vocab_file=<folder>/vocab.txt): it is kept.
@transactional("elmo", keep=(VOCAB_FILE,))
def write_elmo_data(input_files, vocab_file, output_dir, batch_size, unroll_steps=20,
                    shuffle_seed=None, batches_per_shard=1000, progress=None, copy_vocab=False):
    """Writes shards and `manifest.json` into `output_dir`; returns the manifest.

    Args:
        input_files: list of str. Tokenized text (plain or .gz), one
            sentence per line.
        vocab_file: str. bilm-tf vocabulary (`<S>`, `</S>`, `<UNK>` first).
        output_dir: str. Folder for the shards and the manifest.
        batch_size: int. Streams (B); the reader must batch as many.
        unroll_steps: int. Tokens per window (T).
        shuffle_seed: int or None. Shuffle the sentences with this seed
            first (bilm-tf's `shuffle_on_load`); None keeps file order.
        batches_per_shard: int. Consecutive batches per shard file.
        progress: None, or a reporter (`tf_records.command_line.progress.Reporter`: its
            `meter(what, total, unit, scale)` gives an object to `update`
            and `finish`) told the sentences read (MB of the files), then
            the targets written (every token's one per direction).
        copy_vocab: bool. Copy `vocab_file` into the folder as `vocab.txt`
            (a learned vocabulary, swapped in with the records).

    Example:

        write_elmo_data(["news.txt"], "vocab.txt", "data/", batch_size=128)
    """
    schema = ElmoRecordSchema(unroll_steps, batch_size)
    if not input_files:
        raise ValueError("No input files.")
    check_batches_per_shard(batches_per_shard)
    if copy_vocab:
        shutil.copyfile(vocab_file, os.path.join(output_dir, VOCAB_FILE))
        vocab_file = os.path.join(output_dir, VOCAB_FILE)
    vocab = load_elmo_vocab(vocab_file)
    sentences = _sentences_to_write(input_files, shuffle_seed, progress)
    # Each sentence gives its tokens and </S> as targets (one per direction).
    writing = progress.meter("Writing streams", total=sum(len(s) + 1 for s in sentences),
                             unit="targets") if progress else None
    shards, batches, positions = _write_streams(sentences, vocab, schema, batches_per_shard,
                                                output_dir, writing)
    if writing:
        writing.finish(batches=batches, shards=len(shards))
    known = set(vocab)
    manifest = {
        "version": MANIFEST_VERSION,
        "schema": schema.to_manifest(),
        "vocab_files": vocab_file_entries([vocab_file]),
        "vocab_size": len(vocab),
        "sentences": len(sentences),
        "tokens": sum(len(s) for s in sentences),
        "unknown_tokens": sum(w not in known for s in sentences for w in s),
        "targets": positions,
        "batches": batches,
        "writer_config": {"shuffle_seed": shuffle_seed, "batches_per_shard": batches_per_shard},
        "shards": shards,
    }
    # Last: a manifest means every shard is whole.
    write_json_atomic(os.path.join(output_dir, MANIFEST_FILE), manifest)
    return manifest


def _sentences_to_write(input_files, shuffle_seed, progress):
    """The files' non-empty sentences, shuffled by `shuffle_seed` (None:
    file order); `progress` told the reading."""
    reading = progress.meter("Reading sentences", total=text_bytes(input_files), unit="MB",
                             scale=1e-6) if progress else None
    sentences = [s for s in read_sentences(input_files, reading) if s]
    if not sentences:
        raise ValueError(f"{input_files} hold no sentence (no non-blank line).")
    if reading:
        reading.finish(sentences=len(sentences))
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(len(sentences))
        sentences = [sentences[i] for i in order]
    return sentences


def _write_streams(sentences, vocab, schema, batches_per_shard, output_dir, writing):
    """`stream_windows`' batches written row by row, `batches_per_shard`
    consecutive ones per shard; `writing` (a meter or None) told the targets
    written. Returns (the shards' manifest entries, batches, targets)."""
    shards, counts = [], {"batches": 0, "positions": 0}

    def shard_records(batches):
        for batch in batches:
            for k in range(schema.batch_size):  # row k of the batch: record k of its group
                yield encode_elmo_example({key: values[k] for key, values in batch.items()})
            counts["batches"] += 1
            counts["positions"] += int(batch["target_mask"].sum())
            if writing:
                writing.update(counts["positions"], batches=counts["batches"],
                               shards=len(shards))

    windows = stream_windows(sentences, vocab, schema.batch_size, schema.unroll_steps)
    for first in windows:
        batches = itertools.chain([first], itertools.islice(windows, batches_per_shard - 1))
        shards.append(write_shard(output_dir, len(shards), shard_records(batches)))
    return shards, counts["batches"], counts["positions"]
