"""`GptEmbeddings`: learned position embeddings added to token embeddings."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.speed.fast_dropout import FastDropout

# B=batch, S=sequence, P=positions, H=hidden


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GptEmbeddings(NamedConfig, keras.layers.Layer):
    """Adds a learned position embedding to the token embeddings, then dropout.

    OpenAI GPT's input (`finetune-transformer-lm`'s `embed`): the sum of the
    token and position lookups, dropout, and no LayerNorm (BERT normalizes
    its embeddings; GPT does not). The token lookup is a separate
    `TiedWordEmbedding` so the LM head can share its table.

    Args:
        n_positions: int. Longest sequence accepted (P).
        n_embd: int. Width of every hidden state (H).
        embd_pdrop: float. Dropout on the sum.
        initializer_range: float. Stddev of the normal init.

    Call arguments:
        token_embeddings: float `(B, S, H)`, the looked-up token vectors.
        training: bool. Applies dropout when True.

    Returns:
        `(B, S, H)` embeddings.

    Example:
    >>> GptEmbeddings(16, 12)(np.zeros((3, 7, 12))).shape
    (3, 7, 12)
    """

    config_names = ("n_positions", "n_embd", "embd_pdrop", "initializer_range")

    def __init__(self, n_positions, n_embd, embd_pdrop=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.n_positions = n_positions
        self.n_embd = n_embd
        self.embd_pdrop = embd_pdrop
        self.initializer_range = initializer_range
        self.dropout = FastDropout(embd_pdrop, dtype=self.dtype_policy, name="dropout")

    def build(self, token_embeddings_shape):
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.n_positions, self.n_embd),
            initializer=keras.initializers.RandomNormal(stddev=self.initializer_range),
        )
        self.built = True

    def call(self, token_embeddings, training=None):
        seq_length = keras.ops.shape(token_embeddings)[1]
        positions = keras.ops.cast(self.position_embeddings[:seq_length], self.compute_dtype)
        x = token_embeddings + positions[None]  # (B, S, H)
        return self.dropout(x, training=training)

    def compute_output_shape(self, token_embeddings_shape):
        return token_embeddings_shape
