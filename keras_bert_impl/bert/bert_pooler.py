"""`BertPooler`: the [CLS] hidden state through Dense + tanh."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertPooler(NamedConfig, keras.layers.Layer):
    """Pools a sequence into one vector: tanh(W h_[CLS] + b).

    The paper's C vector (Sec. 3), used for NSP and sentence classification.

    Args:
        hidden_size: int. Width of the input and output (H).
        initializer_range: float. Stddev of the truncated normal init.

    Call arguments:
        sequence_output: float `(B, S, H)`.

    Returns:
        `(B, H)`.
    """

    config_names = ("hidden_size", "initializer_range")

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_size,
            activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, sequence_output_shape):
        self.dense.build((sequence_output_shape[0], sequence_output_shape[-1]))
        self.built = True

    def call(self, sequence_output):
        return self.dense(sequence_output[:, 0])  # (B, H)

    def compute_output_shape(self, sequence_output_shape):
        return (sequence_output_shape[0], self.hidden_size)
