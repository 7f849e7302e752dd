"""BERT's pretraining records writer (`tf_records.bert.writer`): its worker
pool and TensorFlow-free workers, the TFRecord file and example bytes it
writes, refusals, the command line, and a killed writer's leftovers."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from bert_records_cases import ROOT
from bert_records_cases import VOCAB
from bert_records_cases import corpus_file  # noqa: F401 (the `corpus` fixture)
from bert_records_cases import docstring_corpus
from forked_python import run_python

from tf_records.bert.instances import InstanceConfig
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from tf_records.manifest import read_manifest
from tf_records.manifest import verify_shards


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
    corpus = docstring_corpus(tmp_path / "big.txt", documents=3000, seed=1)
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
