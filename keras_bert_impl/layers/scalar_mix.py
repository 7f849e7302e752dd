"""`ScalarMix`: a learned weighted sum of layers, as ELMo."""

import keras

# B=batch, S=sequence, H=hidden, K=mixed layers


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ScalarMix(keras.layers.Layer):
    """`gamma * sum_k softmax(w)_k * layer_k`: ELMo's task-specific mix.

    Peters et al. 2018, Eq. 1. Weights start equal (w = 0) and gamma at 1,
    so the initial mix is the mean of the layers.

    Args:
        num_layers: int. Layers mixed (K).

    Call arguments:
        layers: list of K float `(B, S, H)` tensors.

    Returns:
        float32 `(B, S, H)`.

    Example:
    >>> mix = ScalarMix(3)
    >>> mix([np.ones((2, 5, 4))] * 3).shape
    TensorShape([2, 5, 4])
    """

    def __init__(self, num_layers, **kwargs):
        super().__init__(**kwargs)
        if num_layers < 1:
            raise ValueError(f"`num_layers` must be >= 1. Received: {num_layers}.")
        self.num_layers = num_layers

    def build(self, layers_shape):
        self.layer_weights = self.add_weight(
            name="layer_weights", shape=(self.num_layers,), initializer="zeros")
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")
        self.built = True

    def call(self, layers):
        if len(layers) != self.num_layers:
            raise ValueError(f"Expected {self.num_layers} layers to mix. Received: {len(layers)}.")
        stacked = keras.ops.stack([keras.ops.cast(x, self.compute_dtype) for x in layers], axis=0)
        weights = keras.ops.softmax(self.layer_weights)  # (K,)
        return self.gamma * keras.ops.tensordot(weights, stacked, axes=1)  # (B, S, H)

    def compute_output_shape(self, layers_shape):
        return layers_shape[0]

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers)
        return config
