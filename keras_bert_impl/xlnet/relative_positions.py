"""Transformer-XL's sinusoidal relative position encoding, as XLNet uses it."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig

# L=query length (this segment), M=memory length, K=M + L keys,
# R=relative positions (K + L for "bi", K + 1 for "uni"), H=d_model,
# S=position streams (2 with bi_data: forward and backward, else 1)


def relative_position_sequence(qlen, klen, attn_type, clamp_len=-1):
    """The relative distances column c of the position scores stands for.

    As the original `relative_positional_encoding`: `klen, klen - 1, ...`
    down to `-qlen + 1` for "bi" (R = klen + qlen) and down to 0 for "uni"
    (R = klen + 1). After `rel_shift`, query i and key j (memory first)
    read column `qlen - i + j`, i.e. distance `mlen + i - j`. With
    `clamp_len > 0`, distances are clipped to `[-clamp_len, clamp_len]`.

    Args:
        qlen: int or scalar tensor. L.
        klen: int or scalar tensor. K.
        attn_type: str. "bi" or "uni".
        clamp_len: int. <= 0: no clamping.

    Returns:
        float32 `(R,)`.
    """
    end = -qlen if attn_type == "bi" else -1
    positions = keras.ops.cast(keras.ops.arange(klen, end, -1), "float32")  # (R,)
    if clamp_len > 0:
        positions = keras.ops.clip(positions, -float(clamp_len), float(clamp_len))
    return positions


def sinusoid_encoding(positions, d_model):
    """`[sin(p * f), cos(p * f)]` with `f_i = 1 / 10000^(2i / d_model)`.

    Args:
        positions: float32 `(..., R)`.
        d_model: int. H, even.

    Returns:
        float32 `(..., R, H)`: the d_model / 2 sines, then the cosines.
    """
    exponents = keras.ops.arange(0, d_model, 2, dtype="float32") / float(d_model)  # (H/2,)
    inv_freq = 1.0 / keras.ops.power(10000.0, exponents)  # (H/2,)
    angles = keras.ops.expand_dims(positions, -1) * inv_freq  # (..., R, H/2); no [..., None]: LiteRT
    return keras.ops.concatenate([keras.ops.sin(angles), keras.ops.cos(angles)], axis=-1)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class RelativePositionEncoding(NamedConfig, keras.layers.Layer):
    """The sinusoids of every relative distance a segment's attention needs.

    Transformer-XL (Dai et al. 2019, Sec. 3.3) as XLNet's
    `relative_positional_encoding`: no learned positions; attention reads
    these through its `r` projection. With `bi_data`, XLNet's pretraining
    feeds each text forwards in the first half of the batch and backwards
    in the second; the second stream's distances are the exact negations.

    Args:
        d_model: int. H, even.
        attn_type: str. "bi" or "uni" (see `relative_position_sequence`).
        bi_data: bool. Also return the negated (backward) stream.
        clamp_len: int. <= 0: no clamping.

    Call arguments:
        content: `(B, L, H)`: the segment (only its length is read).
        memory: optional `(B, M, H)` memory (only its length is read).

    Returns:
        `(S, R, H)` in the layer's compute dtype: S = 2 (forward, then
        backward) with `bi_data`, else 1.

    Example:
    >>> RelativePositionEncoding(12, "bi", False, -1)(np.zeros((3, 7, 12))).shape
    TensorShape([1, 14, 12])
    """

    config_names = ("d_model", "attn_type", "bi_data", "clamp_len")

    def __init__(self, d_model, attn_type="bi", bi_data=False, clamp_len=-1, **kwargs):
        super().__init__(**kwargs)
        if attn_type not in ("bi", "uni"):
            raise ValueError(
                f"`attn_type` must be 'bi' or 'uni'. Received: attn_type={attn_type!r}.")
        self.d_model = d_model
        self.attn_type = attn_type
        self.bi_data = bi_data
        self.clamp_len = clamp_len
        self.built = True

    def call(self, content, memory=None):
        qlen = keras.ops.shape(content)[1]
        klen = qlen if memory is None else qlen + keras.ops.shape(memory)[1]
        positions = relative_position_sequence(qlen, klen, self.attn_type, self.clamp_len)
        streams = [positions, -positions] if self.bi_data else [positions]
        encoding = sinusoid_encoding(keras.ops.stack(streams), self.d_model)  # (S, R, H)
        return keras.ops.cast(encoding, self.compute_dtype)

    def compute_output_shape(self, content_shape, memory_shape=None):
        return (2 if self.bi_data else 1, None, self.d_model)
