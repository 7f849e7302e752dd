"""`CharacterEncoder`: ELMo's character CNN, highways and projection."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.elmo.highway import Highway

# B=batch, T=tokens, C=characters per token, E=char embedding, n=one filter's
# count, F=all filters, P=projection


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class CharacterEncoder(NamedConfig, keras.layers.Layer):
    """A token's vector from its character ids (bilm-tf's char CNN).

    Peters et al. 2018, Sec. 3.1 (after Kim et al. 2016 / Jozefowicz et al.
    2016): character embeddings; per filter `(width, n)` a valid
    convolution over the characters, max over positions, then the
    activation; the maxima concatenated (F); `n_highway` highway layers;
    a linear projection to P when F != P. The convolutions are `Conv2D`
    with `(1, width)` kernels over `(T, C)`, so their kernels are
    `(1, width, E, n)`, exactly bilm-tf's `W_cnn_i`. Initialisers as
    bilm-tf: embeddings U(-1, 1); kernels U(-0.05, 0.05) for relu and
    N(0, 1/(width E)) for tanh; projection N(0, 1/F); biases 0.

    Args:
        filters: list of `(width, n)` pairs.
        n_highway: int. Highway layers (0 for none).
        projection_dim: int. Output width (P).
        char_embedding_dim: int. Character embedding width (E).
        activation: str. "relu" or "tanh", after each max.
        n_characters: int. Character table rows (262: id 0 is padding).

    Call arguments:
        char_ids: int `(B, T, C)`, C at least the widest filter.

    Returns:
        float `(B, T, P)`.

    Example:
    >>> encoder = CharacterEncoder([(1, 4), (2, 8)], 1, 10, char_embedding_dim=4)
    >>> encoder(np.ones((3, 7, 9), "int32")).shape
    TensorShape([3, 7, 10])
    """

    config_names = ("filters", "n_highway", "projection_dim", "char_embedding_dim", "activation",
                    "n_characters")

    def __init__(
        self,
        filters,
        n_highway,
        projection_dim,
        char_embedding_dim=16,
        activation="relu",
        n_characters=262,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.filters = [[int(w), int(n)] for w, n in filters]
        self.n_highway = n_highway
        self.projection_dim = projection_dim
        self.char_embedding_dim = char_embedding_dim
        self.activation = activation
        self.n_characters = n_characters
        if activation not in ("relu", "tanh"):
            raise ValueError(
                f"`activation` must be 'relu' or 'tanh'. Received: activation={activation!r}.")
        num_filters = sum(n for _, n in self.filters)
        self.num_filters = num_filters

        self.char_embedding = keras.layers.Embedding(
            n_characters, char_embedding_dim,
            embeddings_initializer=keras.initializers.RandomUniform(-1.0, 1.0),
            dtype=self.dtype_policy, name="char_embedding")
        self.convolutions = []
        for i, (width, count) in enumerate(self.filters):
            if activation == "relu":
                init = keras.initializers.RandomUniform(-0.05, 0.05)  # Kim et al. 2015
            else:
                init = keras.initializers.RandomNormal(
                    stddev=(1.0 / (width * char_embedding_dim)) ** 0.5)
            self.convolutions.append(keras.layers.Conv2D(
                count, (1, width), padding="valid", kernel_initializer=init,
                dtype=self.dtype_policy, name=f"conv_{i}"))
        self.highways = [
            Highway(num_filters, dtype=self.dtype_policy, name=f"highway_{i}")
            for i in range(n_highway)
        ]
        self.projection = None
        if num_filters != projection_dim:
            self.projection = keras.layers.Dense(
                projection_dim,
                kernel_initializer=keras.initializers.RandomNormal(
                    stddev=(1.0 / num_filters) ** 0.5),
                dtype=self.dtype_policy, name="projection")

    def build(self, char_ids_shape):
        chars = char_ids_shape[-1]
        widest = max(w for w, _ in self.filters)
        if chars is not None and chars < widest:
            raise ValueError(
                f"Tokens of {chars} characters are narrower than the widest filter ({widest}).")
        self.char_embedding.build(char_ids_shape)
        embedded = (*char_ids_shape, self.char_embedding_dim)
        for conv in self.convolutions:
            conv.build(embedded)
        for highway in self.highways:
            highway.build((None, None, self.num_filters))
        if self.projection is not None:
            self.projection.build((None, None, self.num_filters))
        self.built = True

    def call(self, char_ids):
        x = self.char_embedding(char_ids)  # (B, T, C, E)
        activation = keras.ops.relu if self.activation == "relu" else keras.ops.tanh
        pooled = []
        for conv in self.convolutions:
            y = keras.ops.max(conv(x), axis=2)  # (B, T, C - width + 1, n) -> (B, T, n)
            pooled.append(activation(y))
        x = keras.ops.concatenate(pooled, axis=-1)  # (B, T, F)
        for highway in self.highways:
            x = highway(x)  # (B, T, F)
        if self.projection is not None:
            x = self.projection(x)  # (B, T, P)
        return x

    def compute_output_shape(self, char_ids_shape):
        return (*char_ids_shape[:2], self.projection_dim)
