"""Masked-LM masking inside the `tf.data` pipeline: a new mask every epoch.

RoBERTa's dynamic masking (Liu et al. 2019), for records written unmasked
(`InstanceConfig(unmasked=True)`). Same rules as the writer (`masking.py`): candidates are
real tokens except [CLS]/[SEP]; `num_to_predict = min(P, max(1,
round(len * masked_lm_prob)))` with `len` counting [CLS]/[SEP] as the
original; 80% [MASK], 10% a random id, 10% unchanged. Whole-word masking
is not offered here.
"""

import tensorflow as tf

# B=batch, S=sequence, P=max predictions


def mask_batch(features, seed, vocab_size, cls_id, sep_id, mask_id, masked_lm_prob=0.15,
               max_predictions_per_seq=20):
    """Parsed unmasked features `(B, S)` -> the same with masks applied.

    `seed` is an int `(2,)` tensor for the stateless random ops; the reader
    passes (its seed, the batch's index in the stream), so every batch and
    epoch gets new masks, and a resumed run the same ones.
    """
    seeds = tf.random.experimental.stateless_split(seed, 3)
    ids = features["input_ids"]  # (B, S) int64
    real = tf.cast(features["input_mask"], tf.bool)
    candidate = real & (ids != cls_id) & (ids != sep_id)  # (B, S)
    length = tf.reduce_sum(tf.cast(real, tf.float32), axis=1)  # (B,)
    num = tf.cast(tf.round(length * masked_lm_prob), tf.int32)  # half to even, as Python
    num = tf.minimum(max_predictions_per_seq, tf.maximum(1, num))
    num = tf.minimum(num, tf.reduce_sum(tf.cast(candidate, tf.int32), axis=1))
    shape = tf.shape(ids)
    scores = tf.where(candidate, tf.random.stateless_uniform(shape, seeds[0]), -1.0)  # (B, S)
    k = tf.minimum(max_predictions_per_seq, shape[1])
    chosen = tf.math.top_k(scores, k=k).indices  # (B, k), random candidates first
    valid = tf.range(k)[None, :] < num[:, None]  # (B, k)
    # Ascending positions, padding (0) after the real ones, as the writer.
    positions = tf.sort(tf.where(valid, chosen, shape[1]), axis=1)
    valid = positions < shape[1]
    positions = tf.where(valid, positions, 0)
    labels = tf.gather(ids, positions, batch_dims=1)  # (B, k)
    draw = tf.random.stateless_uniform(tf.shape(labels), seeds[1])
    random_ids = tf.random.stateless_uniform(
        tf.shape(labels), seeds[2], minval=0, maxval=vocab_size, dtype=tf.int64)
    shown = tf.where(draw < 0.8, tf.cast(mask_id, tf.int64), tf.where(draw < 0.9, labels, random_ids))
    batch_index = tf.broadcast_to(tf.range(shape[0])[:, None], tf.shape(positions))
    index = tf.stack([batch_index, positions], axis=-1)  # (B, k, 2)
    update_index = tf.boolean_mask(index, valid)
    new_ids = tf.tensor_scatter_nd_update(ids, update_index, tf.boolean_mask(shown, valid))
    pad = max_predictions_per_seq - k

    def padded(t, value):
        return tf.pad(t, [[0, 0], [0, pad]], constant_values=value)

    out = dict(features)
    out["input_ids"] = new_ids
    out["masked_lm_positions"] = padded(tf.cast(positions, tf.int64) * tf.cast(valid, tf.int64), 0)
    out["masked_lm_ids"] = padded(labels * tf.cast(valid, tf.int64), 0)
    out["masked_lm_weights"] = padded(tf.cast(valid, tf.float32), 0.0)
    return out
