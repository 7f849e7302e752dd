"""`RelativeAttention`: XLNet's two-stream relative multi-head attention."""

import keras
import tensorflow as tf

from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.speed.fast_dropout import FastDropout
from keras_bert_impl.speed.plain_ops import tracing_plain

# B=batch, L=query length (this segment), P=predicted positions (query
# stream), Q=L or P, M=memory length, K=M + L keys, R=relative positions,
# S=position streams (2 with bi_data), H=d_model, N=heads, D=d_head


def rel_shift(scores, klen):
    """XLNet's `rel_shift`: column c of a row of position scores -> key j.

    The original reshapes `(Q, R)` to `(R, Q)`, drops the first row,
    reshapes back to `(Q, R - 1)` and keeps `klen` columns; equivalently
    `out[..., i, j] = scores[..., i, Q - i + j]` (the score of distance
    `mlen + i - j` when column c holds distance `klen - c`). Pure reshapes
    and slices, no gather.

    Args:
        scores: `(..., Q, R)`, R >= klen + 1.
        klen: int or scalar tensor. K.

    Returns:
        `(..., Q, K)`.
    """
    shape = keras.ops.shape(scores)
    lead, q, r = tuple(shape[:-2]), shape[-2], shape[-1]
    x = keras.ops.reshape(scores, lead + (r, q))  # (..., R, Q)
    # `keras.ops.slice`, not `x[..., 1:, :]`: TensorFlow's StridedSlice and its
    # gradient cost ~10-20% of a fine-tuning step here (benchmarks/xlnet_train_step.py).
    x = keras.ops.slice(x, (0,) * len(lead) + (1, 0), lead + (r - 1, q))  # (..., R - 1, Q)
    x = keras.ops.reshape(x, lead + (q, r - 1))  # (..., Q, R - 1)
    return keras.ops.slice(x, (0,) * len(lead) + (0, 0), lead + (q, klen))  # (..., Q, K)


def _plus_head_bias(queries, bias):
    """`queries + bias`: plain under `plain_ops()` (exports), else `_summed_bias_grad`."""
    return queries + bias if tracing_plain() else _summed_bias_grad(queries, bias)


@tf.custom_gradient
def _summed_bias_grad(queries, bias):
    """`(B, N, Q, D)` queries + an `(N, 1, D)` bias (`r_w`, `r_r`).

    The bias gradient is summed over the batch, then over the queries:
    TensorFlow's one reduction over the non-adjacent axes (0, 2) took 3-5x
    as long on CPU (about 2% of a fine-tuning step at `mini`).
    """

    def grad(dy):
        return dy, tf.reduce_sum(tf.reduce_sum(dy, 0), 1, keepdims=True)

    return queries + bias, grad


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class RelativeAttentionBiases(NamedConfig, keras.layers.Layer):
    """XLNet's `r_w_bias`, `r_r_bias` and `r_s_bias` (each `(N, D)`).

    The biases added to the queries before the content (`r_w`), position
    (`r_r`) and segment (`r_s`) scores. With `untie_r` each block has its
    own; otherwise one instance is shared by every block (the original's
    `untie_r=False`). Called on any tensor of the graph (ignored), it
    returns the three as one `(3, N, D)` tensor in the compute dtype.

    Args:
        n_head: int. N.
        d_head: int. D.
        initializer_range: float. Stddev of the normal init.

    Call arguments:
        inputs: any tensor (ignored; it places the layer in the graph).

    Returns:
        `(3, N, D)`: `[r_w_bias, r_r_bias, r_s_bias]`.
    """

    config_names = ("n_head", "d_head", "initializer_range")

    def __init__(self, n_head, d_head, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.n_head = n_head
        self.d_head = d_head
        self.initializer_range = initializer_range
        init = keras.initializers.RandomNormal(stddev=initializer_range)
        for name in ("r_w_bias", "r_r_bias", "r_s_bias"):
            setattr(self, name, self.add_weight(name=name, shape=(n_head, d_head),
                                                initializer=init))
        self.built = True

    def call(self, inputs):
        del inputs
        biases = [self.r_w_bias, self.r_r_bias, self.r_s_bias]
        return keras.ops.stack([keras.ops.cast(b, self.compute_dtype) for b in biases])  # (3, N, D)

    def compute_output_shape(self, inputs_shape):
        return (3, self.n_head, self.d_head)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class RelativeAttention(NamedConfig, keras.layers.Layer):
    """Relative multi-head attention over memory and segment, one or two streams.

    Transformer-XL's attention (Dai et al. 2019, Sec. 3.3) with XLNet's
    segment term (Yang et al. 2019, Sec. 2.3-2.5), as the original
    `rel_attn_core`: projections q, k, v, r, o of shape `(H, N, D)` with no
    biases; keys and values from `concat(memory, content)`; scores
    `(AC + BD + EF) / sqrt(D)` with `AC = (q + r_w) k`, `BD =
    rel_shift((q + r_r) r)` and `EF = (q + r_s) seg_embed[s_ij]`, s_ij = 1
    when query and key lie in different segments (memory counts as segment
    0); masked keys get -1e30 (in float32), as the original and
    transformers, so a row with every key masked attends uniformly to all
    of them (XLNet's data leaves no predicted row so: tokens that are not
    targets are visible to every row).

    Two streams (XLNet Sec. 2.3): the content stream attends with
    `masks["content_bias"]`; the query stream (rows `query`, one per
    predicted position) with `masks["query_bias"]`, to the same keys and
    values, through the same weights. Only the P predicted rows of the
    query stream are computed: their position scores are gathered at
    `masks["query_shift"]` (the `rel_shift` columns of their positions).

    `EF` is computed as `(q + r_s)(seg_embed[1] - seg_embed[0]) s_ij`: the
    dropped `seg_embed[0]` part adds the same number to every key of a row,
    which the softmax ignores (exactly, values and gradients).

    q, k and v are one `(H, 3, N, D)` kernel (one matmul without memory);
    the checkpoint converters split it.

    Args:
        d_model: int. H.
        n_head: int. N.
        d_head: int. D.
        dropout: float. Dropout on the attention weights.
        initializer_range: float. Stddev of the normal init.

    Call arguments:
        content: `(B, L, H)`, the content stream.
        positions: `(S, R, H)`, `RelativePositionEncoding`'s output.
        biases: `(3, N, D)`, `RelativeAttentionBiases`' output.
        masks: dict from `XLNetAttentionMasks`: `content_bias` float32
            `(B, 1, L, K)`, `segment_diff` `(B, 1, L, K)`; with `query`
            also `query_bias`, `query_segment_diff` `(B, 1, P, K)`,
            `query_shift` int `(B, 1, P, K)`, `query_valid` `(B, 1, P, 1)`.
        memory: optional `(B, M, H)`, this layer's memory.
        query: optional `(B, P, H)`, the query stream.
        training: bool. Applies dropout when True.

    Returns:
        `(content_out (B, L, H), query_out (B, P, H) or None)`: attention
        after the output projection (before dropout, residual, LayerNorm).
    """

    config_names = ("d_model", "n_head", "d_head", "dropout", "initializer_range")

    def __init__(self, d_model, n_head, d_head, dropout=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.n_head = n_head
        self.d_head = d_head
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.probs_dropout = FastDropout(dropout, dtype=self.dtype_policy, name="probs_dropout")

    def build(self, content_shape):
        h, n, d = self.d_model, self.n_head, self.d_head
        init = keras.initializers.RandomNormal(stddev=self.initializer_range)
        self.query_key_value = self.add_weight(name="query_key_value", shape=(h, 3, n, d),
                                               initializer=init)
        self.position_kernel = self.add_weight(name="position_kernel", shape=(h, n, d),
                                               initializer=init)
        self.output_kernel = self.add_weight(name="output_kernel", shape=(h, n, d),
                                             initializer=init)
        self.seg_embed = self.add_weight(name="seg_embed", shape=(2, n, d), initializer=init)
        self.built = True

    def _heads(self, x, kernel, parts):
        """`(B, T, H) @ (H, parts * N * D)` -> `parts` tensors `(B, N, T, D)`."""
        batch, length = keras.ops.shape(x)[0], keras.ops.shape(x)[1]
        # 2-D matmul: one GEMM (a 3-D einsum goes through reshapes anyway).
        y = keras.ops.matmul(keras.ops.reshape(x, (-1, self.d_model)), kernel)  # (B*T, parts*N*D)
        y = keras.ops.reshape(y, (batch, length, parts, self.n_head, self.d_head))
        y = keras.ops.transpose(y, (2, 0, 3, 1, 4))  # (parts, B, N, T, D)
        return keras.ops.unstack(y, parts, axis=0)

    def call(self, content, positions, biases, masks, memory=None, query=None, training=None):
        n, d = self.n_head, self.d_head
        dtype = self.compute_dtype
        kernel = self._scaled_kernel()  # (H, 3ND), queries come out / sqrt(D)
        if memory is None:
            q, k, v = self._heads(content, kernel, 3)  # (B, N, L, D), keys K = L
        else:
            (q,) = self._heads(content, kernel[:, : n * d], 1)  # (B, N, L, D)
            keys = keras.ops.concatenate([keras.ops.cast(memory, dtype), content], axis=1)
            k, v = self._heads(keys, kernel[:, n * d:], 2)  # (B, N, K, D)
        klen = keras.ops.shape(k)[2]
        k_r = self._position_keys(positions)  # (S, N, D, R)
        k_t = keras.ops.swapaxes(k, -1, -2)  # (B, N, D, K)
        # (q + bias) / sqrt(D) = q / sqrt(D) + bias / sqrt(D): the biases
        # (N, D) are scaled, the queries came out of the kernel scaled.
        scale = keras.ops.cast(d**-0.5, dtype)
        r_w, r_r, r_s = [keras.ops.reshape(b, (n, 1, d)) * scale
                         for b in keras.ops.unstack(biases, 3)]
        seg = keras.ops.cast(self.seg_embed, dtype)
        seg_diff = keras.ops.reshape(seg[1] - seg[0], (n, d, 1))  # (N, D, 1)
        # (q + r_s) . seg_diff as q @ seg_diff plus a per-head constant: one
        # batched matmul instead of a (B, N, Q, D) add, product and sum,
        # whose gradients were reductions over the batch and query axes.
        r_s_diff = keras.ops.matmul(r_s, seg_diff)  # (N, 1, 1)

        def attend(queries, mask_bias, segment_diff, shift=None):
            """Attention of `(B, N, Q, D)` queries (already / sqrt(D)) -> `(B, N, Q, D)` context."""
            ac = keras.ops.matmul(_plus_head_bias(queries, r_w), k_t)  # (B, N, Q, K)
            raw = self._position_scores(_plus_head_bias(queries, r_r), k_r)  # (B, N, Q, R)
            if shift is None:
                bd = rel_shift(raw, klen)  # (B, N, Q, K)
            else:
                bd = keras.ops.take_along_axis(raw, shift, axis=-1)  # (B, N, Q, K)
            ef = keras.ops.matmul(queries, seg_diff) + r_s_diff  # (B, N, Q, 1)
            # Sum, mask and softmax in float32 (also under mixed precision,
            # where Keras hands the masks over in the compute dtype).
            f32 = "float32"
            scores = (keras.ops.cast(ac, f32) + keras.ops.cast(bd, f32)
                      + keras.ops.cast(ef, f32) * keras.ops.cast(segment_diff, f32)
                      + keras.ops.cast(mask_bias, f32))
            probs = keras.ops.cast(keras.ops.softmax(scores, axis=-1), dtype)
            probs = self.probs_dropout(probs, training=training)
            return keras.ops.matmul(probs, v)  # (B, N, Q, D)

        content_out = self._output(attend(q, masks["content_bias"], masks["segment_diff"]))
        if query is None:
            return content_out, None
        (q_g,) = self._heads(query, kernel[:, : n * d], 1)  # (B, N, P, D)
        context = attend(q_g, masks["query_bias"], masks["query_segment_diff"],
                         masks["query_shift"])
        # Rows of target_mapping that pick no position (padding) attend to nothing.
        context = context * keras.ops.cast(masks["query_valid"], dtype)  # (B, N, P, D)
        return content_out, self._output(context)

    def _scaled_kernel(self):
        """The q, k, v kernel as `(H, 3 * N * D)` in the compute dtype, its
        query columns times 1/sqrt(D)."""
        h, n, d = self.d_model, self.n_head, self.d_head
        dtype = self.compute_dtype
        # 1/sqrt(D) folded into the query columns of the kernel (H x 3ND), so
        # no pass over the (B, N, Q, D) queries scales them, nor their gradient.
        column_scale = keras.ops.concatenate([keras.ops.full((n * d,), d**-0.5),
                                              keras.ops.ones((2 * n * d,))])
        kernel = keras.ops.cast(keras.ops.reshape(self.query_key_value, (h, 3 * n * d)), dtype)
        return kernel * keras.ops.cast(column_scale, dtype)  # queries come out / sqrt(D)

    def _position_keys(self, positions):
        """`(S, R, H)` position encodings -> `(S, N, D, R)` position keys."""
        h, n, d = self.d_model, self.n_head, self.d_head
        # Position keys: one (S*R, H) @ (H, N*D) product for the whole batch.
        streams, r = keras.ops.shape(positions)[0], keras.ops.shape(positions)[1]
        r_kernel = keras.ops.cast(keras.ops.reshape(self.position_kernel, (h, n * d)),
                                  self.compute_dtype)
        k_r = keras.ops.matmul(keras.ops.reshape(positions, (-1, h)), r_kernel)  # (S*R, N*D)
        k_r = keras.ops.reshape(k_r, (streams, r, n, d))
        return keras.ops.transpose(k_r, (0, 2, 3, 1))  # (S, N, D, R)

    def _position_scores(self, queries, k_r):
        """`(B, N, Q, D)` x `(S, N, D, R)` -> `(B, N, Q, R)`; with S = 2 the
        first half of the batch reads stream 0, the second half stream 1."""
        if k_r.shape[0] == 2:
            shape = keras.ops.shape(queries)
            halves = keras.ops.reshape(queries, (2, -1) + tuple(shape[1:]))  # (2, B/2, N, Q, D)
            raw = keras.ops.matmul(halves, keras.ops.expand_dims(k_r, 1))  # (2, B/2, N, Q, R)
            return keras.ops.reshape(raw, tuple(shape[:-1]) + (-1,))  # (B, N, Q, R)
        return keras.ops.matmul(queries, k_r[0])  # (B, N, Q, R)

    def _output(self, context):
        """`(B, N, Q, D)` -> `(B, Q, H)` through the `o` projection."""
        shape = keras.ops.shape(context)
        batch, length = shape[0], shape[2]
        n_d = self.n_head * self.d_head
        flat = keras.ops.reshape(keras.ops.transpose(context, (0, 2, 1, 3)), (-1, n_d))  # (B*Q, N*D)
        kernel = keras.ops.cast(keras.ops.reshape(self.output_kernel, (self.d_model, n_d)),
                                self.compute_dtype)  # (H, N*D)
        out = keras.ops.matmul(flat, keras.ops.transpose(kernel))  # (B*Q, H)
        return keras.ops.reshape(out, (batch, length, self.d_model))
