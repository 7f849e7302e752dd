"""XLNet TFRecords -> the `tf.data` pipeline the permutation LM's `fit` takes.

The records are B interleaved streams in reading order (`xlnet.schema`):
this reader batches B records in file order, so row k of batch t + 1
continues row k of batch t, which is what makes the Transformer-XL memory
carried from batch to batch meaningful. Each record gets its local
permutation when read (`xlnet.permutation`), a new one every pass, from a
stateless seed `(seed, record index)`: `start_batch=k` gives exactly the
stream from batch k on. Several input pipelines (one per worker) each
keep their own streams, B / N rows of every batch. The same manifest
checks as the other readers
(framing and counts always, sha256 on request). Records written by the
original `data_utils.py` are read from a file pattern with an explicit
schema.
"""

import glob
import os

import numpy as np
import tensorflow as tf

from tf_records.manifest import MANIFEST_FILE
from tf_records.manifest import check_kind
from tf_records.manifest import check_shard_framing
from tf_records.manifest import check_vocab_fits
from tf_records.manifest import count_records
from tf_records.manifest import read_manifest
from tf_records.manifest import shard_paths
from tf_records.manifest import verify_shards
from tf_records.plain import plain
from tf_records.xlnet.permutation import permute_record
from tf_records.xlnet.schema import XLNetRecordSchema
from tf_records.xlnet.schema import to_model_inputs

# B=batch (streams), L=seq_len, R=reuse_len, P=num_predict, K=perm_size


def xlnet_features_dataset(source, batch_size, perm_size=None, num_predict=None, seed=0,
                           schema=None, shuffle_buffer=0, start_batch=0, repeat=True,
                           model_config=None, input_context=None, verify_checksums=False):
    """Batches of the original parser's features, each record permuted.

    Yields dicts of `perm_mask` float32 `(B, L, L)`, `target_mapping`
    float32 `(B, P, L)`, `target` int32 `(B, P)`, `target_mask` float32
    `(B, P)`, `input_k` int32 `(B, L)`, `input_q` float32 `(B, L)`,
    `seg_id` int32 `(B, L)` and `label` int32 `(B, 1)`
    (`xlnet.permutation.permute_record`). Arguments as
    `xlnet_pretraining_dataset`.
    """
    schema, files, counts = _source(source, schema)
    folder = os.path.dirname(files[0])
    perm_size = schema.reuse_len if perm_size is None else perm_size
    num_predict = schema.num_predict if num_predict is None else num_predict
    _check_arguments(schema, folder, batch_size, perm_size, num_predict, shuffle_buffer,
                     input_context)
    if model_config is not None and counts.get("vocab_size") is not None:
        check_vocab_fits(folder, counts["vocab_size"], model_config)
    if verify_checksums:
        if counts.get("manifest") is None:
            raise ValueError("`verify_checksums` needs a manifest; a file pattern has none.")
        verify_shards(counts["manifest"])
    records_per_pass = counts["records"]
    if records_per_pass < batch_size:
        raise ValueError(f"{folder}: {records_per_pass} records, fewer than one batch of "
                         f"{batch_size}.")
    first_record = start_batch * batch_size
    pipelines, pipeline = 1, 0
    if input_context is not None:
        pipelines, pipeline = input_context.num_input_pipelines, input_context.input_pipeline_id
    rows = batch_size // pipelines  # this pipeline's streams: rows [pipeline * rows, + rows)
    spec = schema.feature_spec()
    ds = _indexed_records(files, records_per_pass, first_record, shuffle_buffer, seed, repeat)
    if pipelines > 1:
        if not repeat:  # whole batches only: every pipeline gets as many
            ds = ds.take((records_per_pass - first_record) // batch_size * batch_size)
        # Every pipeline reads every record and keeps its own streams' rows
        # (cheap: only the kept ones are parsed and permuted). Filtered
        # after `enumerate`, a record keeps its place, so its permutation.
        ds = ds.filter(plain(lambda index, record: (index % batch_size) // rows == pipeline))

    def parse(index, record):
        features = tf.io.parse_single_example(record, spec)
        return permute_record(features, schema.reuse_len, perm_size, num_predict, schema.sep_id,
                              schema.cls_id, tf.stack([tf.cast(seed, tf.int64), index]))

    ds = ds.map(plain(parse), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    ds = ds.batch(rows, drop_remainder=True)  # memory needs a fixed batch (row k: stream k)
    if not repeat:  # known length: Keras shows progress and does not warn at the end
        ds = ds.apply(tf.data.experimental.assert_cardinality(
            max(0, records_per_pass - first_record) // batch_size))
    return ds


def xlnet_pretraining_dataset(source, batch_size, perm_size=None, num_predict=None, seed=0,
                              schema=None, shuffle_buffer=0, start_batch=0, repeat=True,
                              model_config=None, input_context=None, verify_checksums=False):
    """Batches of `(x, y, sample_weight)` for the permutation LM, rows continuing their streams.

    `x = {"input_word_ids", "input_type_ids"}` int32 `(B, L)`, `"perm_mask"`
    float32 `(B, L, L)` (1: row i may not attend to j) and `"target_mapping"`
    float32 `(B, P, L)`; `y` int32 `(B, P)` the predicted tokens;
    `sample_weight` float32 `(B, P)`, 0 on padding rows of `target_mapping`
    (`xlnet.schema.to_model_inputs`).

    Args:
        source: str. A folder or its `manifest.json` from `xlnet.writer`, or
            a file pattern of TFRecords (e.g. written by the original
            `data_utils.py`; then `schema` gives the lengths and ids).
        batch_size: int. Must equal the streams the records were written
            with (the schema's `batch_size`).
        perm_size: int or None. Permutation block (K); divides R and L - R.
            None: R (XLNet-Large: 256 = R).
        num_predict: int or None. Rows of `target_mapping` (P), at least the
            records' `num_predict`; None: the records'.
        seed: int. Seed of the permutations (deterministic).
        schema: `XLNetRecordSchema`, for a file pattern (a manifest has one).
        shuffle_buffer: int. 0 (default): records in stream order, what
            memory needs; > 0 shuffles records (train without memory only).
        start_batch: int. Batches to skip (resume).
        repeat: bool. Repeat forever (training) or one pass.
        model_config: optional config with `vocab_size` to check the data
            against.
        input_context: optional `tf.distribute.InputContext`. With N input
            pipelines (one per worker), pipeline i reads every record but
            keeps streams i * B / N .. (i + 1) * B / N - 1 (batches of
            B / N rows), each record permuted as in one pipeline: the N
            pipelines' batches side by side are the one pipeline's.
        verify_checksums: bool. Check every shard's sha256 first (record
            framing and counts are always checked).

    Example:

        ds = xlnet_pretraining_dataset("data/", batch_size=32, perm_size=64)
        x, y, sample_weight = next(iter(ds))  # x["perm_mask"]: (32, 128, 128)
    """
    ds = xlnet_features_dataset(
        source, batch_size, perm_size=perm_size, num_predict=num_predict, seed=seed,
        schema=schema, shuffle_buffer=shuffle_buffer, start_batch=start_batch, repeat=repeat,
        model_config=model_config, input_context=input_context,
        verify_checksums=verify_checksums)
    ds = ds.map(plain(to_model_inputs), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def _indexed_records(files, records_per_pass, first_record, shuffle_buffer, seed, repeat):
    """`(index, record)` from record `first_record` of the stream on, the
    index its place in the stream (its permutation's seed); the files in
    the writer's order, every pass (records shuffled with a buffer)."""
    file_names = tf.constant(files)

    def one_pass(p):
        ds = tf.data.TFRecordDataset(file_names)  # in order: the writer's
        if shuffle_buffer:
            ds = ds.shuffle(shuffle_buffer, seed=seed * 1_000_003 + p)
        return ds

    if repeat:
        first_pass, skip = divmod(first_record, records_per_pass)
        ds = tf.data.Dataset.range(first_pass, 2**62).flat_map(plain(one_pass)).skip(skip)
    else:
        ds = one_pass(0).skip(first_record)
    return ds.enumerate(start=first_record)


def _source(source, schema):
    """-> (schema, shard paths in order, facts: records, vocab_size, manifest)."""
    if os.path.isdir(source) or source.endswith(".json"):
        manifest = read_manifest(source)
        check_kind(manifest, XLNetRecordSchema.kind)
        written = XLNetRecordSchema.from_manifest(manifest["schema"])
        if schema is not None and schema != written:
            raise ValueError(f"{manifest['folder']} was written with {written}, but {schema} was "
                             "asked for. Leave `schema` out to use the manifest's.")
        check_shard_framing(manifest)
        files = shard_paths(manifest)
        if not files:
            raise ValueError(f"No TFRecord files in {manifest['folder']}.")
        records = sum(s["records"] for s in manifest["shards"])
        return written, files, {"records": records, "vocab_size": manifest["vocab_size"],
                                "manifest": manifest}
    files = sorted(glob.glob(source))
    if not files:
        raise ValueError(f"No {MANIFEST_FILE} folder and no file matches {source!r}.")
    if schema is None:
        raise ValueError(f"{source!r} is a file pattern without a manifest: pass `schema` "
                         "(an XLNetRecordSchema with the records' seq_len, reuse_len, ...).")
    return schema, files, {"records": sum(count_records(f) for f in files)}


def _check_arguments(schema, folder, batch_size, perm_size, num_predict, shuffle_buffer,
                     input_context):
    if batch_size != schema.batch_size:
        raise ValueError(
            f"{folder} holds {schema.batch_size} interleaved streams; batch_size={batch_size} "
            "would cut them (row k of a batch must continue row k of the one before). Read "
            f"with batch_size={schema.batch_size}, or write the data again with "
            f"--batch_size={batch_size}.")
    reuse, rest = schema.reuse_len, schema.seq_len - schema.reuse_len
    if isinstance(perm_size, bool) or not isinstance(perm_size, int) or perm_size < 1 or (
            reuse % perm_size or rest % perm_size):
        raise ValueError(
            f"`perm_size` must be a positive divisor of reuse_len={reuse} and of "
            f"seq_len - reuse_len={rest} (the reuse part and the rest are permuted in blocks of "
            f"perm_size). Received: perm_size={perm_size!r}.")
    if isinstance(num_predict, bool) or not isinstance(num_predict, int) or (
            num_predict < schema.num_predict):
        raise ValueError(
            f"`num_predict` must be at least the records' num_predict={schema.num_predict} "
            f"(rows of target_mapping). Received: num_predict={num_predict!r}.")
    if isinstance(shuffle_buffer, bool) or not isinstance(shuffle_buffer, int) or (
            shuffle_buffer < 0):
        raise ValueError(f"`shuffle_buffer` must be an integer >= 0. Received: "
                         f"shuffle_buffer={shuffle_buffer!r}.")
    if input_context is not None and batch_size % input_context.num_input_pipelines:
        raise ValueError(
            f"{folder} holds {batch_size} interleaved streams, which do not split between "
            f"{input_context.num_input_pipelines} input pipelines (each keeps B / N whole "
            "streams, row k of a batch continuing row k of the one before).")


def target_counts(source, vocab_size, schema=None):
    """How often each id is a predicted (non-functional) token of the records:
    the unigram model's counts. Read from the records' `input` and
    `is_masked` (the targets the reader's permutation keeps), one pass."""
    if os.path.isdir(source) or source.endswith(".json"):
        manifest = read_manifest(source)
        schema = XLNetRecordSchema.from_manifest(manifest["schema"])
        files = [os.path.join(manifest["folder"], s["file"]) for s in manifest["shards"]]
    else:
        files = sorted(tf.io.gfile.glob(source))
    spec = {k: v for k, v in schema.feature_spec().items() if k in ("input", "is_masked")}
    counts = np.zeros(vocab_size, np.int64)
    for batch in tf.data.TFRecordDataset(files).batch(1024).map(
            plain(lambda r: tf.io.parse_example(r, spec))):
        ids, masked = batch["input"].numpy(), batch["is_masked"].numpy() > 0
        masked &= (ids != schema.sep_id) & (ids != schema.cls_id)  # functional: never targets
        np.add.at(counts, ids[masked], 1)
    return counts
