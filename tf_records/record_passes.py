"""The passes over a records folder's shards that BERT's and GPT's readers
share (`bert/reader.py`, `gpt/reader.py`).

Pass `p` reads the shards in an order shuffled by `(seed, p)`, interleaved
and in a deterministic order, and shuffles their records with a seed from
`(seed, p)`: the stream is a pure function of the seed, so a run resumed at
a batch sees what the uninterrupted run would have.
"""

import tensorflow as tf

from tf_records.plain import plain


def shuffled_pass(files, shuffle_buffer, seed, p):
    """The records of pass `p` over `files` (a string tensor `(F,)`).

    `shuffle_buffer`: records in the shuffle buffer; 0: no shuffle, the
    files in order.
    """
    p = tf.cast(p, tf.int64)
    order = files
    if shuffle_buffer:
        order = tf.random.experimental.stateless_shuffle(files, seed=tf.stack([seed, p]))
    ds = tf.data.Dataset.from_tensor_slices(order).interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(int(files.shape[0]), 8),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,  # the same order every run: exact resume
    )
    if shuffle_buffer:
        ds = ds.shuffle(shuffle_buffer, seed=seed * 1_000_003 + p)
    return ds


def pass_numbers(repeat, first_pass=0):
    """The pass numbers, int64: from `first_pass` on (`repeat`), or one pass
    per iteration of a finite dataset: iterated again (fit with epochs=N), it
    gets the next pass number, so a new order."""
    if repeat:
        return tf.data.Dataset.range(first_pass, 2**62)
    iterations = tf.Variable(-1, dtype=tf.int64, trainable=False)
    return tf.data.Dataset.range(1).map(plain(lambda _: iterations.assign_add(1)))
