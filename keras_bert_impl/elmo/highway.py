"""`Highway`: one highway layer of ELMo's character encoder."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig

# N=any leading axes, F=features


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class Highway(NamedConfig, keras.layers.Layer):
    """`y = t * relu(W_t x + b_t) + (1 - t) * x` with `t = sigmoid(W_c x + b_c)`.

    Srivastava et al. 2015, as bilm-tf's `high()`: the gate bilm-tf calls
    "carry" (`W_carry`, `b_carry`) weighs the transformed path, and its
    bias starts at -2 so that a new layer mostly passes x through. The
    transform is relu whatever the char CNN's activation (bilm-tf
    hard-codes it). Kernels start N(0, 1/F), as bilm-tf.

    Args:
        units: int. Width of the input and output (F).
        carry_bias_initializer: float. Initial `b_carry` (-2 in bilm-tf).

    Call arguments:
        inputs: float `(..., F)`.

    Returns:
        `(..., F)`.

    Example:
    >>> Highway(12)(np.ones((3, 7, 12))).shape
    TensorShape([3, 7, 12])
    """

    config_names = ("units", "carry_bias_initializer")

    def __init__(self, units, carry_bias_initializer=-2.0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValueError(f"`units` must be a positive integer. Received: units={units!r}.")
        self.units = units
        self.carry_bias_initializer = carry_bias_initializer
        normal = keras.initializers.RandomNormal(stddev=(1.0 / units) ** 0.5)
        self.carry = keras.layers.Dense(
            units, kernel_initializer=normal,
            bias_initializer=keras.initializers.Constant(carry_bias_initializer),
            dtype=self.dtype_policy, name="carry")
        self.transform = keras.layers.Dense(
            units, kernel_initializer=normal, dtype=self.dtype_policy, name="transform")

    def build(self, inputs_shape):
        if inputs_shape[-1] != self.units:
            raise ValueError(
                f"Highway({self.units}) needs inputs of width {self.units}. "
                f"Received: shape={inputs_shape}.")
        self.carry.build(inputs_shape)
        self.transform.build(inputs_shape)
        self.built = True

    def call(self, inputs):
        gate = keras.ops.sigmoid(self.carry(inputs))  # (N, F)
        transformed = keras.ops.relu(self.transform(inputs))  # (N, F)
        return gate * transformed + (1.0 - gate) * inputs

    def compute_output_shape(self, inputs_shape):
        return inputs_shape
