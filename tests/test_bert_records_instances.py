"""BERT's pretraining instances as the writer makes them (`tf_records.bert`
instances, masking, sentence packing): masking and NSP statistics, whole-word
masking, the inlined draws of `original_rng`, rows packed without NSP."""

import numpy as np
import pytest
from bert_records_cases import CLS
from bert_records_cases import IDS
from bert_records_cases import MASK
from bert_records_cases import PAD
from bert_records_cases import SEP
from bert_records_cases import VOCAB
from bert_records_cases import corpus_file  # noqa: F401 (the `corpus` fixture)
from bert_records_cases import read_records
from bert_records_cases import written_records  # noqa: F401 (the `written` fixture)

from tf_records.bert.instances import InstanceConfig
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data


@pytest.fixture(scope="module")
def written_original_rng(corpus, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("records_original_rng"))
    write_pretraining_data([corpus], VOCAB, folder, InstanceConfig(original_rng=True),
                           WriterConfig(dupe_factor=3, documents_per_block=150), progress=False)
    return folder


@pytest.mark.parametrize("mode", ["vectorized", "original_rng"])
def test_masking_statistics(mode, written, written_original_rng):
    r = read_records(written if mode == "vectorized" else written_original_rng)
    tokens = r["input_mask"].sum()
    weights = r["masked_lm_weights"]
    masked = int(weights.sum())
    assert tokens > 100_000, tokens
    assert abs(masked / tokens - 0.15) < 0.005, masked / tokens
    # Every row masks exactly its budget min(20, max(1, round(len * 0.15))).
    lengths = r["input_mask"].sum(1)
    budget = np.minimum(20, np.maximum(1, np.round(lengths * 0.15)))
    np.testing.assert_array_equal(weights.sum(1), budget)
    real = weights > 0
    rows, cols = np.nonzero(real)
    positions = r["masked_lm_positions"][rows, cols]
    shown = r["input_ids"][rows, positions]
    labels = r["masked_lm_ids"][rows, cols]
    as_mask = np.mean(shown == MASK)
    kept = np.mean((shown == labels) & (labels != MASK))
    random = 1 - as_mask - kept
    assert abs(as_mask - 0.8) < 0.015 and abs(kept - 0.1) < 0.015 and abs(random - 0.1) < 0.015, (
        as_mask, kept, random)
    # Never [CLS], [SEP] or padding; positions ascending.
    assert not np.isin(labels, [CLS, SEP, PAD]).any()
    assert (positions < r["input_mask"][rows].sum(1)).all()
    assert (positions > 0).all()
    pos = np.where(real, r["masked_lm_positions"], 10**6)
    assert ((np.diff(pos, axis=1) > 0) | (pos[:, 1:] == 10**6)).all()
    # Every position is equally likely to be chosen (no bias to the front).
    relative = positions / r["input_mask"][rows].sum(1)
    assert abs(relative.mean() - 0.5) < 0.01, relative.mean()
    print(f"{mode}: {tokens} tokens, masked {masked / tokens:.4f}, "
          f"[MASK] {as_mask:.3f} kept {kept:.3f} random {random:.3f}")


def test_nsp_share_default_quirk_and_exact(written, corpus, tmp_path):
    default_share = read_records(written)["next_sentence_labels"].mean()
    assert 0.5 <= default_share < 0.7, default_share  # the original's quirk: above half
    exact = str(tmp_path / "exact")
    write_pretraining_data([corpus], VOCAB, exact, InstanceConfig(exact_nsp=True),
                           WriterConfig(dupe_factor=3, documents_per_block=150), progress=False)
    r = read_records(exact)
    assert len(r["next_sentence_labels"]) > 2000
    assert abs(r["next_sentence_labels"].mean() - 0.5) < 0.02, r["next_sentence_labels"].mean()
    print(f"NSP random share: default {default_share:.3f}, exact_nsp {r['next_sentence_labels'].mean():.3f}")


@pytest.mark.parametrize("original_rng", [False, True])
def test_whole_word_masking(original_rng, corpus, tmp_path):
    """Words are masked whole, never over budget, and greedily: a word left
    unmasked would not have fit the budget (as the original's loop)."""
    folder = str(tmp_path / "wwm")
    write_pretraining_data(
        [corpus], VOCAB, folder, InstanceConfig(do_whole_word_mask=True, original_rng=original_rng),
        WriterConfig(dupe_factor=1, documents_per_block=200), progress=False)
    r = read_records(folder)
    is_subword = np.zeros(max(IDS.values()) + 1, bool)
    is_subword[[i for t, i in IDS.items() if t.startswith("##")]] = True
    multi_piece_words = 0
    for row in range(len(r["input_ids"])):
        n = int(r["masked_lm_weights"][row].sum())
        positions = r["masked_lm_positions"][row][:n]
        original = r["input_ids"][row].copy()
        original[positions] = r["masked_lm_ids"][row][:n]
        length = int(r["input_mask"][row].sum())
        # The original's words: a "##" piece joins the previous candidate
        # word (skipping [CLS]/[SEP]); anything else starts a word.
        words = []
        for i in range(length):
            if original[i] in (CLS, SEP):
                continue
            if words and is_subword[original[i]]:
                words[-1].append(i)
            else:
                words.append([i])
        masked = set(positions.tolist())
        budget = min(20, max(1, round(length * 0.15)))
        assert n <= budget
        for word in words:
            hit = [i in masked for i in word]
            assert all(hit) or not any(hit), (row, word, positions)
            if not hit[0]:
                assert n + len(word) > budget, (row, word, n, budget)
            elif len(word) > 1:
                multi_piece_words += 1
    assert multi_piece_words > 300, multi_piece_words


def test_vectorized_whole_word_budget_is_greedy_over_all_words():
    """30 three-piece words and one single piece, budget 14: the greedy
    visit takes four 3-piece words and then, wherever it comes in the random
    order (often past rank 20), the single piece: 13 masked in every row."""
    from tf_records.bert.instances import VocabInfo
    from tf_records.bert.masking import mask_block

    vocab = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[MASK]": 3, "w": 4, "##p": 5, "x": 6}
    info = VocabInfo.from_vocab(vocab)
    row = [1] + [4, 5, 5] * 15 + [2] + [4, 5, 5] * 15 + [6, 2]  # 93 tokens
    ids = np.array([row] * 300)
    masked_ids, positions, labels, weights = mask_block(
        ids, np.ones_like(ids), InstanceConfig(max_seq_length=93, do_whole_word_mask=True), info,
        np.random.default_rng(0))
    np.testing.assert_array_equal(weights.sum(1), 13)
    np.testing.assert_array_equal(labels[weights > 0] == 6, np.tile([False] * 12 + [True], 300))
    assert (np.take_along_axis(ids, positions, 1)[weights > 0] == labels[weights > 0]).all()


def test_inlined_draws_equal_random_module():
    """`_shuffle` and `_randint` (the `original_rng` hot spots, inlined) give
    `random.Random`'s exact results and leave it in the same state."""
    import random

    from tf_records.bert.instances import _randint
    from tf_records.bert.instances import _shuffle

    for seed in range(300):
        a = list(range(seed % 157))
        b = list(a)
        r1, r2 = random.Random(seed), random.Random(seed)
        r1.shuffle(a)
        _shuffle(b, r2)
        assert a == b
        low = seed % 7
        for high in (low, low + 1, low + 2, low + 100, low + 2**31):
            assert r1.randint(low, high) == _randint(r2, low, high)
        assert r1.random() == r2.random()


@pytest.mark.parametrize("cross", [True, False])
def test_sentence_packing_keeps_every_token_in_order(cross):
    """RoBERTa's FULL-SENTENCES (cross) and DOC-SENTENCES rows: at most the
    budget, sentences whole unless longer than a row (then split, never cut),
    every token once and in order; DOC rows never hold two documents, FULL
    rows join documents only through the separator."""
    from tf_records.bert.sentence_packing import pack_sentences

    rng = np.random.default_rng(3)
    sep, budget = -1, 13
    documents = []
    for d in range(40):  # ids 1000*d + k: the document is readable from the id
        sentences, k = [], 0
        for _ in range(rng.integers(1, 6)):
            n = int(rng.integers(1, 30))  # some longer than a row
            sentences.append(list(range(1000 * d + k, 1000 * d + k + n)))
            k += n
        documents.append(sentences)
    rows = list(pack_sentences(documents, budget, cross, sep))
    assert all(0 < len(r) <= budget for r in rows)
    assert [t for r in rows for t in r if t != sep] == [
        t for doc in documents for s in doc for t in s]
    for row in rows:
        assert row[0] != sep and row[-1] != sep
        parts = [[]]
        for t in row:
            parts[-1].append(t) if t != sep else parts.append([])
        assert all(len({t // 1000 for t in part}) == 1 for part in parts)  # one doc per part
        if not cross:
            assert len(parts) == 1
    if cross:
        assert sum(r.count(sep) for r in rows) > 0
    # Whole sentences: a row starts at a sentence start unless the sentence is
    # longer than the budget or continues from the previous row.
    starts = {s[0] for doc in documents for s in doc}
    long_pieces = {t for doc in documents for s in doc if len(s) > budget for t in s}
    assert all(r[0] in starts or r[0] in long_pieces for r in rows)


@pytest.mark.parametrize("input_format", ["full_sentences", "doc_sentences"])
def test_writer_packs_rows_without_nsp(input_format, corpus, tmp_path):
    """`input_format` rows in the records: [CLS] ... [SEP], one segment, no
    NSP label, masked as usual; FULL-SENTENCES rows fuller than pairs."""
    folder = str(tmp_path / input_format)
    manifest = write_pretraining_data(
        [corpus], VOCAB, folder, InstanceConfig(input_format=input_format),
        WriterConfig(dupe_factor=1, documents_per_block=150), progress=False)
    assert manifest["instance_config"]["input_format"] == input_format
    r = read_records(folder)
    lengths = r["input_mask"].sum(1)
    assert (r["input_ids"][:, 0] == CLS).all()
    real = np.arange(r["input_ids"].shape[1])[None] < lengths[:, None]
    assert (r["segment_ids"] == 0).all() and (r["next_sentence_labels"] == 0).all()
    assert ((r["input_mask"] == 1) == real).all()
    assert (r["masked_lm_weights"].sum(1) > 0).all()
    unmasked = real.copy()  # the random 10% may draw [SEP] itself: look elsewhere
    np.put_along_axis(unmasked, r["masked_lm_positions"], False, 1)
    seps = ((r["input_ids"] == SEP) & unmasked).sum(1)
    last = np.take_along_axis(r["input_ids"], (lengths - 1)[:, None], 1)[:, 0]
    assert (last == SEP).all()
    if input_format == "doc_sentences":  # one document a row: [SEP] only at its end
        assert (seps == 1).all()
    else:  # documents joined by an extra [SEP]
        assert (seps >= 1).all() and (seps > 1).mean() > 0.3
    pairs = str(tmp_path / "pairs")
    write_pretraining_data([corpus], VOCAB, pairs, InstanceConfig(),
                           WriterConfig(dupe_factor=1, documents_per_block=150), progress=False)
    if input_format == "full_sentences":  # rows fill up (measured 111 vs pairs' 93 of 128)
        assert lengths.mean() > max(0.8 * 128, read_records(pairs)["input_mask"].sum(1).mean())
    with pytest.raises(ValueError, match="input_format"):
        InstanceConfig(input_format="full")
