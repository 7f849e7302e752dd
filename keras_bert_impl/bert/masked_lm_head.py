"""`MaskedLMHead`: predicts the original ids at the masked positions."""

import keras
import tensorflow as tf

from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.layers.select_positions import select_positions
from keras_bert_impl.layers.tied_word_embedding import TiedWordEmbedding
from keras_bert_impl.speed.fast_layer_norm import FastLayerNormalization

# B=batch, S=sequence, P=predictions per sequence, H=hidden, V=vocab


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MaskedLMHead(keras.layers.Layer):
    """The masked-LM output layer of the original `get_masked_lm_output`.

    Gathers only the `P` masked positions (not all `S`), applies
    Dense + activation + LayerNorm, scores against the tied word-embedding
    table and adds a per-token output bias. Logits are float32.

    Args:
        word_embedding: `TiedWordEmbedding`. The backbone's input table.
        hidden_act: str. "gelu", "gelu_tanh" or "relu".
        initializer_range: float. Stddev of the truncated normal init.
        layer_norm_eps: float. LayerNorm epsilon.

    Call arguments:
        sequence_output: float `(B, S, H)`.
        masked_lm_positions: int `(B, P)`, indices into S; None when
            `sequence_output` already holds just the masked rows `(B, P, H)`.

    Returns:
        float32 logits `(B, P, V)`.
    """

    def __init__(
        self,
        word_embedding,
        hidden_act="gelu",
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        **kwargs,
    ):
        # autocast=False: the float32 output bias must not be read as bfloat16.
        super().__init__(autocast=False, **kwargs)
        if isinstance(word_embedding, dict):
            word_embedding = keras.layers.deserialize(word_embedding)
        if not isinstance(word_embedding, TiedWordEmbedding):
            raise ValueError(
                "`word_embedding` must be a `TiedWordEmbedding`. "
                f"Received: {type(word_embedding).__name__}."
            )
        self.word_embedding = word_embedding
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        hidden_size = word_embedding.output_dim
        self.dense = keras.layers.Dense(
            hidden_size,
            activation=get_activation(hidden_act),
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.layer_norm = FastLayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="transform_layer_norm"
        )

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        hidden = sequence_output_shape[-1]
        self.dense.build((None, None, hidden))
        self.layer_norm.build((None, None, hidden))
        self.output_bias = self.add_weight(
            name="output_bias",
            shape=(self.word_embedding.input_dim,),
            initializer="zeros",
            dtype="float32",
            autocast=False,  # stays float32 inside any caller's bfloat16 autocast
        )
        self.built = True

    def call(self, sequence_output, masked_lm_positions=None):
        x = keras.ops.cast(sequence_output, self.compute_dtype)
        if masked_lm_positions is not None:
            x = select_positions(x, masked_lm_positions)  # (B, P, H)
        x = self.dense(x)
        x = keras.ops.cast(self.layer_norm(x), self.compute_dtype)
        logits = self.word_embedding(x, reverse=True)  # (B, P, V)
        # bias_add: its gradient is TensorFlow's BiasAddGrad, faster than
        # the generic broadcast-sum over (B, P).
        return tf.nn.bias_add(keras.ops.cast(logits, "float32"), self.output_bias)

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape=None):
        if masked_lm_positions_shape is None:
            return tuple(sequence_output_shape[:-1]) + (self.word_embedding.input_dim,)
        return tuple(masked_lm_positions_shape) + (self.word_embedding.input_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            word_embedding=keras.layers.serialize(self.word_embedding),
            hidden_act=self.hidden_act,
            initializer_range=self.initializer_range,
            layer_norm_eps=self.layer_norm_eps,
        )
        return config
