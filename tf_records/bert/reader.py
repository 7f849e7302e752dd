"""BERT's pretraining TFRecords -> a `tf.data` pipeline that `BertPretrainer.fit` takes."""

import os

import tensorflow as tf

from keras_bert_impl.base.sequence_checks import check_fits_positions
from tf_records.bert.dynamic_masking import mask_batch
from tf_records.bert.schema import RecordSchema
from tf_records.bert.schema import to_model_inputs
from tf_records.length_grouping import group_by_length
from tf_records.manifest import check_kind
from tf_records.manifest import check_shard_framing
from tf_records.manifest import count_records
from tf_records.manifest import pipeline_share
from tf_records.manifest import read_manifest
from tf_records.manifest import shard_paths
from tf_records.manifest import verify_shards
from tf_records.plain import plain
from tf_records.record_passes import pass_numbers
from tf_records.record_passes import shuffled_pass


def check_schema(manifest, model_config=None, schema=None):
    """Raises `ValueError` naming the first value the data and model disagree on."""
    data = manifest["schema"]
    if schema is not None:
        for key, value in (("max_seq_length", schema.max_seq_length),
                           ("max_predictions_per_seq", schema.max_predictions_per_seq)):
            if data[key] != value:
                raise ValueError(f"The data has {key}={data[key]}, but {value} was asked for.")
    if model_config is not None:
        check_fits_positions(data["max_seq_length"], model_config, "The data's max_seq_length")


def pretraining_dataset(source, batch_size, schema=None, input_context=None, shuffle_buffer=10_000,
                        seed=0, repeat=True, verify_checksums=False, model_config=None,
                        dynamic_masking=None, start_batch=0, length_grouping=0):
    """Batches of `(x, y, sample_weight)` for `BertPretrainer.fit`.

    The stream is a pure function of `seed`: pass `p` over this pipeline's
    files reads them in an order shuffled by `(seed, p)` and shuffles
    records with a seed from `(seed, p)`; batches run on across passes. So
    `start_batch=k` gives exactly the stream from batch `k` on (what resuming
    at a step needs), reading and dropping at most one pass's records.

    Args:
        source: a folder or `manifest.json` from our writer, or a file
            pattern of TFRecords (e.g. made by the original script; then
            `schema` gives the lengths).
        batch_size: int. Per input pipeline (per worker under a strategy).
        schema: `RecordSchema`; read from the manifest when there is one.
        input_context: `tf.distribute.InputContext`; files are split
            between pipelines, each file read by exactly one.
        shuffle_buffer: int. Examples in the shuffle buffer (0: no shuffle,
            files in order).
        seed: int. File order and shuffle seed (deterministic).
        repeat: bool. Repeat forever (training) or one pass.
        verify_checksums: bool. Check every shard's sha256 first (record
            framing and counts are always checked).
        model_config: optional `BertConfig` to check the data against.
        dynamic_masking: bool. Mask in the pipeline, anew for every batch
            (so every epoch); by default on exactly when the manifest says
            the records are unmasked. Needs a manifest.
        start_batch: int. Batches of this pipeline to skip (resume).
        length_grouping: int. With `repeat`, read this many batches at a
            time, sort their records by length, deal them out as batches
            of similar length in a shuffled order and cut each batch to its
            longest row (`length_grouping.group_by_length`): far fewer
            padding tokens, the same records and masks. Sequence length
            then varies from batch to batch (at most S / 16 shapes), so
            leave it 0 where XLA needs static shapes (TPUs). 0 or 1: off,
            every batch `S` long.
    """
    manifest, schema, files, counts, dynamic_masking = _source(
        source, schema, model_config, verify_checksums, dynamic_masking)
    files, counts = _pipeline_files(files, counts, input_context)
    if repeat and sum(counts) < batch_size:
        raise ValueError(f"{source}: {sum(counts)} records, fewer than one batch of {batch_size}.")
    group = max(1, length_grouping) if repeat else 1  # batches sorted by length together
    start_group, skip_batches = divmod(start_batch, group)
    ds = _record_batches(files, sum(counts), batch_size, group, start_batch, shuffle_buffer,
                         seed, repeat)
    if dynamic_masking:
        ds = ds.enumerate(start=start_group if group > 1 else start_batch)
    parse = _parser(schema, manifest if dynamic_masking else None, seed)
    ds = ds.map(plain(parse), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if group > 1:
        ds = ds.enumerate(start=start_group).flat_map(plain(lambda index, batch: group_by_length(
            batch, batch_size, tf.stack([tf.cast(seed, tf.int64), index]))))
        ds = ds.skip(skip_batches)
    return ds.prefetch(tf.data.AUTOTUNE)


def _pipeline_files(files, counts, input_context):
    """This input pipeline's share of the files and their record counts
    (counted from the files when the counts are not known)."""
    if input_context is not None:
        files, counts = pipeline_share(files, counts, input_context)
    if counts is None:
        counts = [count_records(f) for f in files]
    return files, counts


def _record_batches(files, records_per_pass, batch_size, group, start_batch, shuffle_buffer,
                    seed, repeat):
    """`(records, pass numbers)` in batches of `batch_size * group` (a static
    size, for TPUs and XLA), from the group holding batch `start_batch` on."""
    start_group = start_batch // group
    first_pass, skip_records = divmod(start_group * group * batch_size, records_per_pass) if (
        repeat) else (0, start_batch * batch_size)
    files = tf.constant(files)
    # Each record carries its pass number (for the mask seed of dynamic masking).
    ds = pass_numbers(repeat, first_pass).flat_map(plain(lambda p: shuffled_pass(
        files, shuffle_buffer, seed, p).map(plain(lambda record: (record, p)))))
    ds = ds.skip(skip_records).batch(batch_size * group, drop_remainder=True)
    if not repeat:  # known length: Keras shows progress and does not warn at the end
        ds = ds.apply(tf.data.experimental.assert_cardinality(
            max(0, records_per_pass - skip_records) // batch_size))
    return ds


def _source(source, schema, model_config, verify_checksums, dynamic_masking):
    """-> (manifest or None, schema, shard paths, their record counts or None,
    dynamic_masking); a manifest is read and checked, a file pattern globbed."""
    manifest_path = source if os.path.isdir(source) else None
    if source.endswith(".json"):
        manifest_path = source
    if manifest_path:
        manifest = read_manifest(manifest_path)
        check_kind(manifest, "bert")
        check_schema(manifest, model_config, schema)
        schema = RecordSchema(**manifest["schema"])
        check_shard_framing(manifest)
        if verify_checksums:
            verify_shards(manifest)
        files = shard_paths(manifest)
        counts = [s["records"] for s in manifest["shards"]]
        unmasked = manifest["instance_config"].get("unmasked", False)
        if dynamic_masking is None:
            dynamic_masking = unmasked
        if unmasked and not dynamic_masking:
            raise ValueError(f"{source} holds unmasked records: use dynamic_masking=True.")
    else:
        if dynamic_masking:
            raise ValueError("dynamic_masking needs a manifest (vocabulary size and special ids).")
        manifest, files, counts = None, sorted(tf.io.gfile.glob(source)), None
        schema = schema or RecordSchema()
    if not files:
        raise ValueError(f"No TFRecord files in {source}.")
    return manifest, schema, files, counts, dynamic_masking


def _parser(schema, masking_manifest, seed):
    """The batches' parse: records -> `(x, y, sample_weight)`. With the
    manifest of unmasked records, each batch is masked anew: its mask seed
    is (seed, its index in the stream) folded with its pass, so new masks
    for every batch and epoch, the same after a resume."""
    spec = schema.feature_spec()
    if masking_manifest is None:
        def parse(records, pass_numbers):
            del pass_numbers
            return to_model_inputs(tf.io.parse_example(records, spec))

        return parse
    ids = masking_manifest["special_ids"]
    masking = masking_manifest["instance_config"]

    def parse(index, batch):
        records, pass_numbers = batch
        batch_seed = tf.random.experimental.stateless_fold_in(
            tf.stack([tf.cast(seed, tf.int64), index]), pass_numbers[0])
        features = mask_batch(
            tf.io.parse_example(records, spec), batch_seed,
            masking_manifest["vocab_size"], ids["cls"], ids["sep"], ids["mask"],
            masking["masked_lm_prob"], schema.max_predictions_per_seq)
        return to_model_inputs(features)

    return parse


def to_left_to_right(x, y, sample_weight):
    """A pretraining batch -> the paper's "LTR & No NSP" batch, same records.

    BERT's ablation (Devlin et al. 2018, Sec. 5.1) trains a left-to-right
    LM on the same data: the masked positions get their original ids back
    (`masked_lm_ids` where `masked_lm_weights > 0`, so no [MASK] and no
    random replacement is left), the target at position t is token t + 1
    (the last column is 0), weighted by whether token t + 1 is real. NSP is
    dropped; a "random next" pair still joins two unrelated segments, as
    the records were made for NSP.

        ds = pretraining_dataset(folder, 32).map(to_left_to_right)

    Args: `(x, y, sample_weight)` as `pretraining_dataset` yields them.

    Returns: `x` with `input_word_ids`, `input_mask`, `input_type_ids`
    `(B, S)` int32; `y = {"lm": (B, S) int32}`; `sample_weight = {"lm":
    (B, S) float32}`.
    """
    # B=batch, S=sequence, P=max predictions
    ids = x["input_word_ids"]  # (B, S)
    positions = x["masked_lm_positions"]  # (B, P)
    real = sample_weight["masked_lm"] > 0  # (B, P); padding predictions point at 0
    rows = tf.broadcast_to(tf.range(tf.shape(positions)[0])[:, None], tf.shape(positions))
    indices = tf.stack([tf.boolean_mask(rows, real), tf.boolean_mask(positions, real)], axis=-1)
    ids = tf.tensor_scatter_nd_update(ids, indices, tf.boolean_mask(y["masked_lm"], real))
    mask = x["input_mask"]

    def shift_left(t):  # (B, S) -> (B, S): column t holds column t + 1, the last 0
        return tf.concat([t[:, 1:], tf.zeros_like(t[:, :1])], axis=1)

    x = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": x["input_type_ids"]}
    return x, {"lm": shift_left(ids)}, {"lm": tf.cast(shift_left(mask), tf.float32)}
