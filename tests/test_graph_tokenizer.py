import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from test_tokenizer import UNCASED_VOCAB
from test_tokenizer import _golden_rows
from test_tokenizer import cased_vocab  # noqa: F401 (fixture)
from test_tokenizer import corpus  # noqa: F401 (fixture)
from test_tokenizer import goldens  # noqa: F401 (fixture)

from keras_bert_impl.tokenizers import BertPreprocessor
from keras_bert_impl.tokenizers import BertTokenizer
from keras_bert_impl.tokenizers import GraphBertTokenizer


@pytest.fixture(scope="module")
def graph():
    return GraphBertTokenizer(UNCASED_VOCAB)


@pytest.mark.parametrize("case", ["uncased", "cased"])
@pytest.mark.parametrize("flavour", ["original", "hf"])
def test_graph_ids_match_reference_tokenizer(corpus, goldens, cased_vocab, case, flavour):  # noqa: F811
    tokenizer = GraphBertTokenizer(
        UNCASED_VOCAB if case == "uncased" else cased_vocab,
        do_lower_case=case == "uncased",
        normalize_nfc=flavour == "hf",
    )
    ids = tokenizer(corpus).to_list()
    rows = _golden_rows(goldens, f"{case}_{flavour}")
    mismatches = [(i, corpus[i]) for i in range(len(corpus)) if ids[i] != rows[i].tolist()]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"


@pytest.mark.parametrize("max_length", [5, 16, 33, 128])
def test_graph_packing_equals_python_packing(corpus, graph, max_length):  # noqa: F811
    rng = random.Random(max_length)
    a = [rng.choice(corpus) for _ in range(200)]
    b = [rng.choice(corpus) for _ in range(200)]
    python = BertTokenizer(UNCASED_VOCAB)
    for pairs in (None, b):
        expected = python(a, pairs, max_length=max_length)
        got = graph.pack(graph(a), None if pairs is None else graph(pairs), max_length)
        for key, value in expected.items():
            np.testing.assert_array_equal(got[key].numpy(), value, err_msg=key)
            assert got[key].dtype == tf.int32


def test_preprocessor_in_dataset_map():
    preprocessor = BertPreprocessor(UNCASED_VOCAB, max_length=12)
    texts = ["Hello world!", "", "Café 東京"]
    ds = tf.data.Dataset.from_tensor_slices((texts, [1, 0, 1])).batch(2)
    ds = ds.map(lambda text, label: (preprocessor(text), label))
    batches = list(ds)
    assert [b[0]["input_word_ids"].shape.as_list() for b in batches] == [[2, 12], [1, 12]]
    expected = BertTokenizer(UNCASED_VOCAB)(texts, max_length=12)
    got = np.concatenate([b[0]["input_word_ids"].numpy() for b in batches])
    np.testing.assert_array_equal(got, expected["input_word_ids"])
    pairs = preprocessor((tf.constant(["a b"]), tf.constant(["c"])))
    assert pairs["input_type_ids"].numpy().tolist() == [[0, 0, 0, 0, 1, 1] + [0] * 6]
    rebuilt = BertPreprocessor.from_config(preprocessor.get_config())
    assert rebuilt.max_length == 12
    column = preprocessor(tf.constant([["a b"], ["c"]]))  # Keras' (B, 1) text input
    assert column["input_word_ids"].shape.as_list() == [2, 12]
    with pytest.raises(ValueError, match=r"one string per example.*Received shape \(2, 2\)"):
        preprocessor(tf.constant([["a", "b"], ["c", "d"]]))  # was 4 rows for 2 labels
    with pytest.raises(ValueError, match="`text_pairs` must hold one string per example"):
        preprocessor((tf.constant(["a", "b"]), tf.constant([["c", "d"], ["e", "f"]])))


def test_saved_model_signature_in_fresh_process(tmp_path, graph):
    class Serving(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = graph

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def encode(self, text):
            return self.tokenizer.pack(self.tokenizer.tokenize(text), None, 16)

    module = Serving()
    path = str(tmp_path / "tokenizer")
    tf.saved_model.save(module, path, signatures={"serving_default": module.encode})
    script = textwrap.dedent(f"""
        import tensorflow as tf, tensorflow_text  # noqa: F401 (registers ops)
        loaded = tf.saved_model.load({path!r})
        out = loaded.signatures["serving_default"](text=tf.constant(["Hello world!", ""]))
        print(out["input_word_ids"].numpy().tolist())
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    expected = BertTokenizer(UNCASED_VOCAB)(["Hello world!", ""], max_length=16)
    assert result.stdout.strip().splitlines()[-1] == str(expected["input_word_ids"].tolist())


def test_graph_bad_input(graph):
    python = BertTokenizer(UNCASED_VOCAB)
    # Invalid UTF-8: dropped in both paths.
    ids = graph(tf.constant([b"caf\xc3\xa9 \xff\xfebar"])).to_list()[0]
    assert ids == python.convert_tokens_to_ids(python.tokenize(b"caf\xc3\xa9 \xff\xfebar"))
    assert graph(tf.constant(["", "", ""])).to_list() == [[], [], []]
    assert graph(tf.constant([], tf.string)).to_list() == []
    unit = "The quick brown fox, naïve café 東京! "
    big = unit * 300_000  # ~11 MB in one string
    assert len(big.encode()) > 10_000_000
    assert graph([big]).row_lengths().numpy()[0] == 300_000 * len(python.tokenize(unit))
