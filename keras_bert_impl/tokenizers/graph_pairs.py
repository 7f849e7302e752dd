"""Sentence pairs trimmed in TensorFlow ops, as every family's in-graph
tokenizer packs them (`pairs` is the Python path)."""

import tensorflow as tf

# B=batch, N=ids of the batch


def pair_budget(max_length, is_pair):
    """The ids a row of `max_length` leaves for text: less two special
    tokens for one segment, three for a pair (`ValueError` when negative)."""
    budget = max_length - (3 if is_pair else 2)
    if budget < 0:
        raise ValueError(
            f"`max_length` must leave room for the special tokens. Received: {max_length}.")
    return budget


def trimmed_lengths(ids_a, ids_b, budget):
    """How many ids of each row of A and B fit in `budget`.

    The original `_truncate_seq_pair` (longest first, ties trimmed from B)
    in closed form: B keeps `min(len_b, max(m - len_a, m // 2))` of the
    budget m and A the rest; A alone keeps `min(len_a, m)`.

    Returns:
        `(keep_a, keep_b)`: int64 `(B,)` each, `keep_b` None when `ids_b` is.
    """
    len_a = ids_a.row_lengths()
    if ids_b is None:
        return tf.minimum(len_a, budget), None
    len_b = ids_b.row_lengths()
    fits = len_a + len_b <= budget
    keep_b = tf.minimum(len_b, tf.maximum(budget - len_a, budget // 2))
    keep_b = tf.where(fits, len_b, keep_b)
    return tf.where(fits, len_a, budget - keep_b), keep_b


def keep_first(ragged, counts):
    """The first `counts[i]` values of each row `i`.

    On the flat values (each value's row and position in it): the same
    result as `tf.ragged.boolean_mask` of a ragged comparison, whose ragged
    broadcasting took ~0.25 s of Python per call to trace (an export traces
    three).
    """
    rows = ragged.value_rowids()  # (N,)
    starts = tf.gather(ragged.row_starts(), rows)  # (N,)
    positions = tf.range(tf.size(rows, out_type=rows.dtype), dtype=rows.dtype) - starts
    keep = positions < tf.gather(tf.cast(counts, rows.dtype), rows)  # (N,)
    return tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(ragged.values, keep), tf.boolean_mask(rows, keep),
        nrows=ragged.nrows(), validate=False)
