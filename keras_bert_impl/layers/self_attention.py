"""`SelfAttention`: BERT's bidirectional multi-head self-attention."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.speed.fast_dropout import FastDropout

# B=batch, S=query positions, T=key positions, H=hidden, N=heads, D=H // N


def attention_bias_from_mask(input_mask):
    """`(B, T)` 1/0 mask -> `(B, 1, 1, T)` float32 additive bias (0 / -10000).

    -10000 as the original `attention_layer`: exp() of it underflows to 0 in
    float32, so padded keys get exactly zero weight.
    """
    mask = keras.ops.cast(input_mask, "float32")
    # expand_dims, not [:, None, None, :]: LiteRT's builtin strided slice
    # takes no new axes, so the converter kept that one a TensorFlow (Flex) op.
    return keras.ops.expand_dims((1.0 - mask) * -10000.0, (1, 2))


def causal_attention_bias(length, key_length=None, query_offset=0):
    """`(1, 1, S, T)` float32 additive bias: 0 where key <= query, else -10000.

    Left-to-right attention (GPT; BERT's "LTR & No NSP" ablation): position
    t sees positions <= t only. Every row keeps its own diagonal, so no row
    is fully masked. Query row i is position `query_offset + i` of the
    `key_length` (default `length`) keys: a slice of the rows
    (`TransformerEncoder`'s row branches).
    """
    rows = keras.ops.expand_dims(keras.ops.arange(length), 1) + query_offset
    columns = keras.ops.expand_dims(
        keras.ops.arange(length if key_length is None else key_length), 0)
    future = keras.ops.cast(columns > rows, "float32")  # (S, T)
    return keras.ops.expand_dims(future * -10000.0, (0, 1))  # no [None, None]: LiteRT


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class SelfAttention(NamedConfig, keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with a padding mask.

    "Attention Is All You Need" Sec. 3.2, as the original BERT `attention_layer`:
    queries, keys and values from one input, padding keys masked with -10000,
    dropout on the attention probabilities, then the output projection.

    With `causal=True` a position attends only to itself and the positions
    before it (OpenAI GPT; BERT's left-to-right ablation), on top of the
    padding mask.

    Query, key and value are one fused `(H, 3H)` projection: one larger
    matmul instead of three. The checkpoint converters split it back into
    the original `query`, `key`, `value` tensors.

    Args:
        hidden_size: int. Width of the input and output (H).
        num_attention_heads: int. Heads (N); must divide H.
        attention_probs_dropout_prob: float. Dropout on attention weights.
        initializer_range: float. Stddev of the truncated normal init.
        causal: bool. Mask the keys after each query (left-to-right).

    Call arguments:
        inputs: float `(B, T, H)`: keys and values (and queries, by default).
        input_mask: int `(B, T)`, 1 for real tokens and 0 for padding keys.
        query_inputs: optional float `(B, S, H)`: the rows to attend from,
            when only some positions' outputs are needed (the pretrainer's
            last block). Defaults to `inputs`. Not with `causal=True`
            (the selected rows' own positions would be needed).
        training: bool. Applies dropout when True.

    Returns:
        `(B, S, H)`, after the output projection (before residual/LayerNorm).
    """

    config_names = ("hidden_size", "num_attention_heads", "attention_probs_dropout_prob",
                    "initializer_range", "causal")

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        causal=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(
                "`hidden_size` must be divisible by `num_attention_heads`. "
                f"Received: hidden_size={hidden_size}, "
                f"num_attention_heads={num_attention_heads}."
            )
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.causal = causal
        self.head_size = hidden_size // num_attention_heads
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.query_key_value = keras.layers.Dense(
            3 * hidden_size,
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="query_key_value",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy, name="output_dense"
        )
        self.dropout = FastDropout(
            attention_probs_dropout_prob, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, inputs_shape, input_mask_shape=None):
        self.query_key_value.build((None, inputs_shape[-1]))
        self.output_dense.build((None, self.hidden_size))
        self.built = True

    def call(self, inputs, input_mask, query_inputs=None, training=None):
        if query_inputs is None:
            query, key, value = self.project(inputs)
        elif self.causal:
            raise ValueError("`query_inputs` cannot be combined with `causal=True`.")
        else:
            query, key, value = self._project_some(query_inputs, inputs)
        return self.attend(query, key, value, input_mask, training=training)

    def attend(self, query, key, value, input_mask, query_offset=0, training=None):
        """`(B, S, H)`: queries `(B, N, S, D)` over keys and values `(B, N, T, D)`
        (padding keys masked), through the output projection. Query row i is
        position `query_offset + i` for the causal mask."""
        batch, seq = keras.ops.shape(query)[0], keras.ops.shape(query)[2]
        context = self.context(query, key, value, input_mask, query_offset, training)  # (B*S, H)
        return keras.ops.reshape(self.output_dense(context), (batch, seq, self.hidden_size))

    def context(self, query, key, value, input_mask, query_offset=0, training=None):
        """`(B*S, n*D)`: the heads' attention before the output projection, for
        queries `(B, n, S, D)` of all `N` heads or of a group of `n` of them."""
        seq = keras.ops.shape(query)[2]
        n, d = query.shape[1], self.head_size
        # Scaling the queries (B*S*H values) is cheaper than the scores (B*N*S*S).
        query = query * keras.ops.cast(d**-0.5, query.dtype)
        # Plain batched matmuls on a head-major layout: on CPU they run ~1.5x
        # faster than the equivalent einsum, which transposes on every call.
        scores = keras.ops.matmul(query, keras.ops.swapaxes(key, -1, -2))  # (B, N, S, T)
        # Softmax in float32 under mixed precision.
        scores = keras.ops.cast(scores, "float32") + attention_bias_from_mask(input_mask)
        if self.causal:
            scores = scores + causal_attention_bias(seq, keras.ops.shape(key)[2], query_offset)
        probs = keras.ops.softmax(scores, axis=-1)
        probs = keras.ops.cast(probs, self.compute_dtype)
        probs = self.dropout(probs, training=training)
        context = keras.ops.matmul(probs, value)  # (B, N, S, D)
        context = keras.ops.transpose(context, (0, 2, 1, 3))  # (B, S, N, D)
        return keras.ops.reshape(context, (-1, n * d))  # (B*S, n*D)

    def project(self, inputs):
        """Queries, keys and values `(B, N, S, D)` of every position."""
        batch, seq = keras.ops.shape(inputs)[0], keras.ops.shape(inputs)[1]
        # Dense layers on 2-D (B*S, H): grappler then fuses MatMul + BiasAdd
        # into one oneDNN kernel (a 3-D Dense goes through Tensordot reshapes
        # that block the fusion).
        qkv = self.query_key_value(keras.ops.reshape(inputs, (-1, self.hidden_size)))  # (B*S, 3H)
        return self.split_heads(qkv, batch, seq, self.num_attention_heads)

    def split_heads(self, qkv, batch, seq, n):
        """Queries, keys and values `(B, n, S, D)` of `n` heads from their
        projections `(B*S, 3*n*D)`, columns [queries | keys | values]."""
        qkv = keras.ops.reshape(qkv, (batch, seq, 3, n, self.head_size))  # (B, S, 3, n, D)
        qkv = keras.ops.transpose(qkv, (2, 0, 3, 1, 4))  # (3, B, n, S, D)
        # unstack, not qkv[i]: the gradient of a strided slice writes a full
        # zero tensor per slice, the gradient of unstack is one stack.
        return keras.ops.unstack(qkv, 3, axis=0)  # (B, n, S, D) each

    def _project_some(self, query_inputs, inputs):
        """Queries of `query_inputs` `(B, N, S, D)`; keys, values of `inputs` `(B, N, T, D)`.

        The same fused kernel, split by columns: [query | key | value].
        """
        h, n, d = self.hidden_size, self.num_attention_heads, self.head_size
        kernel = keras.ops.cast(self.query_key_value.kernel, self.compute_dtype)  # (H, 3H)
        bias = keras.ops.cast(self.query_key_value.bias, self.compute_dtype)  # (3H,)

        def project(x, columns, parts):
            batch, length = keras.ops.shape(x)[0], keras.ops.shape(x)[1]
            y = keras.ops.matmul(keras.ops.reshape(x, (-1, h)), kernel[:, columns]) + bias[columns]
            y = keras.ops.reshape(y, (batch, length, parts, n, d))
            return keras.ops.transpose(y, (2, 0, 3, 1, 4))  # (parts, B, N, length, D)

        query = project(query_inputs, slice(0, h), 1)[0]
        key, value = keras.ops.unstack(project(inputs, slice(h, 3 * h), 2), 2, axis=0)
        return query, key, value

    def compute_output_shape(self, inputs_shape, input_mask_shape=None, query_inputs_shape=None):
        return query_inputs_shape or inputs_shape
