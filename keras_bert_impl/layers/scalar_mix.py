"""`ScalarMix`: a learned weighted sum of layers, as ELMo."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig

# B=batch, S=sequence, H=hidden, K=mixed layers


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ScalarMix(NamedConfig, keras.layers.Layer):
    """`gamma * sum_k softmax(w + 1/K)_k * layer_k`: ELMo's task-specific mix.

    Peters et al. 2018, Eq. 1, as bilm-tf's `weight_layers`: `w` starts at
    0 and `gamma` at 1, so the initial mix is the mean of the layers (the
    `+ 1/K` is bilm-tf's; a softmax ignores a constant shift). Options of
    `weight_layers`:

    - `l2_coef`: the penalty `l2_coef * sum(w**2)` on the raw weights, a
      regulariser of `w`, so it appears in `layer.losses` / `model.losses`
      and `fit` adds it to the loss.
    - `do_layer_norm`: each layer is first normalised with ONE mean and
      variance over its whole tensor (every unmasked position and feature
      of the batch), not per token, with epsilon 1e-12 and no scale or
      offset. Masked positions do not enter the statistics (they are
      normalised with them all the same).

    Args:
        num_layers: int. Layers mixed (K).
        l2_coef: float. L2 penalty on `w`; 0 for none.
        do_layer_norm: bool. Normalise each layer first.

    Call arguments:
        layers: list of K float `(B, S, H)` tensors.
        mask: optional bool `(B, S)`, True on real positions (only the
            layer norm reads it).

    Returns:
        float `(B, S, H)`.

    Example:
    >>> mix = ScalarMix(3)
    >>> mix([np.ones((2, 5, 4))] * 3).shape
    TensorShape([2, 5, 4])
    """

    config_names = ("num_layers", "l2_coef", "do_layer_norm")

    def __init__(self, num_layers, l2_coef=0.0, do_layer_norm=False, **kwargs):
        super().__init__(**kwargs)
        if num_layers < 1:
            raise ValueError(f"`num_layers` must be >= 1. Received: {num_layers}.")
        if not l2_coef >= 0:
            raise ValueError(f"`l2_coef` must be >= 0. Received: l2_coef={l2_coef!r}.")
        self.num_layers = num_layers
        self.l2_coef = l2_coef
        self.do_layer_norm = do_layer_norm
        self.supports_masking = True  # the output keeps the positions' mask

    def build(self, layers_shape, mask_shape=None):
        self.layer_weights = self.add_weight(
            name="layer_weights", shape=(self.num_layers,), initializer="zeros",
            regularizer=keras.regularizers.L2(self.l2_coef) if self.l2_coef else None)
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")
        self.built = True

    def _layer_norm(self, x, mask):
        """x normalised with the mean and variance of its unmasked entries
        (in float32 under any policy, as every normalisation here)."""
        dtype, x = x.dtype, keras.ops.cast(x, "float32")
        if mask is None:
            mean = keras.ops.mean(x)
            variance = keras.ops.mean(keras.ops.square(x - mean))
        else:
            keep = keras.ops.cast(mask, "float32")[:, :, None]  # (B, S, 1)
            count = keras.ops.sum(keep) * keras.ops.cast(keras.ops.shape(x)[-1], "float32")
            masked = x * keep  # masked entries read as 0, whatever they hold
            mean = keras.ops.sum(masked) / count
            variance = keras.ops.sum(keras.ops.square((masked - mean) * keep)) / count
        return keras.ops.cast((x - mean) * keras.ops.rsqrt(variance + 1e-12), dtype)

    @staticmethod
    def _one_mask(mask):
        if isinstance(mask, list | tuple):  # Keras passes one mask per list entry
            return next((m for m in mask if m is not None), None)
        return mask

    def call(self, layers, mask=None):
        if len(layers) != self.num_layers:
            raise ValueError(f"Expected {self.num_layers} layers to mix. Received: {len(layers)}.")
        mask = self._one_mask(mask)
        layers = [keras.ops.cast(x, self.compute_dtype) for x in layers]
        if self.do_layer_norm:
            layers = [self._layer_norm(x, mask) for x in layers]
        stacked = keras.ops.stack(layers, axis=0)  # (K, B, S, H)
        weights = keras.ops.softmax(self.layer_weights + 1.0 / self.num_layers)  # (K,)
        return self.gamma * keras.ops.tensordot(weights, stacked, axes=1)  # (B, S, H)

    def compute_mask(self, layers, mask=None):
        return self._one_mask(mask)

    def compute_output_shape(self, layers_shape, mask_shape=None):
        return layers_shape[0]
