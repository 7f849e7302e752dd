"""XLNet's pretraining records read by `tf_records.xlnet.reader`: equal to
the numpy port of the original parser, the reuse block and targets masked,
rows continuing their streams, shapes, resuming, file patterns, refusals."""

import os

import numpy as np
import pytest
import tensorflow as tf
from xlnet_data_utils_port import port_parser
from xlnet_records_cases import CLS
from xlnet_records_cases import SCHEMA
from xlnet_records_cases import SEP
from xlnet_records_cases import B
from xlnet_records_cases import K
from xlnet_records_cases import L
from xlnet_records_cases import P
from xlnet_records_cases import R
from xlnet_records_cases import fake_spm_file  # noqa: F401 (the `vocab_file` fixture)
from xlnet_records_cases import read_records
from xlnet_records_cases import sampled_orders
from xlnet_records_cases import sixty_documents  # noqa: F401 (the `documents` fixture)
from xlnet_records_cases import written_records  # noqa: F401 (the `written` fixture)

from tf_records.xlnet.reader import xlnet_features_dataset
from tf_records.xlnet.reader import xlnet_pretraining_dataset
from tf_records.xlnet.schema import XLNetRecordSchema


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
