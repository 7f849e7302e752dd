"""Batches of similar length, each cut to its longest row: no compute on padding.

Fixed-length rows (the records' `max_seq_length`, fine-tuning's
`--max_seq_length`) are mostly padding when the text is short: the main
job's instances average 48 of 128 tokens. Reading `group` batches at a
time, sorting their rows by length and dealing them out as batches of
similar length, each cut to its longest row (rounded up to
`LENGTH_MULTIPLE`, so at most S / 16 shapes are ever traced), keeps the
same rows and targets while the padding mostly goes. Batch order within a
group is shuffled, so training does not see lengths rise within a group.

The sequence axis then varies from batch to batch: fine under `fit` on
CPUs and GPUs (Keras retraces once, to a `None` length), not where XLA
needs static shapes (TPUs).
"""

import numpy as np
import tensorflow as tf

from tf_records.plain import plain

# B=batch, G=batches per group, S=sequence

LENGTH_MULTIPLE = 16
# Masked-LM slots are cut in steps of 4: at most P / 4 shapes of that axis.
PREDICTION_MULTIPLE = 4
TOKEN_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def cut_padding(x, y=None, sample_weight=None, cut_targets=False):
    """Cuts the token inputs `(B, ..., S)` to the batch's longest row.

    The length is rounded up to `LENGTH_MULTIPLE` (at most S). With
    `cut_targets`, every tensor of `y` and `sample_weight` shaped like
    `input_mask` (per-token labels, e.g. tagging) is cut too; other
    tensors (span positions, class labels) keep their shapes: they index
    real tokens, which are all kept.

    A pretraining batch's masked-LM slots `(B, P)` (`masked_lm_positions`,
    its `masked_lm` targets and weights) are cut too, to the batch's last
    slot of weight > 0, rounded up to `PREDICTION_MULTIPLE`: a short
    instance has ~15% of its tokens masked, far fewer than P, and every
    padding slot costs a row of the (vocabulary-wide) output layer. The
    masked-LM loss and accuracy are means over weight > 0 slots, so they
    are unchanged.
    """
    mask = x["input_mask"]
    seq = tf.shape(mask)[-1]
    longest = tf.reduce_max(tf.reduce_sum(mask, axis=-1))
    length = tf.minimum(seq, -(-longest // LENGTH_MULTIPLE) * LENGTH_MULTIPLE)
    x = {name: t[..., :length] if name in TOKEN_INPUTS else t for name, t in x.items()}
    if "masked_lm_positions" in x and isinstance(sample_weight, dict) and (
            "masked_lm" in sample_weight):
        weights = sample_weight["masked_lm"]  # (B, P)
        slots = tf.shape(weights)[-1]
        # 1 + the index of each real slot, 0 elsewhere: its maximum is the count kept.
        last = tf.reduce_max(tf.where(weights > 0, tf.range(1, slots + 1)[None, :], 0))
        keep = tf.minimum(slots, tf.maximum(1, -(-last // PREDICTION_MULTIPLE))
                          * PREDICTION_MULTIPLE)
        x = dict(x, masked_lm_positions=x["masked_lm_positions"][:, :keep])
        y = dict(y, masked_lm=y["masked_lm"][:, :keep])
        sample_weight = dict(sample_weight, masked_lm=weights[:, :keep])
    if cut_targets:
        def cut(t):
            return t[..., :length] if t.shape == mask.shape else t

        y = tf.nest.map_structure(cut, y)
        if sample_weight is not None:
            sample_weight = tf.nest.map_structure(cut, sample_weight)
    return x, y, sample_weight


def group_by_length(batch, batch_size, seed, cut_targets=False):
    """One batch of up to G * B rows -> a dataset of its rows in batches of
    B (the last may be smaller) sorted by length, in an order shuffled by
    `seed` (int64 `(2,)`), each cut by `cut_padding`.

    Args:
        batch: `(x, y)` or `(x, y, sample_weight)` of `(G*B, ...)` tensors; `x` holds
            `input_mask` `(G*B, ..., S)`.
        batch_size: int. Rows per output batch (B).
        seed: int64 `(2,)` tensor for the stateless shuffle of batch order.
        cut_targets: bool. See `cut_padding`.
    """
    x = batch[0]
    mask = tf.reshape(x["input_mask"], [tf.shape(x["input_mask"])[0], -1,
                                        tf.shape(x["input_mask"])[-1]])  # (G*B, C, S)
    lengths = tf.reduce_max(tf.reduce_sum(mask, axis=-1), axis=-1)  # (G*B,)
    rows = tf.shape(lengths)[0]
    order = tf.argsort(lengths, stable=True)
    # Shuffle the full runs of B sorted rows; a short run (the longest
    # rows) stays last, so every batch is one run.
    full = rows // batch_size
    starts = tf.random.experimental.stateless_shuffle(tf.range(full), seed=seed) * batch_size
    index = tf.concat([tf.reshape(starts[:, None] + tf.range(batch_size)[None, :], [-1]),
                       tf.range(full * batch_size, rows)], axis=0)  # (G*B,)
    batch = tf.nest.map_structure(lambda t: tf.gather(t, tf.gather(order, index)), batch)
    return (tf.data.Dataset.from_tensor_slices(batch).batch(batch_size)
            .map(plain(lambda *b: cut_padding(*b, cut_targets=cut_targets)[:len(b)])))


def grouped_batches(x, y, sample_weight, batch_size, group, seed):
    """In-memory training rows -> batches of similar length for `fit`.

    Each epoch shuffles the rows anew (seeded), takes them G * B at a time
    and deals them out by `group_by_length`, cutting per-token targets too
    (tagging labels). Every row is in exactly one batch per epoch;
    `ceil(rows / B)` batches, the same count as `fit(x, y, batch_size=B)`.

    Args:
        x: dict of arrays `(rows, ..., S)` with `input_mask`.
        y: array or dict of arrays (per-token ones shaped like `input_mask`).
        sample_weight: None, or arrays shaped like `y`.
        batch_size: int. Rows per batch (B).
        group: int. Batches sorted together (G).
        seed: int. Shuffle seed.
    """
    rows = len(x["input_mask"])
    data = (x, y) if sample_weight is None else (x, y, sample_weight)
    ds = tf.data.Dataset.from_tensor_slices(data)
    ds = ds.shuffle(rows, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size * group).enumerate().flat_map(plain(
        lambda index, batch: group_by_length(
            batch, batch_size, tf.stack([tf.constant(seed, tf.int64), index]), cut_targets=True)))
    return ds.apply(tf.data.experimental.assert_cardinality(-(-rows // batch_size))).prefetch(
        tf.data.AUTOTUNE)


def length_sorted_batches(x, batch_size):
    """In-memory rows for scoring -> (dataset of the rows sorted by length in
    batches of `batch_size`, each cut by `cut_padding`; the index that puts
    rows of the batches' outputs back in `x`'s order).

    Args:
        x: dict of arrays `(rows, ..., S)` with `input_mask`.
        batch_size: int. Rows per batch.
    """
    x = {name: np.asarray(value) for name, value in x.items()}
    mask = x["input_mask"]
    lengths = mask.reshape(len(mask), -1, mask.shape[-1]).sum(-1).max(-1)
    order = np.argsort(lengths, kind="stable")
    batches = tf.data.Dataset.from_tensor_slices({name: value[order] for name, value in x.items()})
    batches = batches.batch(batch_size).map(plain(lambda batch: cut_padding(batch)[0]))
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return batches, back
