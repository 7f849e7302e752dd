"""Language-model TFRecords -> a `tf.data` pipeline a causal LM's `fit` takes.

The same machinery as BERT's reader (`bert/reader.py`): the manifest is read and
checked, shard framing and counts always, sha256 on request; files are
split between input pipelines; the stream is a pure function of the seed
(`record_passes.py`), so a run resumed at a batch sees what the
uninterrupted run would have.
"""

import tensorflow as tf

from keras_bert_impl.base.sequence_checks import check_fits_positions
from tf_records.gpt.schema import LmRecordSchema
from tf_records.gpt.schema import to_model_inputs
from tf_records.manifest import check_kind
from tf_records.manifest import check_shard_framing
from tf_records.manifest import check_vocab_fits
from tf_records.manifest import pipeline_share
from tf_records.manifest import read_manifest
from tf_records.manifest import shard_paths
from tf_records.manifest import verify_shards
from tf_records.plain import plain
from tf_records.record_passes import pass_numbers
from tf_records.record_passes import shuffled_pass

# B=batch, S=max_seq_length


def lm_dataset(source, batch_size, seq_length=None, shuffle_buffer=10_000, seed=0,
               input_context=None, start_batch=0, repeat=True, model_config=None,
               verify_checksums=False):
    """Batches of `(x, y, sample_weight)` for next-token prediction.

    `x = {"input_word_ids", "input_mask"}` `(B, S)` int32 (a window without
    its last token), `y = {"lm": (B, S) int32}` (without its first: the
    target at t is token t + 1), `sample_weight = {"lm": (B, S) float32}`
    (1 where that target is a real token).

    The stream is a pure function of `seed` (and of TensorFlow's global
    seed, if one is set, as `tf.data` mixes it in): pass `p` over this pipeline's
    files reads them in an order shuffled by `(seed, p)` and shuffles
    records with a seed from `(seed, p)`; batches run on across passes. So
    `start_batch=k` gives exactly the stream from batch `k` on (what resuming
    at a step needs), reading and dropping at most one pass's records.

    Args:
        source: str. A folder or its `manifest.json` from `gpt.writer`.
        batch_size: int. Per input pipeline (per worker under a strategy).
        seq_length: optional int. The S the caller expects; an error if the
            records were written with another.
        shuffle_buffer: int. Examples in the shuffle buffer (0: no shuffle,
            files in order).
        seed: int. File order and shuffle seed (deterministic).
        input_context: `tf.distribute.InputContext`; files are split
            between pipelines, each file read by exactly one.
        start_batch: int. Batches of this pipeline to skip (resume).
        repeat: bool. Repeat forever (training) or one pass.
        model_config: optional config with `n_positions` (`GptConfig`) or
            `max_position_embeddings`, and `vocab_size`, to check the data
            against.
        verify_checksums: bool. Check every shard's sha256 first (record
            framing and counts are always checked).

    Example:

        ds = lm_dataset("data/", batch_size=64, model_config=gpt_preset("gpt"))
        x, y, sample_weight = next(iter(ds))  # x["input_word_ids"]: (64, 512)
    """
    manifest, schema, files, counts = _source(source, seq_length, model_config, verify_checksums)
    if input_context is not None:
        files, counts = pipeline_share(files, counts, input_context)
    records_per_pass = sum(counts)
    if repeat and records_per_pass < batch_size:
        raise ValueError(f"{manifest['folder']}: {records_per_pass} records, fewer than one "
                         f"batch of {batch_size}.")
    first_pass, skip_records = divmod(start_batch * batch_size, records_per_pass) if repeat else (
        0, start_batch * batch_size)
    spec = schema.feature_spec()
    files = tf.constant(files)
    ds = pass_numbers(repeat, first_pass).flat_map(
        plain(lambda p: shuffled_pass(files, shuffle_buffer, seed, p))).skip(skip_records)
    ds = ds.batch(batch_size, drop_remainder=True)  # TPUs and XLA need a static batch size
    if not repeat:  # known length: Keras shows progress and does not warn at the end
        ds = ds.apply(tf.data.experimental.assert_cardinality(
            max(0, records_per_pass - skip_records) // batch_size))
    ds = ds.map(plain(lambda records: to_model_inputs(tf.io.parse_example(records, spec))),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def _source(source, seq_length, model_config, verify_checksums):
    """-> (manifest, schema, shard paths, their record counts), checked."""
    manifest = read_manifest(source)
    check_kind(manifest, LmRecordSchema.kind)
    schema = LmRecordSchema.from_manifest(manifest["schema"])
    _check_lengths(manifest, schema, seq_length, model_config)
    check_shard_framing(manifest)
    if verify_checksums:
        verify_shards(manifest)
    files, counts = shard_paths(manifest), [s["records"] for s in manifest["shards"]]
    if not files:
        raise ValueError(f"No TFRecord files in {manifest['folder']}.")
    return manifest, schema, files, counts


def _check_lengths(manifest, schema, seq_length, model_config):
    """Raises `ValueError` naming the first value data, caller and model disagree on."""
    folder, s = manifest["folder"], schema.max_seq_length
    if seq_length is not None and seq_length != s:
        raise ValueError(
            f"{folder} holds windows of max_seq_length={s}, but seq_length={seq_length} was "
            "asked for. Write the data again with that --max_seq_length, or ask for "
            f"seq_length={s}.")
    if model_config is None:
        return
    check_fits_positions(s, model_config, f"{folder} holds windows of max_seq_length")
    check_vocab_fits(folder, manifest["vocab_size"], model_config)
