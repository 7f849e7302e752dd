"""`NextSentenceHead`: is segment B the true continuation of segment A?"""

import keras

from keras_bert_impl.base.layer_config import NamedConfig


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class NextSentenceHead(NamedConfig, keras.layers.Layer):
    """2-way classifier on the pooled output (paper Sec. 3.1, Task #2).

    Label 0 means B follows A ("IsNext"), 1 means B is random ("NotNext"),
    as the original `get_next_sentence_output`. Logits are float32.

    Args:
        initializer_range: float. Stddev of the truncated normal init.

    Call arguments:
        pooled_output: float `(B, H)`.

    Returns:
        float32 logits `(B, 2)`.
    """

    config_names = ("initializer_range",)

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            2,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype="float32",  # logits feed the loss: keep float32
            name="dense",
        )

    def build(self, pooled_output_shape):
        self.dense.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output):
        return self.dense(keras.ops.cast(pooled_output, "float32"))  # (B, 2)

    def compute_output_shape(self, pooled_output_shape):
        return (pooled_output_shape[0], 2)
