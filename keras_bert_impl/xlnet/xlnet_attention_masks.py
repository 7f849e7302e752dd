"""`XLNetAttentionMasks`: who attends to whom, computed once for all blocks."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig

# B=batch, L=sequence (this segment), M=memory, K=M + L keys, P=predicted
# positions, R=relative positions

# The original adds -1e30 to a blocked score (float32 throughout).
MASK_VALUE = -1e30


def _new_axis(x, axis):
    """`keras.ops.expand_dims`, not `x[:, None]`: LiteRT's builtin strided
    slice takes no new axis where the result has rank 3 or more, so its
    converter keeps such slices as TensorFlow (Flex) ops."""
    return keras.ops.expand_dims(x, axis)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class XLNetAttentionMasks(NamedConfig, keras.layers.Layer):
    """The masks and segment relations every `RelativeAttention` reads.

    As the original `transformer_xl`: key j is blocked for query i when
    it is padding (`input_mask[j] = 1`), when `perm_mask[i, j] = 1`, or
    (with "uni") when it lies in the future; memory is never blocked. The
    query stream uses exactly that; the content stream also sees its own
    position (`attn_mask - I`). `segment_diff` is 1 where query and key
    lie in different segments; memory counts as segment 0.

    For the query stream, row p of `target_mapping` (one-hot, or all zero
    for an unused prediction slot) picks position `i_p`; its rows are
    gathered from the masks above, and `query_shift` holds the `rel_shift`
    columns of that position, `L - i_p + j` (clipped into `[0, R)`: the
    clipped ones are blocked keys of "uni" attention).

    Args:
        attn_type: str. "bi" or "uni".
        same_length: bool. With "uni": every query sees as many keys.

    Call arguments:
        input_mask: float `(B, L)`, 1 for padding.
        input_type_ids: int `(B, L)`, segment ids.
        perm_mask: optional float `(B, L, L)`, 1: i cannot attend to j.
        target_mapping: optional float `(B, P, L)`.
        memory: optional `(B, M, H)` memory (only M is read).

    Returns:
        dict: `content_bias` float32 `(B, 1, L, K)` (0 or -1e30),
        `segment_diff` float32 `(B, 1, L, K)`; with `target_mapping` also
        `query_bias`, `query_segment_diff` `(B, 1, P, K)`, `query_shift`
        int32 `(B, 1, P, K)`, `query_valid` float32 `(B, 1, P, 1)`.
    """

    config_names = ("attn_type", "same_length")

    def __init__(self, attn_type="bi", same_length=False, **kwargs):
        super().__init__(**kwargs)
        if attn_type not in ("bi", "uni"):
            raise ValueError(
                f"`attn_type` must be 'bi' or 'uni'. Received: attn_type={attn_type!r}.")
        self.attn_type = attn_type
        self.same_length = same_length
        self.built = True

    def call(self, input_mask, input_type_ids, perm_mask=None, target_mapping=None,
             memory=None):
        batch, qlen = keras.ops.shape(input_type_ids)[0], keras.ops.shape(input_type_ids)[1]
        memory_length = 0 if memory is None else keras.ops.shape(memory)[1]
        klen = qlen + memory_length
        rows = _new_axis(keras.ops.arange(qlen), 1)  # (L, 1) query i
        cols = _new_axis(keras.ops.arange(klen), 0) - memory_length  # (1, K) key j - M
        blocked = _new_axis(keras.ops.cast(input_mask, "float32"), 1)  # (B, 1, L)
        if perm_mask is not None:
            blocked = blocked + keras.ops.cast(perm_mask, "float32")  # (B, L, L)
        blocked = keras.ops.broadcast_to(blocked, (batch, qlen, qlen))  # (B, L, L)
        visible = keras.ops.zeros((batch, qlen, memory_length), "float32")  # memory: all seen
        blocked = keras.ops.concatenate([visible, blocked], axis=-1) > 0  # (B, L, K)
        if self.attn_type == "uni":
            future = cols > rows  # (L, K)
            if self.same_length:
                future = keras.ops.logical_or(future, cols < rows - memory_length)
            blocked = keras.ops.logical_or(blocked, _new_axis(future, 0))
        itself = _new_axis(keras.ops.equal(cols, rows), 0)  # (1, L, K)
        content_blocked = keras.ops.logical_and(blocked, keras.ops.logical_not(itself))
        types = keras.ops.cast(input_type_ids, "int32")
        key_types = keras.ops.concatenate(
            [keras.ops.zeros((batch, memory_length), "int32"), types], axis=1)  # (B, K)
        diff = keras.ops.not_equal(_new_axis(types, 2), _new_axis(key_types, 1))  # (B, L, K)
        masks = {
            "content_bias": _new_axis(self._bias(content_blocked), 1),  # (B, 1, L, K)
            "segment_diff": _new_axis(keras.ops.cast(diff, "float32"), 1),  # (B, 1, L, K)
        }
        if target_mapping is None:
            return masks
        mapping = keras.ops.cast(target_mapping, "float32")  # (B, P, L)
        position = keras.ops.cast(keras.ops.argmax(mapping, axis=-1), "int32")  # (B, P)
        pick = _new_axis(position, 2)  # (B, P, 1)
        rlen = klen + qlen if self.attn_type == "bi" else klen + 1
        shift = qlen - pick + _new_axis(keras.ops.arange(klen, dtype="int32"), (0, 1))  # (B, P, K)
        masks.update(
            query_bias=_new_axis(keras.ops.take_along_axis(self._bias(blocked), pick, axis=1), 1),
            query_segment_diff=_new_axis(keras.ops.take_along_axis(
                keras.ops.cast(diff, "float32"), pick, axis=1), 1),  # (B, 1, P, K)
            query_shift=_new_axis(keras.ops.clip(shift, 0, rlen - 1), 1),  # (B, 1, P, K)
            query_valid=_new_axis(keras.ops.sum(mapping, axis=-1), (1, 3)),  # (B, 1, P, 1)
        )
        return masks

    @staticmethod
    def _bias(blocked):
        return keras.ops.where(blocked, MASK_VALUE, 0.0)
