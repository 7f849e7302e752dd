import gzip
import inspect
import os
import subprocess

import pytest
from forked_python import run_python

from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from keras_bert_impl.bert.wordpiece_learner import learn_vocab
from keras_bert_impl.bert.wordpiece_learner import write_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _stdlib_text():
    import collections
    import json as json_module
    import textwrap

    docs = []
    for module in (collections, json_module, textwrap, inspect, os.path, subprocess):
        for name in dir(module):
            doc = inspect.getdoc(getattr(module, name, None))
            if doc and len(doc) > 40:
                docs.append(doc)
    return docs


def test_learned_vocab_layout_and_coverage(tmp_path):
    texts = _stdlib_text()
    tokens = learn_vocab(texts, vocab_size=800)
    assert 700 <= len(tokens) <= 800
    assert tokens[0] == "[PAD]" and tokens[1] == "[unused0]" and tokens[99] == "[unused98]"
    assert tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(tokens)) == len(tokens)
    assert any(t.startswith("##") for t in tokens)
    path = tmp_path / "vocab.txt"
    write_vocab(tokens, path)
    tokenizer = BertTokenizer(str(path))
    assert (tokenizer.unk_token_id, tokenizer.mask_token_id) == (100, 103)
    pieces = [p for text in texts for p in tokenizer.tokenize(text)]
    unk_share = pieces.count("[UNK]") / len(pieces)
    assert unk_share < 0.01, unk_share
    words = sum(len(text.split()) for text in texts)
    assert len(pieces) < 2.5 * words  # WordPiece, not characters


def test_threshold_rounds_equal_tensorflow_text():
    """Our rounds (no tables: the kept tokens are the words and the rests
    after a split at or over the threshold) give tensorflow-text's
    `learn_with_thresh` vocabulary exactly, with and without the joiner, at
    thresholds from 1 to above every count; and the whole search gives
    `learn`'s vocabulary."""
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as lib

    from keras_bert_impl.bert import wordpiece_learner as vocab_learner
    from keras_bert_impl.bert.wordpiece_learner import count_words
    from keras_bert_impl.bert.wordpiece_learner import learn_from_counts
    from keras_bert_impl.bert.wordpiece_learner import reserved_tokens

    counts = count_words(_stdlib_text())
    # And words BasicTokenizer never makes, whose starts are also joined
    # rests ("##ab" of "xab") or hold the joiner.
    words = list(counts.items()) + [("##ab", 9), ("xab", 7), ("yab", 5), ("###", 4),
                                    ("a##b", 3), ("##", 2)]
    for joiner in (True, False):
        params = lib.Params(upper_thresh=int(1e7), lower_thresh=1, num_iterations=4,
                            max_input_tokens=int(5e6), max_token_length=50,
                            max_unique_chars=1000, vocab_size=800, slack_ratio=0.05,
                            include_joiner_token=joiner, joiner="##",
                            reserved_tokens=reserved_tokens())
        first = vocab_learner._first_iteration(words)
        for thresh in (1, 2, 3, 7, 40, 500, 10**7):
            ours = vocab_learner._learn_with_thresh(words, first, thresh, params)
            assert ours == lib.learn_with_thresh(words, thresh, params), (joiner, thresh)
    reference = lib.learn(words, vocab_size=800, reserved_tokens=reserved_tokens(),
                          lower_thresh=1)
    assert learn_from_counts(dict(words), 800, reserved_tokens()) == reference


def test_learn_vocab_bad_arguments():
    with pytest.raises(ValueError, match="no room"):
        learn_vocab(["a b c"], vocab_size=50)
    with pytest.raises(ValueError, match="No words"):
        learn_vocab(["", "   "], vocab_size=500)


def test_learn_vocab_command_line(tmp_path):
    plain, packed = tmp_path / "a.txt", tmp_path / "b.txt.gz"
    texts = _stdlib_text()
    plain.write_text("\n".join(texts[: len(texts) // 2]), encoding="utf-8")
    with gzip.open(packed, "wt", encoding="utf-8") as f:
        f.write("\n".join(texts[len(texts) // 2:]))
    out = tmp_path / "vocab" / "vocab.txt"
    result = run_python(["-m", "training.learn_vocab", f"--input={tmp_path}/*.txt,{packed}",
                         f"--output={out}", "--vocab_size=600"], ROOT,
                        dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT))
    assert result.returncode == 0, result.stderr[-2000:]
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(lines) <= 600
