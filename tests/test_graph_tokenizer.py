import os
import random
import string
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

from keras_bert_impl.bert.bert_preprocessor import BertPreprocessor
from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from keras_bert_impl.bert.graph_bert_tokenizer import FAST_PATH_PUNCTUATION
from keras_bert_impl.bert.graph_bert_tokenizer import GraphBertTokenizer


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
    ids = tokenizer(corpus).to_list()  # fast and exact rows mixed
    rows = _golden_rows(goldens, f"{case}_{flavour}")
    mismatches = [(i, corpus[i]) for i in range(len(corpus)) if ids[i] != rows[i].tolist()]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"
    # The fast rows alone: the batch that skips the exact path entirely.
    fast = np.flatnonzero(tokenizer.fast_path_rows(tf.constant(corpus)).numpy())
    assert len(fast) > 1500
    ids = tokenizer([corpus[i] for i in fast]).to_list()
    mismatches = [(i, corpus[i]) for i, row in zip(fast, ids) if row != rows[i].tolist()]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"


def _random_fast_text(rng, words, count, limit):
    """Text that stresses the fast path: vocabulary words in any case,
    glued-together words and letter runs around the `limit`, punctuation
    runs (ASCII and typographic), literal "[UNK]" / "##", runs of spaces,
    no-break spaces, tabs, CR/LF."""
    extras = ["[UNK]", "[CLS]", "[unk]", "##", "#", "##ing", "\t", "\n", "\r\n", "\r", "   ",
              "\u00a0"]
    punctuation = string.punctuation + FAST_PATH_PUNCTUATION
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 24)):
            draw = rng.random()
            if draw < 0.45:
                parts.append(rng.choice(words))
            elif draw < 0.55:
                parts.append("".join(rng.choice(words) for _ in range(rng.randint(2, 40))))
            elif draw < 0.6:
                run = rng.choice(string.ascii_letters + string.digits)
                parts.append(run * rng.randint(limit - 2, limit + 2))
            elif draw < 0.75:
                parts.append("".join(rng.choice(punctuation) for _ in range(rng.randint(1, 4))))
            elif draw < 0.85:
                parts.append(rng.choice(extras))
            else:
                ascii_soup = rng.choices(string.printable[:95], k=rng.randint(1, 12))
                parts.append("".join(ascii_soup))
            parts.append(rng.choice([" ", " ", "", "  ", "\t", "\n"]))
        text = "".join(parts)
        texts.append(text.upper() if rng.random() < 0.2 else text)
    return texts


@pytest.mark.parametrize("case, limit", [("uncased", 200), ("cased", 23)])
def test_fast_path_equals_python_on_random_text(cased_vocab, case, limit):  # noqa: F811
    vocab = UNCASED_VOCAB if case == "uncased" else cased_vocab
    lower = case == "uncased"
    python = BertTokenizer(vocab, do_lower_case=lower, max_input_chars_per_word=limit)
    graph = GraphBertTokenizer(vocab, do_lower_case=lower, max_input_chars_per_word=limit)
    words = [w.removeprefix("##") for w in python.vocab if w.removeprefix("##").isascii()]
    words = [w for w in words if w.isalnum()]
    texts = _random_fast_text(random.Random(limit), words, 1500, limit)
    assert graph.fast_path_rows(tf.constant(texts)).numpy().all()
    ids = graph(texts).to_list()
    expected = _python_ids(python, texts)
    mismatches = [(t, a, b) for t, a, b in zip(texts, ids, expected) if a != b]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:2]}"
    # The fuzz reached the cases it is for.
    unk = python.unk_token_id
    assert sum(unk in row for row in expected) > 100
    assert sum(row.count(unk) for row in expected) < sum(map(len, expected)) // 5


def test_fast_path_with_odd_vocabulary(tmp_path):
    """Tokens the original can never match (inner spaces, a duplicated line,
    punctuation inside a token, "##" alone, non-ASCII) must not change the
    fast path's ids: with inner spaces in its vocabulary, tensorflow-text's
    end-to-end WordPiece matches across spaces."""
    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "ab", "##b", "##a", "a.b",
             "##.", ".", "a b", "", "hello", "a", "##", "#", "!", "x y", "##x y", "HELLO",
             "Hello", "c", "##c", "##d", "d", " e ", "ab!", "!!", "ABC", "##BC", "é", "##é"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pieces = ["a", "b", "c", "d", "e", "x", "y", "A", "B", "C", ".", "!", "#", " ", "\t", "[", "]",
              "hello", "HELLO", "Hello", "[UNK]", "##", "a.b", "a b"]
    rng = random.Random(7)
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    for lower in (True, False):
        python = BertTokenizer(str(vocab), do_lower_case=lower, max_input_chars_per_word=5)
        graph = GraphBertTokenizer(str(vocab), do_lower_case=lower, max_input_chars_per_word=5)
        assert graph.fast_path_rows(tf.constant(texts)).numpy().all()
        ids = graph(texts).to_list()
        expected = _python_ids(python, texts)
        mismatches = [(t, a, b) for t, a, b in zip(texts, ids, expected) if a != b]
        assert not mismatches, f"lower={lower}: {len(mismatches)}, first: {mismatches[:2]}"


@pytest.mark.parametrize("case", ["uncased", "cased"])
def test_fast_path_on_every_character_it_takes(cased_vocab, case):  # noqa: F811
    vocab = UNCASED_VOCAB if case == "uncased" else cased_vocab
    python = BertTokenizer(vocab, do_lower_case=case == "uncased", max_input_chars_per_word=3)
    graph = GraphBertTokenizer(vocab, do_lower_case=case == "uncased", max_input_chars_per_word=3)
    every = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]  # no surrogates
    taken = [c for c, fast in zip(every, graph.fast_path_rows(tf.constant(every)).numpy()) if fast]
    ascii_text = "\t\n\r" + "".join(map(chr, range(32, 127)))
    assert "".join(taken) == ascii_text + "\u00a0" + FAST_PATH_PUNCTUATION
    forms = ("{0}", "Ab{0}c", "a{0}{0}B d", " {0}abcd{0}")
    texts = [form.format(c) for c in taken for form in forms]
    ids = graph(texts).to_list()
    expected = _python_ids(python, texts)
    mismatches = [(t, a, b) for t, a, b in zip(texts, ids, expected) if a != b]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"
    # Tokens that only the typographic punctuation reaches keep their ids.
    assert sum(python.vocab.get(c) in row for c in FAST_PATH_PUNCTUATION for row in ids) > 20
    # A byte limit under 3 would cut 2-3 byte punctuation: ASCII only then.
    tiny = GraphBertTokenizer(vocab, do_lower_case=case == "uncased", max_input_chars_per_word=2)
    tiny_python = BertTokenizer(vocab, do_lower_case=case == "uncased", max_input_chars_per_word=2)
    texts = ["a-b", "a\u2014b"]
    assert tiny.fast_path_rows(tf.constant(texts)).numpy().tolist() == [True, False]
    assert tiny(texts).to_list() == _python_ids(tiny_python, texts)


def test_fast_path_rows_and_mixed_batches(graph):
    python = BertTokenizer(UNCASED_VOCAB)
    fast = ["Plain ASCII, punctuation!", "tab\tnew\nline\r\nend", "",
            "\u201cQuoted\u201d \u2014 dash"]
    # ASCII controls other than tab/LF/CR: the original drops them, while
    # tensorflow-text splits on some (\x0b, \x0c); non-ASCII; bad UTF-8.
    exact = ["ver\x0btical", "form\x0cfeed", "unit\x1fsep", "del\x7fete", "nul\x00l", "café",
             "東京", "a\u3000b", b"caf\xff"]
    texts = [t for pair in zip(fast * 3, exact) for t in pair]  # interleaved
    rows = graph.fast_path_rows(tf.constant(texts)).numpy().tolist()
    assert rows == [True, False] * len(exact)
    assert graph(tf.constant(texts)).to_list() == _python_ids(python, texts)


def _python_ids(python, texts):
    return [python.convert_tokens_to_ids(python.tokenize(text)) for text in texts]


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
        for texts in (["Hello world!", ""], ["Caf\\u00e9 \\u6771", "Hello world!"]):
            out = loaded.signatures["serving_default"](text=tf.constant(texts))
            print(out["input_word_ids"].numpy().tolist())
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    # All-ASCII batch (fast path only), then a mixed one (both paths).
    python = BertTokenizer(UNCASED_VOCAB)
    expected = [python(texts, max_length=16)["input_word_ids"].tolist()
                for texts in (["Hello world!", ""], ["Caf\u00e9 \u6771", "Hello world!"])]
    assert result.stdout.strip().splitlines()[-2:] == [str(e) for e in expected]


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
