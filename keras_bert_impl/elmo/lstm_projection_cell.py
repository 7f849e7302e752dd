"""`LstmProjectionCell`: TF1's `LSTMCell` with clipping and a projection."""

import keras
import numpy as np

from keras_bert_impl.base.layer_config import NamedConfig

# B=batch, I=input, U=units (cell), P=projection (h), G=4U gate pre-activations


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class LstmProjectionCell(NamedConfig, keras.layers.Layer):
    """An LSTM cell with cell clipping and a clipped projection of h (LSTMP).

    Sak et al. 2014, as TF1's `tf.nn.rnn_cell.LSTMCell(num_units,
    num_proj, cell_clip, proj_clip)`, which bilm-tf trains; a cell for
    `keras.layers.RNN`. Keras's `LSTMCell` has neither the clipping nor
    the projection. Per step:

        i, j, f, o = split([x, h] W + b, 4)
        c' = sigmoid(f + forget_bias) * c + sigmoid(i) * tanh(j)
        c' = clip(c', -cell_clip, cell_clip)
        h' = clip((sigmoid(o) * tanh(c')) W_P, -proj_clip, proj_clip)

    Weights are kept in TF1's layout, so bilm-tf's checkpoints load
    verbatim: `kernel` `(I + P, 4U)` acting on `[x, h]` with gate columns
    in the order **i, j, f, o** (j is the candidate, Keras's "c"), `bias`
    `(4U,)` and `projection_kernel` `(U, P)` (`W_0`, `B`, `W_P_0` in
    bilm-tf's HDF5). Keras's `LSTM` orders its gates i, f, c, o, splits
    the kernel into `kernel` and `recurrent_kernel`, and puts the forget
    bias of 1 into the bias' initial value; TF1 keeps `bias` at 0 and adds
    `forget_bias=1.0` at every step. `tf1_lstm_weights_from_keras`
    converts. With `projection_dim=None` and no clipping this cell equals
    `keras.layers.LSTM` after that conversion. Kernels start Glorot
    uniform, the bias 0, as TF1.

    Args:
        units: int. Cell size (U).
        projection_dim: int or None. Width of h (P); None for no
            projection (h is U wide and `proj_clip` does nothing, as TF1).
        cell_clip: float or None. Clip of the cell state.
        proj_clip: float or None. Clip of the projected h.
        forget_bias: float. Added to the forget gate at run time (TF1: 1).

    Call arguments:
        inputs: float `(B, I)`, one step.
        states: list `[h (B, P), c (B, U)]` (Keras's LSTM order; TF1's
            `LSTMStateTuple` is `(c, h)`).

    Returns:
        `(h', [h', c'])`.

    Example:
    >>> rnn = keras.layers.RNN(LstmProjectionCell(32, 12, 3.0, 3.0), return_sequences=True)
    >>> rnn(np.ones((3, 7, 5))).shape
    TensorShape([3, 7, 12])
    """

    config_names = ("units", "projection_dim", "cell_clip", "proj_clip", "forget_bias")

    def __init__(self, units, projection_dim=None, cell_clip=None, proj_clip=None,
                 forget_bias=1.0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValueError(f"`units` must be a positive integer. Received: units={units!r}.")
        if projection_dim is not None and (
                isinstance(projection_dim, bool) or not isinstance(projection_dim, int)
                or projection_dim < 1):
            raise ValueError(
                "`projection_dim` must be a positive integer or None. "
                f"Received: projection_dim={projection_dim!r}.")
        for name, value in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
            if value is not None and not value > 0:
                raise ValueError(f"`{name}` must be > 0 or None. Received: {name}={value!r}.")
        self.units = units
        self.projection_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.forget_bias = forget_bias
        self.output_dim = projection_dim or units
        self.state_size = [self.output_dim, units]  # [h, c]
        self.output_size = self.output_dim

    def build(self, inputs_shape):
        input_dim = inputs_shape[-1]
        self.kernel = self.add_weight(
            name="kernel", shape=(input_dim + self.output_dim, 4 * self.units),
            initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(4 * self.units,), initializer="zeros")
        self.projection_kernel = None
        if self.projection_dim is not None:
            self.projection_kernel = self.add_weight(
                name="projection_kernel", shape=(self.units, self.projection_dim),
                initializer="glorot_uniform")
        self.built = True

    def call(self, inputs, states, training=None):
        h, c = states
        inputs = keras.ops.cast(inputs, self.compute_dtype)  # e.g. bfloat16 in, float32 cell
        z = keras.ops.matmul(keras.ops.concatenate([inputs, h], axis=-1), self.kernel)
        z = z + self.bias  # (B, G)
        i, j, f, o = keras.ops.split(z, 4, axis=-1)  # each (B, U), TF1's order
        c = keras.ops.sigmoid(f + self.forget_bias) * c + keras.ops.sigmoid(i) * keras.ops.tanh(j)
        if self.cell_clip is not None:
            c = keras.ops.clip(c, -self.cell_clip, self.cell_clip)
        h = keras.ops.sigmoid(o) * keras.ops.tanh(c)  # (B, U)
        if self.projection_kernel is not None:
            h = keras.ops.matmul(h, self.projection_kernel)  # (B, P)
            if self.proj_clip is not None:
                h = keras.ops.clip(h, -self.proj_clip, self.proj_clip)
        return h, [h, c]


def tf1_lstm_weights_from_keras(kernel, recurrent_kernel, bias, forget_bias=1.0):
    """`(kernel, bias)` of an `LstmProjectionCell` from a Keras `LSTM`'s weights.

    Keras: `kernel` `(I, 4U)`, `recurrent_kernel` `(U, 4U)`, `bias` `(4U,)`,
    gates i, f, c, o, forget bias inside `bias`. TF1 (ours): one kernel
    `(I + U, 4U)` on `[x, h]`, gates i, j (= c), f, o, and `forget_bias`
    added at run time, so it is taken out of `bias`.
    """
    kernel = np.concatenate([np.asarray(kernel), np.asarray(recurrent_kernel)], axis=0)
    i, f, c, o = np.split(kernel, 4, axis=-1)
    bi, bf, bc, bo = np.split(np.asarray(bias), 4)
    return (np.concatenate([i, c, f, o], axis=-1),
            np.concatenate([bi, bc, bf - forget_bias, bo]))
