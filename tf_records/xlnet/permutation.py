"""XLNet's local permutation, sampled when a record is read (TensorFlow ops).

A port of the original `data_utils.py`'s `_local_perm` and of the part of
its record parser that applies it (Yang et al. 2019, section 2.3 and
appendix A.2). Every record gets a fresh factorization order: positions are
cut into blocks of `perm_size` and one random order of `perm_size` is used
in every block, blocks staying in order. The order becomes `perm_mask`
(`perm_mask[i, j] = 1`: position i may not attend to position j):

- tokens neither predicted nor functional (`<sep>`, `<cls>`) get rank -1:
  every position sees them, and they see no predicted token;
- a predicted token sees the tokens of lower rank, not itself;
- `<sep>` and `<cls>` see the tokens of lower rank and themselves.

The reuse part (the first R tokens) and the rest are permuted separately,
and the reuse part may not see the rest at all, so the memory cached from
it never holds the future of the next segment.

Randomness is stateless: a record's order is a function of `(seed, record
index)`, so a run resumed at a batch sees the orders the uninterrupted run
would have.
"""

import tensorflow as tf

# L=seq_len, R=reuse_len, P=num_predict, K=perm_size


def permutation_index(length, perm_size, seed):
    """The rank of every position in a sampled factorization order `(length,)`.

    Args:
        length: int. Positions; a multiple of `perm_size`.
        perm_size: int. Block length (K): the ranks of block b are
            `b * K .. b * K + K - 1`, in one random order shared by all blocks.
        seed: int tensor `(2,)`. Stateless seed.

    Returns:
        int64 `(length,)`: position i comes `index[i]`-th in the order.

    Example:

    >>> index = permutation_index(6, 3, tf.constant([1, 2])).numpy()
    >>> sorted(index[:3].tolist()), (index[3:] - index[:3]).tolist()
    ([0, 1, 2], [3, 3, 3])
    """
    index = tf.range(length, dtype=tf.int64)
    index = tf.transpose(tf.reshape(index, [-1, perm_size]))  # (K, length // K)
    # Shuffling the K rows permutes inside every block the same way, as the
    # original's `tf.random_shuffle` does.
    index = tf.random.experimental.stateless_shuffle(index, seed=seed)  # (K, length // K)
    return tf.reshape(tf.transpose(index), [-1])  # (length,)


def local_permutation(inputs, targets, is_masked, index, sep_id, cls_id):
    """`_local_perm` of the original, given the sampled ranks.

    Args:
        inputs: int64 `(S,)`. Token ids.
        targets: int64 `(S,)`. The record's next-token ids.
        is_masked: bool `(S,)`. Positions chosen for prediction.
        index: int64 `(S,)`. Ranks from `permutation_index`.
        sep_id: int. `<sep>`.
        cls_id: int. `<cls>`.

    Returns:
        `(perm_mask, new_targets, target_mask, input_k, input_q)`:
        `perm_mask` float32 `(S, S)` (1: row i may not attend to j);
        `new_targets` int64 `(S,)`, the token at each position (the
        next-token targets shifted back by one); `target_mask` float32
        `(S,)`, 1 where a non-functional token is predicted; `input_k` the
        ids; `input_q` float32 `(S,)`, equal to `target_mask` (the query
        stream's positions).
    """
    functional = tf.logical_or(tf.equal(inputs, sep_id), tf.equal(inputs, cls_id))  # (S,)
    visible = tf.logical_and(tf.logical_not(is_masked), tf.logical_not(functional))  # (S,)
    masked_or_functional = tf.logical_not(visible)  # (S,)
    rank = tf.where(visible, tf.constant(-1, tf.int64), index)  # (S,): first in every order
    is_target = tf.logical_and(masked_or_functional, tf.logical_not(functional))  # (S,)
    target_mask = tf.cast(is_target, tf.float32)  # (S,)
    self_rank = tf.where(is_target, rank, rank + 1)  # (S,): a target may not see itself
    perm_mask = tf.logical_and(self_rank[:, None] <= rank[None, :],
                               masked_or_functional[None, :])  # (S, S)
    new_targets = tf.concat([inputs[:1], targets[:-1]], axis=0)  # (S,)
    return tf.cast(perm_mask, tf.float32), new_targets, target_mask, inputs, target_mask


def permute_record(features, reuse_len, perm_size, num_predict, sep_id, cls_id, seed):
    """One parsed record -> the original parser's features, with a sampled order.

    Args:
        features: dict of one parsed record (`XLNetRecordSchema.feature_spec`):
            `input`, `target`, `is_masked`, `seg_id` `(L,)`, `label` `(1,)`.
        reuse_len: int. R.
        perm_size: int. K; divides R and L - R.
        num_predict: int. P: rows of `target_mapping` (at least the
            record's predicted tokens; padding after them).
        sep_id: int. `<sep>`.
        cls_id: int. `<cls>`.
        seed: int tensor `(2,)`. Stateless seed of this record's order.

    Returns:
        dict: `perm_mask` float32 `(L, L)`; `target_mapping` float32
        `(P, L)` (row p one-hot at the p-th predicted position, all 0 on
        padding); `target` int32 `(P,)` (the predicted tokens, 0 on
        padding); `target_mask` float32 `(P,)`; `input_k` int32 `(L,)`;
        `input_q` float32 `(L,)`; `seg_id` int32 `(L,)`; `label` int32 `(1,)`.
    """
    inputs, targets = features["input"], features["target"]  # (L,) each
    is_masked = tf.cast(features["is_masked"], tf.bool)  # (L,)
    seq_len = inputs.shape[0]
    rest_len = seq_len - reuse_len
    seeds = tf.random.experimental.stateless_split(seed, 2)  # (2, 2): one per part
    parts = []
    for begin, length, part_seed in ((0, reuse_len, seeds[0]), (reuse_len, rest_len, seeds[1])):
        part = slice(begin, begin + length)
        index = permutation_index(length, perm_size, part_seed)
        parts.append(local_permutation(inputs[part], targets[part], is_masked[part], index,
                                       sep_id, cls_id))
    (mask_0, target_0, tmask_0, k_0, q_0), (mask_1, target_1, tmask_1, k_1, q_1) = parts
    perm_mask = tf.concat([
        tf.concat([mask_0, tf.ones([reuse_len, rest_len])], axis=1),  # (R, L): no future
        tf.concat([tf.zeros([rest_len, reuse_len]), mask_1], axis=1),  # (L - R, L)
    ], axis=0)  # (L, L)
    target = tf.concat([target_0, target_1], axis=0)  # (L,)
    target_mask = tf.concat([tmask_0, tmask_1], axis=0)  # (L,)

    target_mapping, target, target_mask = _prediction_rows(target, target_mask, num_predict)
    return {
        "perm_mask": tf.ensure_shape(perm_mask, [seq_len, seq_len]),
        "target_mapping": tf.ensure_shape(target_mapping, [num_predict, seq_len]),
        "target": tf.ensure_shape(tf.cast(target, tf.int32), [num_predict]),
        "target_mask": tf.ensure_shape(target_mask, [num_predict]),
        "input_k": tf.cast(tf.concat([k_0, k_1], axis=0), tf.int32),  # (L,)
        "input_q": tf.concat([q_0, q_1], axis=0),  # (L,)
        "seg_id": tf.cast(features["seg_id"], tf.int32),  # (L,)
        "label": tf.cast(features["label"], tf.int32),  # (1,)
    }


def _prediction_rows(target, target_mask, num_predict):
    """`(L,)` targets and their mask -> `target_mapping` float32 `(P, L)`,
    `target` `(P,)` and `target_mask` float32 `(P,)`: row p for the p-th
    predicted position, padding after them; an error if more than P."""
    seq_len = target.shape[0]
    positions = tf.where(target_mask > 0)[:, 0]  # (T,) predicted positions, T <= P
    count = tf.shape(positions)[0]
    check = tf.debugging.assert_less_equal(
        count, num_predict,
        message=f"A record predicts more tokens than num_predict={num_predict}: read with the "
                "num_predict the records were written with (or more).")
    with tf.control_dependencies([check]):
        pad = num_predict - count
    target_mapping = tf.one_hot(positions, seq_len, dtype=tf.float32)  # (T, L)
    target_mapping = tf.pad(target_mapping, [[0, pad], [0, 0]])  # (P, L)
    target = tf.pad(tf.gather(target, positions), [[0, pad]])  # (P,)
    target_mask = tf.pad(tf.ones([count], tf.float32), [[0, pad]])  # (P,)
    return target_mapping, target, target_mask
