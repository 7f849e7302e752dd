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

import os
import shutil

import numpy as np
import tensorflow as tf

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
from tf_records.manifest import file_sha256
from tf_records.records_folder import transactional

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
        tokens = {d: np.full((b, t), "", object) for d in SUFFIX}
        token_ids = {d: np.zeros((b, t), np.int64) for d in SUFFIX}
        targets = {d: np.zeros((b, t), np.int64) for d in SUFFIX}
        mask = np.zeros((b, t), np.int64)
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
                    forward = [BOS_TOKEN, *sentence, EOS_TOKEN]
                    reverse = [EOS_TOKEN, *sentence[::-1], BOS_TOKEN]
                    rows[k] = [[ids.get(w, unk) for w in forward],
                               [ids.get(w, unk) for w in reverse], forward, reverse, 0]
                forward_ids, reverse_ids, forward, reverse, offset = rows[k]
                n = min(len(forward) - 1 - offset, t - position)  # positions taken now
                span, source = slice(position, position + n), slice(offset, offset + n)
                after = slice(offset + 1, offset + n + 1)
                for d, words, word_ids in (("forward", forward, forward_ids),
                                           ("backward", reverse, reverse_ids)):
                    tokens[d][k, span] = words[source]
                    token_ids[d][k, span] = word_ids[source]
                    targets[d][k, span] = word_ids[after]
                mask[k, span] = 1
                rows[k][4] += n
                position += n
        if not mask.any():
            return
        batch = {"target_mask": mask}
        for d, suffix in SUFFIX.items():
            batch[f"tokens{suffix}"] = tokens[d]
            batch[f"token_ids{suffix}"] = token_ids[d]
            batch[f"next_token_id{suffix}"] = targets[d]
        yield batch


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
    if isinstance(batches_per_shard, bool) or not isinstance(batches_per_shard, int) or (
            batches_per_shard < 1):
        raise ValueError("`batches_per_shard` must be a positive integer. Received: "
                         f"batches_per_shard={batches_per_shard!r}.")
    if copy_vocab:
        shutil.copyfile(vocab_file, os.path.join(output_dir, VOCAB_FILE))
        vocab_file = os.path.join(output_dir, VOCAB_FILE)
    vocab = load_elmo_vocab(vocab_file)
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
    manifest_path = os.path.join(output_dir, MANIFEST_FILE)
    # Each sentence gives its tokens and </S> as targets (one per direction).
    writing = progress.meter("Writing streams", total=sum(len(s) + 1 for s in sentences),
                             unit="targets") if progress else None

    shards, writer, tmp, name = [], None, None, None
    batches = positions = 0

    def close_shard():
        writer.close()
        os.replace(tmp, os.path.join(output_dir, name))
        shards.append({"file": name, "records": records_in_shard,
                       "sha256": file_sha256(os.path.join(output_dir, name))})

    records_in_shard = 0
    try:
        for batch in stream_windows(sentences, vocab, batch_size, unroll_steps):
            if batches % batches_per_shard == 0:
                if writer is not None:
                    close_shard()
                name = f"shard-{len(shards):05d}.tfrecord"
                tmp = os.path.join(output_dir, f".tmp-{name}")
                writer = tf.io.TFRecordWriter(tmp)
                records_in_shard = 0
            for k in range(batch_size):  # row k of the batch: record k of its group
                writer.write(encode_elmo_example({key: values[k] for key, values in batch.items()}))
            records_in_shard += batch_size
            batches += 1
            positions += int(batch["target_mask"].sum())
            if writing:
                writing.update(positions, batches=batches, shards=len(shards))
        close_shard()
    finally:  # no temporary shard left behind, whatever stopped the write
        if tmp and os.path.exists(tmp):
            writer.close()
            os.remove(tmp)

    if writing:
        writing.finish(batches=batches, shards=len(shards))
    words = sum(len(s) for s in sentences)
    known = set(vocab)
    manifest = {
        "version": MANIFEST_VERSION,
        "schema": schema.to_manifest(),
        "vocab_files": [{"file": os.path.basename(vocab_file), "sha256": file_sha256(vocab_file)}],
        "vocab_size": len(vocab),
        "sentences": len(sentences),
        "tokens": words,
        "unknown_tokens": sum(w not in known for s in sentences for w in s),
        "targets": positions,
        "batches": batches,
        "writer_config": {"shuffle_seed": shuffle_seed, "batches_per_shard": batches_per_shard},
        "shards": shards,
    }
    write_json_atomic(manifest_path, manifest)  # last: a manifest means every shard is whole
    return manifest

