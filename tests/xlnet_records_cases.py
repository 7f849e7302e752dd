"""The XLNet records tests' shared cases: odd sizes, a fake vocabulary's
word starts, random documents and their token stream as the original's
reader sees it, records read back, the reader's permutation draws, and the
module-scoped fixtures (a fake SentencePiece file, 60 documents, their
records `written`, cheap to write: 0.02 s)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tf_records.manifest import read_manifest
from tf_records.xlnet.permutation import permutation_index
from tf_records.xlnet.schema import XLNetRecordSchema
from tf_records.xlnet.writer import write_xlnet_records

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
V = 99  # XLNet's specials at XLNet's ids, then word pieces 9..98
CLS, SEP, EOD = 3, 4, 7
B, L, R, P, K = 3, 15, 6, 5, 3  # odd sizes: swapped axes fail; K divides R and L - R
SCHEMA = XLNetRecordSchema(seq_len=L, reuse_len=R, batch_size=B, num_predict=P)


def is_start_piece(i):
    """A fake vocabulary: the specials ("<...>") and two pieces in three start a word."""
    return i < 9 or i % 3 != 0


START = np.array([is_start_piece(i) for i in range(V)])


def make_documents(seed, count, max_sentences=7, max_words=11):
    """`count` random documents of sentences of word pieces (ids 9..98)."""
    rng = np.random.default_rng(seed)
    return [[rng.integers(9, V, rng.integers(1, max_words + 1)).tolist()
             for _ in range(rng.integers(1, max_sentences + 1))] for _ in range(count)]


def stream_of(documents):
    """The token stream and sentence ids, written here as a reader of the
    original `_create_data` would see them: sentences back to back, `<eod>`
    after each document, with its last sentence's id."""
    ids, sent, flag = [], [], 1
    for document in documents:
        for sentence in document:
            ids += sentence
            sent += [flag] * len(sentence)
            flag = 1 - flag
        ids.append(EOD)
        sent.append(1 - flag)
    return np.array(ids), np.array(sent)


def read_records(folder):
    """Every record of the folder's shards, parsed: {feature: array}."""
    manifest = read_manifest(folder)
    spec = XLNetRecordSchema.from_manifest(manifest["schema"]).feature_spec()
    files = [os.path.join(folder, s["file"]) for s in manifest["shards"]]
    out = {k: [] for k in spec}
    for batch in tf.data.TFRecordDataset(files).batch(512):
        for k, v in tf.io.parse_example(batch, spec).items():
            out[k].append(v.numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def sampled_orders(seed, record_index, reuse_len, rest_len, perm_size):
    """The reader's draws for one record (its seeds are `(seed, record index)`)."""
    seeds = tf.random.experimental.stateless_split(
        tf.constant([seed, record_index], tf.int64), 2)
    return (permutation_index(reuse_len, perm_size, seeds[0]).numpy(),
            permutation_index(rest_len, perm_size, seeds[1]).numpy())


@pytest.fixture(scope="module", name="vocab_file")
def fake_spm_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "spiece.model"
    path.write_bytes(b"a fake SentencePiece model")
    return str(path)


@pytest.fixture(scope="module", name="documents")
def sixty_documents():
    return make_documents(0, 60)


@pytest.fixture(scope="module", name="written")
def written_records(documents, vocab_file, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("xlnet"))
    manifest = write_xlnet_records(documents, folder, SCHEMA, V, is_start_piece, [vocab_file],
                                   eod_id=EOD, random_seed=7, batches_per_shard=9,
                                   progress=False)
    return folder, manifest
