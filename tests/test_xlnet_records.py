"""XLNet's pretraining data: records written by `xlnet.writer`, read with the
local permutation by `xlnet.reader`, proved against numpy ports of the
original `data_utils.py` written here (loop by loop, as the original) and
against the properties of section 4 of the comparison guide.

Over 400 lines: one room, XLNet's records proved against the numpy ports of the
original `data_utils.py` below (about 180 lines), which the writer's, the
reader's and the command's tests all compare with; the reader's tests share the
module-scoped `written` records.
"""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from forked_python import run_python

from tf_records.manifest import file_sha256
from tf_records.manifest import read_manifest
from tf_records.xlnet.instances import sample_mask
from tf_records.xlnet.instances import sentence_boundaries
from tf_records.xlnet.instances import split_a_and_b
from tf_records.xlnet.permutation import local_permutation
from tf_records.xlnet.permutation import permutation_index
from tf_records.xlnet.reader import xlnet_features_dataset
from tf_records.xlnet.reader import xlnet_pretraining_dataset
from tf_records.xlnet.schema import FEATURE_NAMES
from tf_records.xlnet.schema import XLNetRecordSchema
from tf_records.xlnet.schema import encode_xlnet_examples
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
    manifest = read_manifest(folder)
    spec = XLNetRecordSchema.from_manifest(manifest["schema"]).feature_spec()
    files = [os.path.join(folder, s["file"]) for s in manifest["shards"]]
    out = {k: [] for k in spec}
    for batch in tf.data.TFRecordDataset(files).batch(512):
        for k, v in tf.io.parse_example(batch, spec).items():
            out[k].append(v.numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


# --- numpy ports of the original data_utils.py (our own code, the original's loops) ---------


def port_sample_mask(is_start, rng, goal, alpha, beta, reverse=False, whole_word=False):
    seg_len = len(is_start)
    mask = np.zeros(seg_len, bool)
    ngrams = np.arange(1, 6)
    pvals = 1.0 / np.arange(1, 6)
    pvals /= pvals.sum(keepdims=True)
    if reverse:
        is_start = np.flip(is_start, 0)
    num_predict = cur_len = 0
    while cur_len < seg_len:
        if goal is not None and num_predict >= goal:
            break
        n = rng.choice(ngrams, p=pvals)
        if goal is not None:
            n = min(n, goal - num_predict)
        ctx_size = (n * alpha) // beta
        l_ctx = rng.integers(ctx_size)
        r_ctx = ctx_size - l_ctx
        beg = cur_len + l_ctx
        while beg < seg_len and not is_start[beg]:
            beg += 1
        if beg >= seg_len:
            break
        end, cnt_ngram = beg + 1, 1
        while end < seg_len:
            # the original reads seg[beg] here; whole words: seg[end] (its pull request 16)
            if is_start[end if whole_word else beg]:
                cnt_ngram += 1
                if cnt_ngram > n:
                    break
            end += 1
        if end >= seg_len:
            break
        if whole_word and goal is not None:  # ours: never past the goal, fewer whole words
            while end - beg > goal - num_predict:
                end -= 1
                while end > beg and not is_start[end]:
                    end -= 1
            if end == beg:
                break
        mask[beg:end] = True
        num_predict += end - beg
        cur_len = end + r_ctx
    while goal is not None and num_predict < goal:
        i = rng.integers(seg_len)
        if not mask[i]:
            mask[i] = True
            num_predict += 1
    return np.flip(mask, 0) if reverse else mask


def port_split_a_and_b(data, sent_ids, begin_idx, tot_len, rng):
    data_len = data.shape[0]
    if begin_idx + tot_len >= data_len:
        return None
    end_idx, cut_points = begin_idx + 1, []
    while end_idx < data_len:
        if sent_ids[end_idx] != sent_ids[end_idx - 1]:
            if end_idx - begin_idx >= tot_len:
                break
            cut_points.append(end_idx)
        end_idx += 1
    a_begin = begin_idx
    if len(cut_points) == 0 or rng.random() < 0.5:
        label = 0
        a_end = end_idx if len(cut_points) == 0 else cut_points[rng.integers(len(cut_points))]
        b_len = max(1, tot_len - (a_end - a_begin))
        b_begin = rng.integers(0, data_len - 1 - b_len, endpoint=True)  # random.randint
        b_end = b_begin + b_len
        while b_begin > 0 and sent_ids[b_begin - 1] == sent_ids[b_begin]:
            b_begin -= 1
        while b_end < data_len - 1 and sent_ids[b_end - 1] == sent_ids[b_end]:
            b_end += 1
    else:
        label = 1
        a_end = cut_points[rng.integers(len(cut_points))]
        b_begin, b_end = a_end, end_idx
    while a_end - a_begin + b_end - b_begin > tot_len:
        if a_end - a_begin > b_end - b_begin:
            a_end -= 1
        else:
            b_end -= 1
    if a_end >= data_len or b_end >= data_len:
        return None
    return (data[a_begin:a_end], data[b_begin:b_end], label,
            data[a_begin + 1:a_end + 1], data[b_begin:b_end + 1])


def port_create_tfrecords(data, sent_ids, schema, seed, whole_word=False):
    """`batchify` + `create_tfrecords` of the original, one replica per core."""
    rng = np.random.default_rng(seed)
    bsz, cores = schema.batch_size, schema.num_cores
    per_core = bsz // cores
    if schema.bi_data:
        steps = len(data) // (bsz // 2)
        fwd = data[:bsz // 2 * steps].reshape(bsz // 2, steps)
        fwd_sent = sent_ids[:bsz // 2 * steps].reshape(bsz // 2, steps)
        fwd = fwd.reshape(cores, 1, per_core // 2, -1)
        fwd_sent = fwd_sent.reshape(cores, 1, per_core // 2, -1)
        data = np.concatenate([fwd, fwd[:, :, :, ::-1]], 1).reshape(bsz, -1)
        sent_ids = np.concatenate([fwd_sent, fwd_sent[:, :, :, ::-1]], 1).reshape(bsz, -1)
    else:
        steps = len(data) // bsz
        data = data[:bsz * steps].reshape(bsz, steps)
        sent_ids = sent_ids[:bsz * steps].reshape(bsz, steps)
    seq_len, reuse_len = schema.seq_len, schema.reuse_len
    sep, cls = np.array([schema.sep_id]), np.array([schema.cls_id])
    records, i = [], 0
    while i + seq_len <= data.shape[1]:
        batch = []
        for idx in range(bsz):
            inp = data[idx, i:i + reuse_len]
            tgt = data[idx, i + 1:i + reuse_len + 1]
            results = port_split_a_and_b(data[idx], sent_ids[idx], i + reuse_len,
                                         seq_len - reuse_len - 3, rng)
            if results is None:
                return records
            a_data, b_data, label, a_target, b_target = results
            reverse = schema.bi_data and (idx // (per_core // 2)) % 2 == 1
            goal_1 = schema.num_predict // 2
            goal_0 = schema.num_predict - goal_1
            mask_0 = port_sample_mask(START[inp], rng, goal_0, schema.mask_alpha,
                                      schema.mask_beta, reverse, whole_word)
            rest = np.concatenate([a_data, sep, b_data, sep, cls])
            mask_1 = port_sample_mask(START[rest], rng, goal_1, schema.mask_alpha,
                                      schema.mask_beta, reverse, whole_word)
            batch.append({
                "input": np.concatenate([inp, rest]),
                "is_masked": np.concatenate([mask_0, mask_1]).astype(int),
                "target": np.concatenate([tgt, a_target, b_target, cls, cls]),
                "seg_id": np.array([0] * (reuse_len + len(a_data)) + [0] + [1] * len(b_data)
                                   + [1] + [2]),
                "label": np.array([label]),
            })
        records += batch
        i += reuse_len
    return records


def port_local_perm(inputs, targets, is_masked, index, sep_id=SEP, cls_id=CLS):
    non_func = ~((inputs == sep_id) | (inputs == cls_id))
    non_mask = ~is_masked & non_func
    masked_or_func = ~non_mask
    rev_index = np.where(non_mask, -1, index)
    target_tokens = masked_or_func & non_func
    self_rev_index = np.where(target_tokens, rev_index, rev_index + 1)
    perm_mask = (self_rev_index[:, None] <= rev_index[None, :]) & masked_or_func
    new_targets = np.concatenate([inputs[:1], targets[:-1]])
    return perm_mask.astype(np.float32), new_targets, target_tokens.astype(np.float32)


def port_parser(record, index_0, index_1, reuse_len, num_predict):
    """The original `get_dataset` parser given the two sampled orders."""
    inputs, target = record["input"], record["target"]
    is_masked = record["is_masked"].astype(bool)
    seq_len = len(inputs)
    pm_0, t_0, tm_0 = port_local_perm(inputs[:reuse_len], target[:reuse_len],
                                      is_masked[:reuse_len], index_0)
    pm_1, t_1, tm_1 = port_local_perm(inputs[reuse_len:], target[reuse_len:],
                                      is_masked[reuse_len:], index_1)
    rest = seq_len - reuse_len
    perm_mask = np.block([[pm_0, np.ones([reuse_len, rest])], [np.zeros([rest, reuse_len]), pm_1]])
    target, target_mask = np.concatenate([t_0, t_1]), np.concatenate([tm_0, tm_1])
    indices = np.flatnonzero(target_mask)
    pad = num_predict - len(indices)
    mapping = np.concatenate([np.eye(seq_len)[indices], np.zeros([pad, seq_len])])
    return {"perm_mask": perm_mask, "target_mapping": mapping,
            "target": np.concatenate([target[indices], np.zeros(pad)]),
            "target_mask": np.concatenate([np.ones(len(indices)), np.zeros(pad)]),
            "input_k": inputs, "input_q": target_mask}


def sampled_orders(seed, record_index, reuse_len, rest_len, perm_size):
    """The reader's draws for one record (its seeds are `(seed, record index)`)."""
    seeds = tf.random.experimental.stateless_split(
        tf.constant([seed, record_index], tf.int64), 2)
    return (permutation_index(reuse_len, perm_size, seeds[0]).numpy(),
            permutation_index(rest_len, perm_size, seeds[1]).numpy())


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "spiece.model"
    path.write_bytes(b"a fake SentencePiece model")
    return str(path)


@pytest.fixture(scope="module")
def documents():
    return make_documents(0, 60)


@pytest.fixture(scope="module")
def written(documents, vocab_file, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("xlnet"))
    manifest = write_xlnet_records(documents, folder, SCHEMA, V, is_start_piece, [vocab_file],
                                   eod_id=EOD, random_seed=7, batches_per_shard=9,
                                   progress=False)
    return folder, manifest


# --- (b) against the numpy ports of the original -----------------------------------------


@pytest.mark.parametrize("whole_word", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_sample_mask_matches_port_of_original(reverse, whole_word):
    rng = np.random.default_rng(1)
    for trial in range(200):
        is_start = rng.random(int(rng.integers(1, 40))) < 0.6
        goal = None if trial % 4 == 0 else int(rng.integers(0, len(is_start) + 1))
        alpha, beta = int(rng.integers(1, 8)), 1
        ours = sample_mask(is_start, np.random.default_rng(trial), goal, alpha, beta, reverse,
                           whole_word)
        theirs = port_sample_mask(is_start, np.random.default_rng(trial), goal, alpha, beta,
                                  reverse, whole_word)
        np.testing.assert_array_equal(ours, theirs, err_msg=f"trial {trial}")
        if goal is not None:
            assert ours.sum() == goal


def test_split_a_and_b_matches_port_of_original():
    for trial in range(600):
        # long streams, and short ones where B often runs into the row's end
        ids, sent = stream_of(make_documents(trial, 30 if trial % 2 else 2))
        rng = np.random.default_rng(trial)
        begin, tot_len = int(rng.integers(0, len(ids))), int(rng.integers(1, 30))
        ours = split_a_and_b(sentence_boundaries(sent), len(ids), begin, tot_len,
                             np.random.default_rng(trial))
        theirs = port_split_a_and_b(ids, sent, begin, tot_len, np.random.default_rng(trial))
        assert (ours is None) == (theirs is None), trial
        if ours is not None:
            a_begin, a_end, b_begin, b_end, label = ours
            a, b, their_label, a_target, b_target = theirs
            np.testing.assert_array_equal(ids[a_begin:a_end], a)
            np.testing.assert_array_equal(ids[b_begin:b_end], b)
            assert label == their_label
            assert len(a) + len(b) == tot_len


def test_split_a_and_b_at_the_rows_end():
    """B drawn from the last sentence stops one short of the row's end (its
    next-token target must exist); the record is kept, as the original."""
    ids, sent = stream_of([[[10, 11, 12, 13, 14], [15, 16]]])  # ... 16 <eod>
    boundaries = sentence_boundaries(sent)
    last_sentence = 0
    for seed in range(60):
        ours = split_a_and_b(boundaries, len(ids), 0, 7, np.random.default_rng(seed))
        theirs = port_split_a_and_b(ids, sent, 0, 7, np.random.default_rng(seed))
        if theirs is None:  # B continuing A would need the target after <eod>
            assert ours is None
            continue
        a, b, label, _, _ = theirs
        assert ours == (0, len(a), ours[2], ours[2] + len(b), label)
        np.testing.assert_array_equal(ids[ours[2]:ours[3]], b)
        last_sentence += ours[2:4] == (5, 7)
    assert last_sentence


@pytest.mark.parametrize("bi_data,cores,batch,whole_word", [
    (False, 1, B, False), (True, 1, 4, False), (True, 2, 4, True)])
def test_records_equal_port_of_original(bi_data, cores, batch, whole_word, documents, vocab_file,
                                        tmp_path):
    schema = XLNetRecordSchema(seq_len=L, reuse_len=R, batch_size=batch, num_predict=P,
                               bi_data=bi_data, num_cores=cores)
    manifest = write_xlnet_records(documents, str(tmp_path), schema, V, is_start_piece,
                                   [vocab_file], eod_id=EOD, random_seed=11,
                                   whole_word_spans=whole_word, progress=False)
    ids, sent = stream_of(documents)
    expected = port_create_tfrecords(ids, sent, schema, 11, whole_word)
    records = read_records(str(tmp_path))
    assert len(expected) == manifest["records"] == len(records["input"]) > 10 * batch
    for name in FEATURE_NAMES:
        np.testing.assert_array_equal(records[name], np.stack([r[name] for r in expected]),
                                      err_msg=name)


def test_reader_matches_port_of_original_parser(written):
    folder, manifest = written
    records = read_records(folder)
    ds = xlnet_features_dataset(folder, B, perm_size=K, num_predict=P + 2, seed=5, repeat=False)
    n = 0
    for t, batch in enumerate(ds.take(6)):
        for k in range(B):
            r = t * B + k
            index_0, index_1 = sampled_orders(5, r, R, L - R, K)
            expected = port_parser({name: records[name][r] for name in records}, index_0,
                                   index_1, R, P + 2)
            for name, value in expected.items():
                np.testing.assert_array_equal(batch[name][k].numpy(), value, err_msg=name)
            n += 1
    assert n == 18


# --- (a) the local permutation's properties ----------------------------------------------


def test_permutation_index_one_order_per_block():
    index = permutation_index(12, 4, tf.constant([3, 9])).numpy()
    order = index[:4]
    assert sorted(order) == [0, 1, 2, 3]
    np.testing.assert_array_equal(index.reshape(3, 4), order + 4 * np.arange(3)[:, None])
    others = {tuple(permutation_index(12, 4, tf.constant([3, s])).numpy()[:4]) for s in range(40)}
    assert len(others) > 10  # the seed matters; 24 orders are possible


def test_local_permutation_mask_properties():
    rng = np.random.default_rng(0)
    for trial in range(20):
        n = 12
        inputs = rng.integers(9, V, n)
        inputs[rng.random(n) < 0.15] = SEP
        inputs[rng.random(n) < 0.1] = CLS
        is_masked = rng.random(n) < 0.4
        index = permutation_index(n, 4, tf.constant([0, trial]))
        perm_mask, _, target_mask, _, input_q = (t.numpy() for t in local_permutation(
            tf.constant(inputs, tf.int64), tf.constant(inputs, tf.int64), tf.constant(is_masked),
            index, SEP, CLS))
        functional = (inputs == SEP) | (inputs == CLS)
        target = is_masked & ~functional
        np.testing.assert_array_equal(target_mask, target)
        np.testing.assert_array_equal(input_q, target)
        assert (np.diag(perm_mask)[target] == 1).all()  # a target may not see itself
        assert (np.diag(perm_mask)[~target] == 0).all()
        plain = ~target & ~functional
        assert (perm_mask[np.ix_(plain, target)] == 1).all()  # plain tokens see no target
        assert (perm_mask[:, plain] == 0).all()  # everyone sees the plain tokens
        rank = index.numpy()
        for i in np.flatnonzero(target):  # targets see the targets ranked before them
            np.testing.assert_array_equal(perm_mask[i, target], rank[target] >= rank[i])


def test_full_permutation_is_a_strict_total_order():
    """perm_size = L, every token a target: `perm_mask` is a factorization order."""
    n = 9
    inputs = np.arange(20, 20 + n)
    index = permutation_index(n, n, tf.constant([4, 2]))
    perm_mask = local_permutation(tf.constant(inputs, tf.int64), tf.constant(inputs, tf.int64),
                                  tf.ones([n], tf.bool), index, SEP, CLS)[0].numpy()
    order = np.argsort(index.numpy())  # positions in the order they are predicted
    assert sorted(order) == list(range(n))
    sees = 1 - perm_mask[np.ix_(order, order)]
    np.testing.assert_array_equal(sees, np.tril(np.ones([n, n]), -1))  # acyclic, total, strict


def test_reader_masks_reuse_block_and_targets(written):
    folder, manifest = written
    for batch in xlnet_features_dataset(folder, B, perm_size=K, seed=1, repeat=False).take(4):
        perm_mask = batch["perm_mask"].numpy()
        assert (perm_mask[:, :R, R:] == 1).all()  # the reuse part never sees the rest
        assert (perm_mask[:, R:, :R] == 0).all()  # the rest sees the whole reuse part
        ids = batch["input_k"].numpy()
        mapping = batch["target_mapping"].numpy()
        weight = batch["target_mask"].numpy()
        # y is the predicted token itself, at the position its one-hot row names
        np.testing.assert_array_equal(np.einsum("bpl,bl->bp", mapping, ids) * weight,
                                      batch["target"].numpy() * weight)
        np.testing.assert_array_equal(mapping.sum(-1), weight)
        positions = mapping.argmax(-1)
        for k in range(B):
            chosen = positions[k][weight[k] > 0]
            assert (np.diff(chosen) > 0).all()
            assert (np.diag(perm_mask[k])[chosen] == 1).all()
            assert ((ids[k][chosen] != SEP) & (ids[k][chosen] != CLS)).all()
            assert np.array_equal(np.flatnonzero(batch["input_q"].numpy()[k]), chosen)


# --- (c) span statistics -----------------------------------------------------------------


def test_span_statistics():
    """Spans only (no goal): n <= 5 with p(n) ∝ 1/n, 1 in 1 + alpha/beta tokens."""
    rng = np.random.default_rng(0)
    mask = sample_mask(np.ones(30_000, bool), rng, None, 6, 1)
    edges = np.diff(np.concatenate([[0], mask.astype(int), [0]]))
    lengths = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    assert abs(mask.mean() - 1 / 7) < 0.002  # every span of n spends 7n tokens
    assert lengths.max() <= 5
    expected = (1 / np.arange(1, 6)) / (1 / np.arange(1, 6)).sum()
    np.testing.assert_allclose(np.bincount(lengths, minlength=6)[1:] / len(lengths), expected,
                               atol=0.03)
    # With word starts: spans begin at one; whole-word spans are whole words.
    is_start = rng.random(30_000) < 0.5
    is_start[0] = True
    for whole_word in (False, True):
        mask = sample_mask(is_start, rng, None, 6, 1, whole_word_spans=whole_word)
        edges = np.diff(np.concatenate([[0], mask.astype(int), [0]]))
        begins, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        assert is_start[begins].all()
        if whole_word:
            assert is_start[ends].all()  # the span ends where a word starts
            words = np.array([is_start[b:e].sum() for b, e in zip(begins, ends)])
            assert words.max() <= 5
        else:
            assert (ends - begins).max() <= 5


def test_records_predict_num_predict_about_one_in_six(documents, vocab_file, tmp_path):
    schema = XLNetRecordSchema(seq_len=36, reuse_len=18, batch_size=2, num_predict=6)
    write_xlnet_records(documents * 3, str(tmp_path), schema, V, is_start_piece, [vocab_file],
                        eod_id=EOD, progress=False)
    masked = read_records(str(tmp_path))["is_masked"]
    assert len(masked) > 100
    np.testing.assert_array_equal(masked.sum(1), 6)  # num_predict = 36 / 6, exactly
    np.testing.assert_array_equal(masked[:, :18].sum(1), 3)  # ceil(6 / 2) in the reuse part


# --- (d) record layout and streams -------------------------------------------------------


def test_record_layout_and_streams(written, documents):
    folder, manifest = written
    records = read_records(folder)
    ids, sent = stream_of(documents)
    steps = len(ids) // B
    rows, row_sent = ids[:B * steps].reshape(B, steps), sent[:B * steps].reshape(B, steps)
    count = len(records["input"])
    assert count == manifest["records"] == manifest["batches"] * B
    continued = 0
    for r in range(count):
        t, k = divmod(r, B)
        x, seg, target = records["input"][r], records["seg_id"][r], records["target"][r]
        assert x[-1] == CLS and x[-2] == SEP
        seps = np.flatnonzero(x == SEP)
        assert len(seps) == 2 and seps[0] >= R + 1  # A holds a token at least
        a_len, b_len = seps[0] - R, L - 3 - seps[0]
        np.testing.assert_array_equal(seg, [0] * (R + a_len + 1) + [1] * (b_len + 1) + [2])
        # reuse part, then A: the row's stream from t * R on
        np.testing.assert_array_equal(x[:R + a_len], rows[k, t * R:(t + 1) * R + a_len])
        np.testing.assert_array_equal(target[:R + a_len], rows[k, t * R + 1:(t + 1) * R + a_len + 1])
        b = x[seps[0] + 1:seps[1]]
        if records["label"][r, 0]:
            continued += 1
            # B: the text from a sentence start after A (A may have been trimmed)
            begin = (t + 1) * R
            starts = [s for s in range(begin + a_len, begin + L - R - 3)
                      if row_sent[k, s] != row_sent[k, s - 1]
                      and np.array_equal(rows[k, s:s + b_len], b)]
            assert starts, r
        else:  # B: from a sentence start somewhere in the row
            starts = [s for s in range(steps - b_len + 1)
                      if (s == 0 or row_sent[k, s] != row_sent[k, s - 1])
                      and np.array_equal(rows[k, s:s + b_len], b)]
            assert starts, r
        if t + 1 < count // B:  # the next record of the row follows on from this one
            following = records["input"][r + B]
            np.testing.assert_array_equal(following[:min(a_len, R)], x[R:R + min(a_len, R)])
    assert 0 < continued == manifest["continuation_records"] < count


def test_bi_data_rows_are_reversed_streams(documents, vocab_file, tmp_path):
    schema = XLNetRecordSchema(seq_len=L, reuse_len=R, batch_size=4, num_predict=P, bi_data=True,
                               num_cores=2)
    write_xlnet_records(documents, str(tmp_path), schema, V, is_start_piece, [vocab_file],
                        eod_id=EOD, progress=False)
    records = read_records(str(tmp_path))["input"]
    ids, _ = stream_of(documents)
    steps = len(ids) // 2
    forward = ids[:2 * steps].reshape(2, steps)
    rows = [forward[0], forward[0][::-1], forward[1], forward[1][::-1]]  # per core: fwd, bwd
    for r in range(len(records)):
        t, k = divmod(r, 4)
        np.testing.assert_array_equal(records[r][:R], rows[k][t * R:(t + 1) * R])


def test_reader_runs_without_autograph(written):
    """Reading XLNet's records (one pass, and passes without end) asks
    AutoGraph to convert none of our functions (`tf_records.plain`)."""
    from helpers import our_autograph_conversions

    folder, _ = written
    with our_autograph_conversions() as converted:
        next(iter(xlnet_pretraining_dataset(folder, B, perm_size=K, repeat=False)))
        next(iter(xlnet_pretraining_dataset(folder, B, perm_size=K, seed=3)))
    assert converted == []


def test_reader_rows_continue_their_streams(written):
    folder, _ = written
    batches = [x for x, _, _ in xlnet_pretraining_dataset(folder, B, perm_size=K, repeat=False)]
    for before, after in zip(batches, batches[1:]):
        ids_0, ids_1 = before["input_word_ids"].numpy(), after["input_word_ids"].numpy()
        for k in range(B):
            a_len = int(np.flatnonzero(ids_0[k] == SEP)[0]) - R
            n = min(a_len, R)
            np.testing.assert_array_equal(ids_1[k, :n], ids_0[k, R:R + n])


# --- reader: shapes, resume, sources ------------------------------------------------------


def test_reader_shapes_resume_and_pattern(written):
    folder, manifest = written
    ds = xlnet_pretraining_dataset(folder, B, perm_size=K, seed=3)
    x, y, weight = next(iter(ds))
    assert {k: (tuple(v.shape), v.dtype) for k, v in x.items()} == {
        "input_word_ids": ((B, L), tf.int32), "input_type_ids": ((B, L), tf.int32),
        "perm_mask": ((B, L, L), tf.float32), "target_mapping": ((B, P, L), tf.float32)}
    assert (tuple(y.shape), y.dtype, tuple(weight.shape), weight.dtype) == (
        (B, P), tf.int32, (B, P), tf.float32)
    per_pass = manifest["batches"]
    full = list(ds.take(per_pass + 3))
    resumed = list(xlnet_pretraining_dataset(folder, B, perm_size=K, seed=3,
                                             start_batch=per_pass + 1).take(2))
    for a, b in zip(full[per_pass + 1:], resumed):
        for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            np.testing.assert_array_equal(u.numpy(), v.numpy())
    # the second pass reads the same records with new orders
    np.testing.assert_array_equal(full[0][0]["input_word_ids"], full[per_pass][0]["input_word_ids"])
    assert not np.array_equal(full[0][0]["perm_mask"], full[per_pass][0]["perm_mask"])
    once = xlnet_pretraining_dataset(folder, B, perm_size=K, seed=3, repeat=False)
    assert once.cardinality().numpy() == per_pass == len(list(once))
    # the original's records have no manifest: a file pattern and a schema
    pattern = xlnet_pretraining_dataset(os.path.join(folder, "shard-*.tfrecord"), B,
                                        perm_size=K, seed=3, schema=SCHEMA, repeat=False)
    for a, b in zip(pattern.take(3), full[:3]):
        for u, v in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            np.testing.assert_array_equal(u.numpy(), v.numpy())


def test_reader_bad_arguments(written, tmp_path):
    folder, _ = written
    cases = [
        (dict(batch_size=4), "batch_size=4"),
        (dict(perm_size=4), "perm_size=4"),
        (dict(perm_size=0), "perm_size=0"),
        (dict(num_predict=P - 1), f"num_predict={P - 1}"),
        (dict(shuffle_buffer=-1), "shuffle_buffer=-1"),
        (dict(schema=XLNetRecordSchema(seq_len=L, reuse_len=R, batch_size=B, num_predict=3)),
         "was written with"),
    ]
    for kwargs, message in cases:
        arguments = dict(batch_size=B, perm_size=K) | kwargs
        with pytest.raises(ValueError, match=message):
            xlnet_pretraining_dataset(folder, **arguments)
    with pytest.raises(ValueError, match="pass `schema`"):
        xlnet_pretraining_dataset(os.path.join(folder, "*.tfrecord"), B)
    with pytest.raises(ValueError, match="no file matches"):
        xlnet_pretraining_dataset(str(tmp_path / "nothing-*.tfrecord"), B, schema=SCHEMA)
    other = tmp_path / "lm"
    other.mkdir()
    (other / "manifest.json").write_text('{"schema": {"kind": "lm"}, "shards": []}')
    with pytest.raises(ValueError, match="holds 'lm' records"):
        xlnet_pretraining_dataset(str(other), B)

    class Pipelines:
        num_input_pipelines, input_pipeline_id = 2, 0

    with pytest.raises(ValueError, match="2 input pipelines"):
        xlnet_pretraining_dataset(folder, B, perm_size=K, input_context=Pipelines())

    class SmallModel:
        vocab_size = 50

    with pytest.raises(ValueError, match="model's vocab_size=50"):
        xlnet_pretraining_dataset(folder, B, perm_size=K, model_config=SmallModel())


# --- (e) writer: determinism, manifest, atomic writes, bad input -------------------------


def test_encoder_matches_tensorflow():
    rng = np.random.default_rng(0)
    features = {name: rng.integers(0, 40_000, (4, 1 if name == "label" else L))
                for name in FEATURE_NAMES}
    for i, record in enumerate(encode_xlnet_examples(features)):
        example = tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(int64_list=tf.train.Int64List(value=values[i]))
            for name, values in features.items()}))
        assert record == example.SerializeToString(deterministic=True), i


def test_writer_deterministic_manifest_and_atomic(written, documents, vocab_file, tmp_path):
    folder, manifest = written
    assert manifest["schema"] == {"kind": "xlnet", "seq_len": L, "reuse_len": R,
                                  "batch_size": B, "num_predict": P, "mask_alpha": 6,
                                  "mask_beta": 1, "bi_data": False, "num_cores": 1,
                                  "sep_id": SEP, "cls_id": CLS}
    ids, _ = stream_of(documents)
    assert (manifest["documents"], manifest["tokens"], manifest["tokens_per_row"]) == (
        len(documents), len(ids), len(ids) // B)
    assert manifest["sentences"] == sum(len(d) for d in documents)
    assert manifest["vocab_files"] == [{"file": "spiece.model", "sha256": file_sha256(vocab_file)}]
    assert (manifest["vocab_size"], manifest["special_ids"]) == (V, {"sep": SEP, "cls": CLS,
                                                                      "eod": EOD})
    assert manifest["writer_config"]["random_seed"] == 7
    assert len(manifest["shards"]) == -(-manifest["batches"] // 9)
    assert [s["records"] for s in manifest["shards"][:-1]] == [9 * B] * (len(manifest["shards"]) - 1)
    for shard in manifest["shards"]:
        assert shard["sha256"] == file_sha256(os.path.join(folder, shard["file"]))
    assert sorted(os.listdir(folder)) == sorted([s["file"] for s in manifest["shards"]]
                                                + ["manifest.json"])  # no temp file left
    # the same seed writes the same bytes; another seed other records
    again = tmp_path / "again"
    again.mkdir()
    (again / ".tmp-shard-00000.tfrecord").write_bytes(b"left by an interrupted run")
    same = write_xlnet_records(documents, str(again), SCHEMA, V, is_start_piece, [vocab_file],
                               eod_id=EOD, random_seed=7, batches_per_shard=9, progress=False)
    assert [s["sha256"] for s in same["shards"]] == [s["sha256"] for s in manifest["shards"]]
    assert not glob.glob(str(again / ".tmp-*"))
    other = write_xlnet_records(documents, str(tmp_path / "other"), SCHEMA, V, is_start_piece,
                                [vocab_file], eod_id=EOD, random_seed=8, batches_per_shard=9,
                                progress=False)
    assert other["shards"][0]["sha256"] != manifest["shards"][0]["sha256"]


def test_interrupted_write_leaves_the_old_records(documents, vocab_file, tmp_path,
                                                      monkeypatch):
    import tf_records.xlnet.writer as xlnet_writer

    out = tmp_path / "records"
    write_xlnet_records(documents, str(out), SCHEMA, V, is_start_piece, [vocab_file],
                        eod_id=EOD, batches_per_shard=5, progress=False)
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    calls = []

    def failing(block):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        yield from encode_xlnet_examples(block)

    monkeypatch.setattr(xlnet_writer, "encode_xlnet_examples", failing)
    with pytest.raises(KeyboardInterrupt):
        write_xlnet_records(documents, str(out), SCHEMA, V, is_start_piece, [vocab_file],
                            eod_id=EOD, batches_per_shard=5, progress=False)
    # The old records stand whole (the rewrite went to a folder beside them).
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before
    assert sorted(os.listdir(tmp_path)) == [".records.lock", "records"]


def test_writer_bad_input(vocab_file, tmp_path):
    def write(documents=None, vocab_size=V, **schema):
        settings = dict(seq_len=L, reuse_len=R, batch_size=B, num_predict=P) | schema
        return write_xlnet_records(make_documents(0, 20) if documents is None else documents,
                                   str(tmp_path), XLNetRecordSchema(**settings), vocab_size,
                                   is_start_piece, [vocab_file], eod_id=EOD, progress=False)

    cases = [
        (dict(seq_len=9), "seq_len=9, reuse_len=6"),
        (dict(num_predict=14), "num_predict=14"),
        (dict(num_predict=0), "num_predict=0"),
        (dict(bi_data=True), "batch_size=3"),
        (dict(mask_alpha=1, mask_beta=2), "mask_alpha=1, mask_beta=2"),
        (dict(sep_id=3), "both 3"),
        (dict(documents=[]), "no tokens"),
        (dict(documents=[[[]], []]), "no tokens"),
        (dict(documents=[[[10, 11, 12]]]), "give 4 tokens"),
        (dict(documents=[[[10, 120]]]), "Token id 120"),
        (dict(documents=[[[10, SEP, CLS]]]), "<sep> id 4"),
        (dict(vocab_size=5), r"eod_id=7"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            write(**kwargs)
    with pytest.raises(ValueError, match="does not exist"):
        write_xlnet_records(make_documents(0, 5), str(tmp_path), SCHEMA, V, is_start_piece,
                            [str(tmp_path / "missing.model")], progress=False)


def test_command_line(tmp_path):
    """`python -m tf_records.create_xlnet_data` with a stand-in for XLNet's
    tokenizer (text of integers -> those ids)."""
    corpus = tmp_path / "corpus.txt"
    lines = []
    for document in make_documents(2, 40):
        lines += [" ".join(map(str, s)) for s in document] + [""]
    corpus.write_text("\n".join(lines))
    model = tmp_path / "spiece.model"
    model.write_bytes(b"fake")
    stand_in = f"""
import sys, types
module = types.ModuleType("keras_bert_impl.xlnet.xlnet_tokenizer")
class XLNetTokenizer:
    sep_id, cls_id, eod_id, vocab_size = {SEP}, {CLS}, {EOD}, {V}
    def __init__(self, model_file, do_lower_case=False):
        assert open(model_file, "rb").read() == b"fake"
    def encode(self, text):
        return [int(w) for w in text.split()]
    def is_start_piece(self, i):
        return i < 9 or i % 3 != 0
module.XLNetTokenizer = XLNetTokenizer
sys.modules[module.__name__] = module
from absl import app
from tf_records import create_xlnet_data
create_xlnet_data.define_flags()
app.run(create_xlnet_data.main)
"""
    out = tmp_path / "records"
    result = run_python(
        ["-c", stand_in, f"--input_file={corpus}", f"--spm_model_file={model}",
         f"--output_dir={out}", "--batch_size=3", f"--seq_len={L}", f"--reuse_len={R}",
         f"--num_predict={P}", "--batches_per_shard=4"],
        ROOT, dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT), timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    manifest = read_manifest(str(out))
    assert "Wrote" in result.stdout and manifest["documents"] == 40
    ids, sent = stream_of(make_documents(2, 40))
    expected = port_create_tfrecords(ids, sent, SCHEMA, 12345)
    np.testing.assert_array_equal(read_records(str(out))["input"],
                                  np.stack([r["input"] for r in expected]))
