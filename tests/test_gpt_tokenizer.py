import gzip
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf
from forked_python import run_python
from tensorflow.core.protobuf import saved_model_pb2

from keras_bert_impl.gpt.bpe_learner import learn_bpe
from keras_bert_impl.gpt.bpe_learner import learn_merges
from keras_bert_impl.gpt.bpe_learner import write_bpe_files
from keras_bert_impl.gpt.gpt_tokenizer import GptBasicTokenizer
from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
from keras_bert_impl.gpt.gpt_tokenizer import bpe
from keras_bert_impl.gpt.gpt_tokenizer import load_bpe_files
from keras_bert_impl.gpt.graph_gpt_tokenizer import GraphGptTokenizer
from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDENS = os.path.join(ROOT, "tests", "goldens")
VOCAB = os.path.join(GOLDENS, "gpt_bpe", "vocab.json")
MERGES = os.path.join(GOLDENS, "gpt_bpe", "merges.txt")


@pytest.fixture(scope="module")
def goldens():
    with gzip.open(os.path.join(GOLDENS, "gpt_tokenizer_goldens.json.gz"), "rt", encoding="utf-8") as f:
        goldens = json.load(f)
    with open(os.path.join(GOLDENS, "tokenizer_corpus.json"), encoding="utf-8") as f:
        goldens["strings"] = json.load(f) + goldens["extra_strings"]
    assert len(goldens["strings"]) == len(goldens["ids"]) >= 2000
    return goldens


@pytest.fixture(scope="module")
def python():
    return GptTokenizer(VOCAB, MERGES)


@pytest.fixture(scope="module")
def graph():
    return GraphGptTokenizer(VOCAB, MERGES)


def _mismatches(strings, got, expected):
    bad = [(i, strings[i][:60]) for i in range(len(strings)) if got[i] != expected[i]]
    return f"{len(bad)} of {len(strings)} differ, first: {bad[:3]}" if bad else ""


def test_python_ids_match_reference(goldens, python):
    got = python.encode(goldens["strings"])
    assert not _mismatches(goldens["strings"], got, goldens["ids"])
    assert sum(row.count(python.unk_token_id) for row in got) > 10  # <unk> is exercised


def test_graph_ids_match_reference(goldens, graph):
    got = graph(goldens["strings"]).to_list()
    assert not _mismatches(goldens["strings"], got, goldens["ids"])


def test_bert_cleaning_rules_would_not_match(goldens):
    """The goldens tell the two rules apart: BERT's BasicTokenizer (Cc/Cf
    only, final sigma) gives other ids for some strings."""

    bert_rules = GptTokenizer(VOCAB, MERGES)
    bert_rules.basic_tokenizer = BasicTokenizer(normalize_nfc=True)
    strings = goldens["extra_strings"]
    expected = goldens["ids"][-len(strings):]
    differ = [s for s, e in zip(strings, expected) if bert_rules.encode(s) != e]
    assert "a\ue000b" in differ and "a\u0378b" in differ and "ΣΟΦΟΣ" in differ


def test_category_c_rule_for_gpt_only():
    bert, gpt = BasicTokenizer(), GptBasicTokenizer()
    for char in ("\ue000", "\U000f0000", "\u0378", "\ufdd0"):  # Co private use, Cn unassigned
        assert bert.tokenize(f"a{char}b") == [f"a{char}b"]
        assert gpt.tokenize(f"a{char}b") == ["ab"]
    for text in ("a\u200bb", "a\x07b", "a\ufffdb"):  # Cf, Cc, U+FFFD: both drop
        assert bert.tokenize(text) == gpt.tokenize(text) == ["ab"]
    assert gpt.tokenize("x\ty\nz\r\u2028w") == ["x", "y", "z", "w"]
    assert bert.tokenize("ΣΟΦΟΣ") == ["σοφος"] and gpt.tokenize("ΣΟΦΟΣ") == ["σοφοσ"]
    assert gpt.tokenize("Café 東京! e\u0301") == ["cafe", "東", "京", "!", "e"]


def test_tokenize_gives_the_symbols_behind_the_ids(goldens, python):
    for text in goldens["strings"][:300]:
        assert [python.token_to_id(t) for t in python.tokenize(text)] == python.encode(text)
    assert python.tokenize("Lowest \ua66e") == ["low", "est</w>", "\ua66e</w>"]
    assert python.encode("\ua66e") == [python.unk_token_id]


def test_decode_matches_reference(goldens, python):
    for index, text in goldens["decoded"].items():
        assert python.decode(goldens["ids"][int(index)]) == text


def test_special_tokens(goldens, python):
    assert python.vocab_size == goldens["vocab_size"] == 4000
    assert python.unk_token_id == goldens["unk_id"]
    special = [python.start_token_id, python.delimiter_token_id, python.classify_token_id]
    assert special == list(goldens["special_ids"].values()) == [4000, 4001, 4002]
    assert [python.token_to_id(t) for t in goldens["special_ids"]] == special
    assert len(python) == 4003
    # Typed in text they are plain text, never the special ids.
    assert not set(python.encode("_start_ _classify_")) & set(special)
    ids = python.pack(python.encode("Hello there"), python.encode("world"), max_length=64)
    assert ids[0] == 4000 and ids[-1] == 4002 and ids.count(4001) == 1
    assert python.decode(ids) == "_start_ hello there _delimiter_ world _classify_"
    assert python.decode(ids, skip_special_tokens=True) == "hello there world"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        python.decode([4003])


def test_add_special_tokens(tmp_path):
    tokenizer = GptTokenizer(VOCAB, MERGES)
    assert tokenizer.add_special_tokens(["<extra>", "the</w>", "<extra>"]) == [
        4003, tokenizer.vocab["the</w>"], 4003]
    assert len(tokenizer) == 4004 and tokenizer.id_to_token(4003) == "<extra>"


def test_bpe_merges_every_occurrence_left_to_right():
    ranks = {("a", "a"): 0, ("aa", "a</w>"): 1, ("b", "c"): 2}
    assert bpe("aaaa", ranks) == ["aa", "a", "a</w>"]  # "a a" twice, not three times
    assert bpe("aaaaa", ranks) == ["aa", "aaa</w>"]  # "aa aa a</w>", then rank 1
    assert bpe("aaa", ranks) == ["aaa</w>"]
    assert bpe("abca", ranks) == ["a", "bc", "a</w>"]
    assert bpe("x", ranks) == ["x</w>"]


def _random_bpe_files(folder, rng):
    """Merges over a tiny alphabet in odd orders (a merge of "aa" before
    the merge making it; merged symbols missing from the vocabulary), ids
    with gaps and one shared by two tokens."""
    symbols = ["a", "b", "c", "a</w>", "b</w>", "c</w>"]
    merges = []
    for _ in range(40):
        left = rng.choice([s for s in symbols if not s.endswith("</w>")])
        right = rng.choice(symbols)
        if (left, right) not in merges:
            merges.append((left, right))
            symbols.append(left + right)
    # "aa a" ranked before "a a": "aaaaa" tells merging every other "a a"
    # of a run in one step from merging them one at a time.
    merges = [("aa", "a"), ("a", "a"), *(m for m in merges if m not in (("aa", "a"), ("a", "a")))]
    tokens = [s for s in symbols if rng.random() < 0.85]
    vocab = {t: 2 * i for i, t in enumerate(dict.fromkeys(tokens))}
    vocab[tokens[-1]] = vocab[tokens[-2]]
    return write_bpe_files(vocab, merges, str(folder))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graph_bpe_equals_python_on_random_merges(tmp_path, seed):
    rng = random.Random(seed)
    vocab_file, merges_file = _random_bpe_files(tmp_path, rng)
    texts = [" ".join("".join(rng.choice("aabc") for _ in range(rng.randint(1, 14)))
                      for _ in range(rng.randint(0, 6))) for _ in range(300)]
    texts += ["a" * n for n in range(1, 12)]
    expected = GptTokenizer(vocab_file, merges_file).encode(texts)
    assert GraphGptTokenizer(vocab_file, merges_file)(texts).to_list() == expected


def test_load_bpe_files_quirks(tmp_path):
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "b": 1, "ab</w>": 3}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b</w>\nbad line here\n\nb a\na b</w>")
    vocab, ranks = load_bpe_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert vocab["<unk>"] == 4  # appended after the largest id, as transformers
    assert ranks == {("b", "a"): 0, ("a", "b</w>"): 1}  # a repeated pair keeps its later place
    (tmp_path / "vocab.json").write_text(json.dumps({"a": -1}))
    with pytest.raises(ValueError, match="non-negative"):
        load_bpe_files(tmp_path / "vocab.json", tmp_path / "merges.txt")


@pytest.mark.parametrize("max_length", [3, 8, 33])
def test_graph_packing_equals_python_packing(goldens, python, graph, max_length):
    rng = random.Random(max_length)
    a = [rng.choice(goldens["strings"]) for _ in range(100)]
    b = [rng.choice(goldens["strings"]) for _ in range(100)]
    for pairs in (None, b):
        expected = python(a, pairs, max_length=max_length)
        got = graph.pack(graph(a), None if pairs is None else graph(pairs), max_length)
        for key, value in expected.items():
            np.testing.assert_array_equal(got[key].numpy(), value, err_msg=key)
            assert got[key].dtype == tf.int32 and got[key].shape == (100, max_length)
    with pytest.raises(ValueError, match="room for the special tokens"):
        graph.pack(graph(a), graph(b), max_length=2)


def test_graph_bad_input(graph, python):
    raw = b"caf\xc3\xa9 \xff\xfebar \xee\x80\x80x"  # invalid UTF-8, private use
    assert graph(tf.constant([raw])).to_list()[0] == python.encode(raw)
    assert graph(tf.constant(["", " \t", "\ue000"])).to_list() == [[], [], []]
    assert graph(tf.constant([], tf.string)).to_list() == []
    unit = "The quick brown fox, naïve café 東京! "
    assert graph([unit * 20_000]).row_lengths().numpy()[0] == 20_000 * len(python.encode(unit))


def test_in_dataset_map(python, graph):
    texts = ["Hello world!", "", "Café 東京"]
    ds = tf.data.Dataset.from_tensor_slices(texts).batch(2)
    ds = ds.map(lambda text: graph.pack(graph.tokenize(text), None, 12))
    got = np.concatenate([batch["input_word_ids"].numpy() for batch in ds])
    np.testing.assert_array_equal(got, python(texts, max_length=12)["input_word_ids"])


def test_saved_model_signature(tmp_path, graph, python):
    """Exported and reloaded, with no Python op in the graph (a
    `tf.py_function` would only run in the process that saved it)."""

    class Serving(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = graph

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def encode(self, text):
            return self.tokenizer.pack(self.tokenizer.tokenize(text), None, 16)

    module = Serving()
    path = str(tmp_path / "gpt_tokenizer")
    tf.saved_model.save(module, path, signatures={"serving_default": module.encode})
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    graph_def = saved.meta_graphs[0].graph_def
    ops = {node.op for node in graph_def.node}
    ops |= {node.op for function in graph_def.library.function for node in function.node_def}
    assert ops & {"While", "StatelessWhile"}  # the BPE loop is in the graph
    assert not {op for op in ops if "PyFunc" in op}, ops
    loaded = tf.saved_model.load(path)
    out = loaded.signatures["serving_default"](text=tf.constant(["Hello wörld!", ""]))
    expected = python(["Hello wörld!", ""], max_length=16)["input_word_ids"]
    np.testing.assert_array_equal(out["input_word_ids"].numpy(), expected)


# Sennrich et al.'s example: "low" x5, "lower" x2, "newest" x6, "widest" x3.
TOY = ["low " * 5 + "lower " * 2, "newest " * 6 + "widest " * 3]


def test_learned_merges_by_hand():
    """(e s) and (s t</w>) both occur 9 times: the smaller pair goes first;
    later ties of 6 go the same way."""
    vocab, merges = learn_bpe(TOY, num_merges=7)
    assert merges == [("e", "s"), ("es", "t</w>"), ("l", "o"), ("e", "w"),
                      ("ew", "est</w>"), ("n", "ewest</w>"), ("lo", "w</w>")]
    alphabet = ["e", "w", "s", "t", "l", "o", "n", "d", "i", "r"]  # most frequent first
    assert list(vocab) == [*alphabet, *(c + "</w>" for c in alphabet),
                           "es", "est</w>", "lo", "ew", "ewest</w>", "newest</w>", "low</w>",
                           "<unk>"]
    assert list(vocab.values()) == list(range(len(vocab)))
    # Every pair seen twice or more gets merged, then learning stops.
    _, all_merges = learn_bpe(TOY, num_merges=100)
    assert all_merges[7:] == [("d", "est</w>"), ("i", "dest</w>"), ("w", "idest</w>"),
                              ("e", "r</w>"), ("lo", "w"), ("low", "er</w>")]
    # "a a a a</w>" -> "aa a a</w>"; then ("a", "a</w>") ties with ("aa", "a") and is smaller.
    assert learn_merges({"aaaa": 3}, 10) == [("a", "a"), ("a", "a</w>"), ("aa", "aa</w>")]


def test_learned_files_round_trip(tmp_path, goldens):
    texts = goldens["strings"][:600]
    vocab, merges = learn_bpe(texts, vocab_size=700)
    assert len(vocab) == 700 and list(vocab)[-1] == "<unk>"
    vocab_file, merges_file = write_bpe_files(vocab, merges, str(tmp_path))
    assert load_bpe_files(vocab_file, merges_file) == (
        vocab, {pair: rank for rank, pair in enumerate(merges)})
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]
    tokenizer = GptTokenizer(vocab_file, merges_file)
    assert tokenizer.vocab_size == 700 and tokenizer.start_token_id == 700
    ids = tokenizer.encode(texts)
    assert tokenizer.unk_token_id not in {i for row in ids for i in row}  # seen characters
    words = sum(len(tokenizer.basic_tokenizer.tokenize(t)) for t in texts)
    assert sum(map(len, ids)) < 2.2 * words  # subwords, not characters
    for text, row in zip(texts, ids):
        assert tokenizer.decode(row) == " ".join(tokenizer.basic_tokenizer.tokenize(text))
    assert GraphGptTokenizer(vocab_file, merges_file)(texts).to_list() == ids


def test_learn_bpe_bad_arguments():
    with pytest.raises(ValueError, match="smaller than the 3 characters"):
        learn_bpe(["ab c"], vocab_size=6)
    with pytest.raises(ValueError, match="exactly one"):
        learn_bpe(["ab c"], vocab_size=50, num_merges=5)
    with pytest.raises(ValueError, match="No words"):
        learn_bpe(["", " \t "], num_merges=5)


def test_learn_vocab_command_line(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TOY * 3), encoding="utf-8")
    command = ["-m", "training.learn_vocab", "--model=gpt",
               f"--input={corpus}", f"--output={tmp_path / 'out'}", "--vocab_size=25"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    result = run_python(command, ROOT, env)
    assert result.returncode == 0, result.stderr[-2000:]
    vocab, ranks = load_bpe_files(tmp_path / "out" / "vocab.json", tmp_path / "out" / "merges.txt")
    assert len(vocab) == 25 and list(ranks)[0] == ("e", "s")
    result = run_python(command[:2] + ["--model=gpt2", *command[3:]], ROOT, env)
    assert result.returncode != 0 and "--model" in result.stderr and "bert" in result.stderr


def test_merges_of_another_bpe_run_are_refused(tmp_path):
    """vocab.json with a merges.txt of another run (here: each merge's
    symbols swapped, making tokens the vocabulary lacks) is refused naming
    both files; the pair written together loads."""
    from keras_bert_impl.gpt.gpt_tokenizer import load_bpe_files

    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens", "gpt_bpe")
    vocab, merges = os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")
    load_bpe_files(vocab, merges)
    lines = open(merges, encoding="utf-8").read().splitlines()
    other = tmp_path / "merges.txt"
    other.write_text("\n".join([lines[0]] + [" ".join(line.split()[::-1]) for line in lines[1:]])
                     + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"{other} and {vocab} are not one BPE pair: "):
        load_bpe_files(vocab, str(other))
