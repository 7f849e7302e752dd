"""`ElmoLstmStack`: one direction of ELMo's biLM (stacked LSTMP layers)."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.elmo.lstm_projection_cell import LstmProjectionCell

# B=batch, T=tokens, P=projection (input and output width), U=LSTM units,
# H=width of h (P with a projection, else U)


def reverse_padded(x, mask):
    """Reverses each row's first `sum(mask)` steps; padding stays at the end.

    `tf.reverse_sequence` in `keras.ops`: for right-padded rows, step t of
    a row of length n comes from step n - 1 - t (t < n) and padding keeps
    its place, so a backward LSTM reads the last real token first, never
    the padding. Its own inverse.

    Args:
        x: `(B, T, ...)`.
        mask: bool `(B, T)`, True on the first n steps of each row.

    Returns:
        `(B, T, ...)`.
    """
    lengths = keras.ops.sum(keras.ops.cast(mask, "int32"), axis=1)[:, None]  # (B, 1)
    steps = keras.ops.arange(keras.ops.shape(x)[1], dtype="int32")[None, :]  # (1, T)
    index = keras.ops.where(steps < lengths, lengths - 1 - steps, steps)  # (B, T)
    index = keras.ops.reshape(index, (*keras.ops.shape(index), *([1] * (len(x.shape) - 2))))
    return keras.ops.take_along_axis(x, index, axis=1)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ElmoLstmStack(NamedConfig, keras.layers.Layer):
    """`n_layers` LSTMP layers over a sequence, in one direction (bilm-tf).

    Each layer is a `keras.layers.RNN` of `LstmProjectionCell` (named
    `lstm_{i}`). In training, dropout hits each layer's input; with
    `use_skip_connections`, layers after the first add that (dropped) input
    to their output, as TF1's `DropoutWrapper(ResidualWrapper(cell))`.
    `go_backwards=True` makes this the backward LM: each row's real tokens
    are reversed with `reverse_padded` (padding stays at the end, so it
    never enters the LSTM first), run, and the outputs reversed back, so
    output t has read tokens t..n-1. Outputs at padded steps are 0 and
    the state is not advanced there. The recurrence (cells, kept states)
    runs in float32 under any dtype policy; outputs have the policy's
    compute dtype.

    Stateful mode (`max_batch_size` set), as bilm-tf's inference model:
    the layer keeps `[h, c]` of each LSTM layer for `max_batch_size` rows
    in non-trainable variables (`state_h_{i}`, `state_c_{i}`). A call with
    B <= max_batch_size rows starts row b from stored row b and writes its
    final state (at its last real token) back; rows B and up are left as
    they are. `reset_states()` zeros them. With `max_batch_size=None` every
    call starts from zeros.

    Args:
        n_layers: int. LSTMP layers.
        units: int. LSTM cell size (U).
        projection_dim: int. Input and output width (P); h is projected
            to P when P < U.
        cell_clip: float or None. Cell-state clip.
        proj_clip: float or None. Projected-h clip.
        use_skip_connections: bool. Residual on every layer but the first.
        dropout: float. Dropout on each layer's input in training.
        go_backwards: bool. The backward direction.
        max_batch_size: int or None. Rows of kept state; None: stateless.

    Call arguments:
        inputs: float `(B, T, P)`.
        mask: bool `(B, T)`, True on each row's first n steps.
        training: bool.

    Returns:
        list of `n_layers` `(B, T, P)` outputs, bottom first, in the
        input's time order.

    Example:
    >>> stack = ElmoLstmStack(2, 24, 8, 3.0, 3.0, True)
    >>> [y.shape for y in stack(np.ones((3, 7, 8)), np.ones((3, 7), bool))]
    [TensorShape([3, 7, 8]), TensorShape([3, 7, 8])]
    """

    config_names = ("n_layers", "units", "projection_dim", "cell_clip", "proj_clip",
                    "use_skip_connections", "dropout", "go_backwards", "max_batch_size")

    def __init__(
        self,
        n_layers,
        units,
        projection_dim,
        cell_clip=None,
        proj_clip=None,
        use_skip_connections=False,
        dropout=0.0,
        go_backwards=False,
        max_batch_size=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if max_batch_size is not None and (
                isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int)
                or max_batch_size < 1):
            raise ValueError(
                "`max_batch_size` must be a positive integer (stateful) or None (stateless). "
                f"Received: max_batch_size={max_batch_size!r}.")
        if projection_dim > units:
            raise ValueError(
                f"`projection_dim` ({projection_dim}) must be <= `units` ({units}).")
        self.n_layers = n_layers
        self.units = units
        self.projection_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.use_skip_connections = use_skip_connections
        self.dropout = dropout
        self.go_backwards = go_backwards
        self.max_batch_size = max_batch_size
        # TF1: a projection only when P < U (bilm-tf's `projection_dim < lstm_dim`).
        cell_projection = projection_dim if projection_dim < units else None
        # The recurrence runs in float32 whatever the policy (a bfloat16 cell
        # state drifts over a sentence); inputs and outputs keep the policy.
        self.lstms = [
            keras.layers.RNN(
                LstmProjectionCell(units, cell_projection, cell_clip, proj_clip,
                                   dtype="float32", name="cell"),
                return_sequences=True,
                return_state=True,
                zero_output_for_mask=True,
                dtype="float32",
                name=f"lstm_{i}",
            )
            for i in range(n_layers)
        ]
        self.input_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy,
                                                  name="input_dropout")
        self.state_variables = None

    def build(self, inputs_shape, mask_shape=None):
        if inputs_shape[-1] != self.projection_dim:
            raise ValueError(
                f"ElmoLstmStack needs inputs of width projection_dim={self.projection_dim}. "
                f"Received: shape={inputs_shape}.")
        for lstm in self.lstms:
            lstm.build((inputs_shape[0], None, self.projection_dim))
        if self.max_batch_size is not None:
            self.state_variables = []
            for i in range(self.n_layers):
                pair = []
                for kind, size in (("h", self.lstms[i].cell.output_dim), ("c", self.units)):
                    variable = self.add_weight(
                        name=f"state_{kind}_{i}", shape=(self.max_batch_size, size),
                        initializer="zeros", trainable=False, dtype="float32")
                    # Also an attribute: `tf.train.Checkpoint` follows attributes, not
                    # Python lists, and a resumed run needs the states it stopped with.
                    setattr(self, f"state_{kind}_{i}", variable)
                    pair.append(variable)
                self.state_variables.append(pair)
        self.built = True

    def reset_states(self):
        """Zeros every kept state (stateful mode; nothing to do otherwise)."""
        for pair in self.state_variables or ():
            for variable in pair:
                variable.assign(keras.ops.zeros(variable.shape, variable.dtype))

    def call(self, inputs, mask, training=None):
        mask = keras.ops.cast(mask, "bool")
        batch = keras.ops.shape(inputs)[0]
        stateful = self.state_variables is not None
        if stateful and isinstance(batch, int) and batch > self.max_batch_size:
            raise ValueError(
                f"This stateful ELMo keeps state for max_batch_size={self.max_batch_size} "
                f"rows. Received a batch of {batch}.")
        x = reverse_padded(inputs, mask) if self.go_backwards else inputs  # (B, T, P)
        keep = keras.ops.cast(mask, self.compute_dtype)[:, :, None]  # (B, T, 1)
        outputs = []
        for i, lstm in enumerate(self.lstms):
            layer_input = self.input_dropout(x, training=training)
            initial = None
            if stateful:  # rows [:B] of the kept [h, c]
                initial = [v[:batch] for v in self.state_variables[i]]  # float32
            y, h, c = lstm(layer_input, initial_state=initial, mask=mask, training=training)
            y = keras.ops.cast(y, self.compute_dtype)  # (B, T, P)
            if stateful:  # final states back into rows [:B], rows B.. untouched
                for variable, final in zip(self.state_variables[i], (h, c)):
                    variable.assign(keras.ops.concatenate(
                        [keras.ops.cast(final, variable.dtype), variable[batch:]], axis=0))
            if self.use_skip_connections and i > 0:
                y = (y + layer_input) * keep  # (B, T, P), 0 at padding as dynamic_rnn
            outputs.append(y)
            x = y
        if self.go_backwards:
            outputs = [reverse_padded(y, mask) for y in outputs]
        return outputs

    def compute_output_shape(self, inputs_shape, mask_shape=None):
        return [(*inputs_shape[:2], self.projection_dim)] * self.n_layers
