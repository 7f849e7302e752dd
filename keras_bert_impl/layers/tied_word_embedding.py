"""`TiedWordEmbedding`: the word-embedding table, usable both ways."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class TiedWordEmbedding(keras.layers.Embedding):
    """Word embeddings whose table also scores hidden states against the vocab.

    BERT ties the masked-LM decoder to the input embeddings (paper, Sec. 3.1
    and the original `get_masked_lm_output`). Called with `reverse=True` the
    layer returns `inputs @ table^T`: logits over the vocabulary. One layer,
    called twice in the functional graph, so the tie survives `.keras` saving.
    keras-hub's `ReversibleEmbedding` does the same; we keep this small copy
    so the core model does not import the whole keras-hub model zoo.

    Args:
        input_dim: int. Vocabulary size (V).
        output_dim: int. Hidden size (H).

    Call arguments:
        inputs: int ids `(B, S)`, or hidden states `(B, P, H)` with
            `reverse=True`.
        reverse: bool. Score hidden states against the table.

    Returns:
        `(B, S, H)` embeddings, or `(B, P, V)` logits with `reverse=True`.
    """

    def call(self, inputs, reverse=False):
        if not reverse:
            return super().call(inputs)
        table = keras.ops.cast(self.embeddings, self.compute_dtype)  # (V, H)
        # B=batch, P=predictions, H=hidden, V=vocab
        shape = keras.ops.shape(inputs)
        flat = keras.ops.reshape(inputs, (-1, shape[-1]))  # (B*P, H)
        # tf.matmul(transpose_b=True), not keras.ops: its gradient for the
        # (V, H) table is one GEMM in place, where a transposed operand costs
        # a copy of the whole table each step.
        logits = tf.linalg.matmul(flat, table, transpose_b=True)  # (B*P, V)
        return keras.ops.reshape(logits, tuple(shape[:-1]) + (self.input_dim,))  # (B, P, V)

    def compute_output_spec(self, inputs, reverse=False):
        if not reverse:
            return super().compute_output_spec(inputs)
        return keras.KerasTensor(
            tuple(inputs.shape[:-1]) + (self.input_dim,), dtype=self.compute_dtype)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return tuple(input_shape[:-1]) + (self.input_dim,)
        return super().compute_output_shape(input_shape)
