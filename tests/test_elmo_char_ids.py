"""ELMo's character ids (`char_ids`): bilm-tf's Batcher and its
truncation, and the graph version equal to the Python one on odd strings."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from elmo_cases import FIXTURE
from elmo_cases import bilm_fixture  # noqa: F401 (fixture)
from elmo_cases import needs_fixture

from keras_bert_impl.elmo import batch_char_ids
from keras_bert_impl.elmo import char_ids_from_tokens
from keras_bert_impl.elmo import token_char_ids

ODD_TOKENS = ["café", "naïve", "漢字", "👍🏽", "", "a" * 120, "é" * 30, "<S>", "</S>", "x",
              "Ünïcödé-wörd", "\t", "日本語のテキスト" * 3]


def test_char_ids_match_bilm_tf_batcher():
    """bilm-tf's tests/test_data.py TestBatcher expectations (ids + 1)."""
    ids = batch_char_ids([["The", "first", "sentence"], ["Second", "."]], 50)
    rows = [
        [[259, 257, 260], [259, 85, 105, 102, 260], [259, 103, 106, 115, 116, 117, 260],
         [259, 116, 102, 111, 117, 102, 111, 100, 102, 260], [259, 258, 260]],
        [[259, 257, 260], [259, 84, 102, 100, 112, 111, 101, 260], [259, 47, 260],
         [259, 258, 260], []],
    ]
    expected = np.zeros((2, 5, 50), np.int32)
    for b, sentence in enumerate(rows):
        for t, token in enumerate(sentence):
            if token:
                expected[b, t] = 261
                expected[b, t, :len(token)] = token
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(ids, expected)


def test_char_ids_truncation_as_bilm_tf():
    """bilm-tf's UnicodeCharsVocabulary(max_word_length=5) expectations
    (without its +1): bytes are truncated, multi-byte characters too."""
    ids = token_char_ids(["th", "thhhhh", chr(256) + "t", "<S>", "</S>"], max_chars=5) - 1
    np.testing.assert_array_equal(ids, [
        [258, 116, 104, 259, 260],
        [258, 116, 104, 104, 259],
        [258, 196, 128, 116, 259],
        [258, 256, 259, 260, 260],
        [258, 257, 259, 260, 260],
    ])


def _assert_graph_ids_equal(batch, max_chars):
    expected = batch_char_ids(batch, max_chars)
    graph = char_ids_from_tokens(tf.ragged.constant(batch, tf.string, ragged_rank=1), max_chars)
    assert graph.dtype == tf.int32
    np.testing.assert_array_equal(graph.numpy(), expected)


def test_char_ids_python_and_graph_agree_on_odd_strings():
    """Accents, CJK, emoji, empty and over-long tokens (cut mid-character),
    literal boundaries, an empty sentence; also in a tf.function with an
    unknown batch and length, as a SavedModel serves it."""
    odd = [ODD_TOKENS, [], ODD_TOKENS[::-1][:5], ["x"]]
    for max_chars in (50, 7):
        _assert_graph_ids_equal(odd, max_chars)
    fn = tf.function(lambda t: char_ids_from_tokens(t, 50), input_signature=[
        tf.RaggedTensorSpec([None, None], tf.string, ragged_rank=1)])
    np.testing.assert_array_equal(
        fn(tf.ragged.constant(odd, tf.string, ragged_rank=1)).numpy(), batch_char_ids(odd))


@needs_fixture
def test_char_ids_python_and_graph_agree_on_fixture():
    with open(os.path.join(FIXTURE, "lm_embeddings_sentences.json")) as f:
        _assert_graph_ids_equal([s.split() for row in json.load(f) for s in row], 50)


def test_char_ids_errors():
    with pytest.raises(ValueError, match="non-empty list"):
        batch_char_ids([])
    with pytest.raises(ValueError, match="not a str"):
        batch_char_ids(["a sentence"])
    with pytest.raises(ValueError, match="max_chars=2"):
        batch_char_ids([["a"]], max_chars=2)
    with pytest.raises(ValueError, match="must be str"):
        token_char_ids([b"bytes"])
