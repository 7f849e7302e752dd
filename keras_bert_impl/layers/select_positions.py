"""`select_positions`: rows of a sequence at given positions."""

import keras

# B=batch, S=sequence, Q=selected positions, H=hidden


def select_positions(sequence, positions):
    """Rows `positions` `(B, Q)` of `sequence` `(B, S, H)` -> `(B, Q, H)`.

    A one-hot matmul, not a gather: its gradient is one small batched
    matmul instead of a scatter into a zeroed `(B, S, H)` tensor.
    """
    selector = keras.ops.one_hot(
        keras.ops.cast(positions, "int32"), keras.ops.shape(sequence)[1],
        dtype=keras.backend.standardize_dtype(sequence.dtype),
    )  # (B, Q, S)
    return keras.ops.matmul(selector, sequence)
