"""`BertEmbeddings`: word + position + token-type embeddings, LayerNorm, dropout."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.speed.fast_dropout import FastDropout
from keras_bert_impl.speed.fast_layer_norm import FastLayerNormalization


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertEmbeddings(NamedConfig, keras.layers.Layer):
    """Adds learned position and token-type embeddings to word embeddings.

    The paper's input representation (Fig. 2): the sum of token, segment and
    position embeddings, then LayerNorm and dropout, as the original
    `embedding_postprocessor`. The word lookup itself is a separate
    `TiedWordEmbedding` so the masked-LM head can share its table.

    Args:
        max_position_embeddings: int. Longest sequence accepted (P).
        type_vocab_size: int. Number of segment types (T).
        hidden_size: int. Width of every hidden state (H).
        hidden_dropout_prob: float. Dropout rate after the LayerNorm.
        initializer_range: float. Stddev of the truncated normal init.
        layer_norm_eps: float. LayerNorm epsilon.

    Call arguments:
        word_embeddings: float `(B, S, H)`, the looked-up word vectors.
        input_type_ids: int `(B, S)`, 0 for segment A and 1 for segment B.
        training: bool. Applies dropout when True.

    Returns:
        `(B, S, H)` embeddings.

    Example:
    >>> layer = BertEmbeddings(16, 2, 12, 0.1, 0.02, 1e-12)
    >>> layer(np.zeros((3, 7, 12)), np.zeros((3, 7), "int32")).shape
    (3, 7, 12)
    """

    config_names = ("max_position_embeddings", "type_vocab_size", "hidden_size",
                    "hidden_dropout_prob", "initializer_range", "layer_norm_eps")

    def __init__(
        self,
        max_position_embeddings,
        type_vocab_size,
        hidden_size,
        hidden_dropout_prob=0.1,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.hidden_size = hidden_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.layer_norm = FastLayerNormalization(
            epsilon=layer_norm_eps,
            dtype="float32",  # numerically sensitive: float32 under mixed precision
            name="layer_norm",
        )
        self.dropout = FastDropout(
            hidden_dropout_prob, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, word_embeddings_shape, input_type_ids_shape=None):
        init = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=init,
        )
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings",
            shape=(self.type_vocab_size, self.hidden_size),
            initializer=init,
        )
        self.layer_norm.build(word_embeddings_shape)
        self.built = True

    def call(self, word_embeddings, input_type_ids, training=None):
        seq_length = keras.ops.shape(word_embeddings)[1]
        positions = keras.ops.cast(self.position_embeddings[:seq_length], self.compute_dtype)
        types = keras.ops.take(
            keras.ops.cast(self.token_type_embeddings, self.compute_dtype),
            input_type_ids,
            axis=0,
        )  # (B, S, H)
        x = word_embeddings + types + positions[None]  # (B, S, H)
        x = self.layer_norm(x)
        x = keras.ops.cast(x, self.compute_dtype)
        return self.dropout(x, training=training)

    def compute_output_shape(self, word_embeddings_shape, input_type_ids_shape=None):
        return word_embeddings_shape
