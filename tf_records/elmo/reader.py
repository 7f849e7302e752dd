"""ELMo TFRecords -> the `tf.data` pipeline `ElmoLanguageModel.fit` takes.

The records are bilm-tf's batches, one window of one row each, in reading
order (`elmo.schema`); this reader batches them in file order, never
shuffling (a shuffle would cut the streams the LSTM states follow). The
same manifest checks as the other readers (framing and counts always,
sha256 on request). Passes repeat the same order; `start_batch=k` gives
exactly the stream from batch k on, so a resumed run continues where the
checkpoint (which holds the LSTM states too) stopped.
"""

import numpy as np
import tensorflow as tf

from tf_records.elmo.schema import SUFFIX
from tf_records.elmo.schema import ElmoRecordSchema
from tf_records.elmo.schema import to_model_inputs
from tf_records.manifest import check_kind
from tf_records.manifest import check_shard_framing
from tf_records.manifest import read_manifest
from tf_records.manifest import shard_paths
from tf_records.manifest import verify_shards
from tf_records.plain import plain

# B=batch (streams), T=unroll_steps, C=max_characters_per_token


def elmo_dataset(source, batch_size, max_characters_per_token=50, start_batch=0, repeat=True,
                 model_config=None, input_context=None, verify_checksums=False):
    """Batches of `(x, y, sample_weight)` for the biLM, rows continuing their streams.

    `x = {"char_ids", "char_ids_reverse"}` int32 `(B, T, C)`, `y =
    {"forward", "backward"}` int32 `(B, T)` target ids, `sample_weight`
    float32 `(B, T)` per direction (see `elmo.schema.to_model_inputs`).

    Args:
        source: str. A folder or its `manifest.json` from `elmo.writer`.
        batch_size: int. Must equal the streams the records were written
            with (the manifest's `batch_size`).
        max_characters_per_token: int. C (the model's).
        start_batch: int. Batches to skip (resume).
        repeat: bool. Repeat forever (training) or one pass.
        model_config: optional `ElmoConfig` to check the data against
            (its `n_tokens_vocab` and `max_characters_per_token`).
        input_context: must be None or a single pipeline: the streams
            cannot be split between replicas (see `ElmoLanguageModel`).
        verify_checksums: bool. Check every shard's sha256 first.

    Example:

        ds = elmo_dataset("data/", batch_size=128)
        x, y, sample_weight = next(iter(ds))  # x["char_ids"]: (128, 20, 50)
    """
    manifest = read_manifest(source)
    check_kind(manifest, ElmoRecordSchema.kind)
    schema = ElmoRecordSchema.from_manifest(manifest["schema"])
    folder = manifest["folder"]
    _check_reading(manifest, schema, batch_size, model_config, input_context)
    if model_config is not None:
        max_characters_per_token = model_config.max_characters_per_token
    check_shard_framing(manifest)
    if verify_checksums:
        verify_shards(manifest)
    files = shard_paths(manifest)
    records_per_pass = sum(s["records"] for s in manifest["shards"])
    if not records_per_pass:
        raise ValueError(f"{folder} holds no records.")
    spec = schema.feature_spec()
    ds = tf.data.TFRecordDataset(files)  # in manifest order: the writer's
    if repeat:
        ds = ds.repeat().skip(start_batch * batch_size % records_per_pass)
    else:
        ds = ds.skip(start_batch * batch_size)
    ds = ds.batch(batch_size, drop_remainder=True)  # whole batches only: the writer pads
    if not repeat:  # known length: Keras shows progress and does not warn at the end
        ds = ds.apply(tf.data.experimental.assert_cardinality(
            max(0, records_per_pass - start_batch * batch_size) // batch_size))
    ds = ds.map(plain(lambda records: to_model_inputs(tf.io.parse_example(records, spec),
                                                      max_characters_per_token)),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def _check_reading(manifest, schema, batch_size, model_config, input_context):
    """`ValueError` unless the batches keep the records' streams whole (one
    pipeline, a batch of all the streams) and the model knows their ids."""
    folder = manifest["folder"]
    if batch_size != schema.batch_size:
        raise ValueError(
            f"{folder} holds {schema.batch_size} interleaved streams; batch_size={batch_size} "
            "would cut them (row k of a batch must continue row k of the one before). Read "
            f"with batch_size={schema.batch_size}, or write the data again with "
            f"--global_batch_size={batch_size}.")
    if input_context is not None and input_context.num_input_pipelines > 1:
        raise ValueError(
            f"ELMo's streams cannot be split between {input_context.num_input_pipelines} input "
            "pipelines: train on one replica.")
    if model_config is not None:
        vocab_size = model_config.n_tokens_vocab
        if vocab_size is not None and manifest["vocab_size"] > vocab_size:
            raise ValueError(
                f"{folder} was written with a vocabulary of {manifest['vocab_size']} tokens, "
                f"more than the model's n_tokens_vocab={vocab_size}.")


def target_counts(source, vocab_size=None):
    """How often each id is a target in the records, both directions summed
    `(V,)` int64: the unigram baseline's frequencies. Reads only the ids."""
    manifest = read_manifest(source)
    check_kind(manifest, ElmoRecordSchema.kind)
    schema = ElmoRecordSchema.from_manifest(manifest["schema"])
    spec = {key: value for key, value in schema.feature_spec().items()
            if key.startswith("next_token_id") or key == "target_mask"}
    files = shard_paths(manifest)
    counts = np.zeros(vocab_size or manifest["vocab_size"], np.int64)
    for features in tf.data.TFRecordDataset(files).batch(4096).map(
            plain(lambda records: tf.io.parse_example(records, spec))):
        real = features["target_mask"].numpy() > 0
        for suffix in SUFFIX.values():
            np.add.at(counts, features[f"next_token_id{suffix}"].numpy()[real], 1)
    return counts
