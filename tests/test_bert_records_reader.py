"""BERT's pretraining records reader (`tf_records.bert.reader`) feeding
`fit`: length grouping, shards per input pipeline, the original's record
format, corrupt shards, dynamic masking, fine-tuning's grouped batches, and
no AutoGraph conversion of our functions."""

import os

import numpy as np
import pytest
import tensorflow as tf
from bert_records_cases import CLS
from bert_records_cases import MASK
from bert_records_cases import PAD
from bert_records_cases import SEP
from bert_records_cases import VOCAB
from bert_records_cases import corpus_file  # noqa: F401 (the `corpus` fixture)
from bert_records_cases import read_records
from bert_records_cases import written_records  # noqa: F401 (the `written` fixture)

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertConfig
from keras_bert_impl import BertPretrainer
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.reader import pretraining_dataset
from tf_records.bert.schema import RecordSchema
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from tf_records.manifest import read_manifest
from tf_records.manifest import verify_shards


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


def test_dynamic_masking_in_pipeline(corpus, tmp_path):
    folder = str(tmp_path / "unmasked")
    # One shard, so the pipeline's order is the file's order.
    write_pretraining_data([corpus], VOCAB, folder, InstanceConfig(unmasked=True),
                           WriterConfig(dupe_factor=1, documents_per_block=1000), progress=False)
    raw = read_records(folder)
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
