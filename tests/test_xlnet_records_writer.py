"""XLNet's pretraining records as `tf_records.xlnet.writer` writes them:
equal to the numpy port of the original `create_tfrecords`, the span
statistics, the record layout and streams, determinism, the manifest,
atomic writes, refusals and the command line."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from forked_python import run_python
from xlnet_data_utils_port import port_create_tfrecords
from xlnet_data_utils_port import port_sample_mask
from xlnet_data_utils_port import port_split_a_and_b
from xlnet_records_cases import CLS
from xlnet_records_cases import EOD
from xlnet_records_cases import ROOT
from xlnet_records_cases import SCHEMA
from xlnet_records_cases import SEP
from xlnet_records_cases import B
from xlnet_records_cases import L
from xlnet_records_cases import P
from xlnet_records_cases import R
from xlnet_records_cases import V
from xlnet_records_cases import fake_spm_file  # noqa: F401 (the `vocab_file` fixture)
from xlnet_records_cases import is_start_piece
from xlnet_records_cases import make_documents
from xlnet_records_cases import read_records
from xlnet_records_cases import sixty_documents  # noqa: F401 (the `documents` fixture)
from xlnet_records_cases import stream_of
from xlnet_records_cases import written_records  # noqa: F401 (the `written` fixture)

from tf_records.manifest import file_sha256
from tf_records.manifest import read_manifest
from tf_records.xlnet.instances import sample_mask
from tf_records.xlnet.instances import sentence_boundaries
from tf_records.xlnet.instances import split_a_and_b
from tf_records.xlnet.schema import FEATURE_NAMES
from tf_records.xlnet.schema import XLNetRecordSchema
from tf_records.xlnet.schema import encode_xlnet_examples
from tf_records.xlnet.writer import write_xlnet_records


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
