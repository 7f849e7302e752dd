"""The layers that turn a multiple-choice batch `(B, C, S)` into rows for
a backbone and back (BERT's, GPT's and XLNet's multiple-choice models)."""

import keras

# B=batch, C=choices, S=sequence


class FoldRows(keras.layers.Layer):
    """`(B, C, S)` -> `(B*C, S)`: every choice is a row for the backbone."""

    def call(self, x):
        return keras.ops.reshape(x, (-1, keras.ops.shape(x)[-1]))  # (B*C, S)

    def compute_output_shape(self, input_shape):
        return (None, input_shape[-1])


class UnfoldRows(keras.layers.Layer):
    """`(B*C, ...)` -> `(B, C, ...)`, C read from the `(B, C, S)` input."""

    def call(self, rows, like):
        shape = keras.ops.shape(like)
        return keras.ops.reshape(rows, (shape[0], shape[1], *rows.shape[1:]))  # (B, C, ...)

    def compute_output_shape(self, rows_shape, like_shape):
        return (like_shape[0], like_shape[1], *rows_shape[1:])


class UnfoldScores(keras.layers.Layer):
    """`(B*C, 1)` scores -> `(B, C)`, C read from the `(B, C, S)` input."""

    def call(self, scores, like):
        return keras.ops.reshape(scores, keras.ops.shape(like)[:2])  # (B, C)

    def compute_output_shape(self, scores_shape, like_shape):
        return tuple(like_shape[:2])
