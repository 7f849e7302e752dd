"""`XLNetBlock`: one XLNet layer (relative attention + feed-forward, post-LN)."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.speed.fast_dropout import FastDropout
from keras_bert_impl.speed.fast_layer_norm import FastLayerNormalization
from keras_bert_impl.xlnet.relative_attention import RelativeAttention
from keras_bert_impl.xlnet.xlnet_config import ACTIVATIONS

# B=batch, L=sequence, P=predicted positions, T=L or P, H=d_model, I=d_inner


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class XLNetBlock(NamedConfig, keras.layers.Layer):
    """Relative attention and a feed-forward network, each residual + LayerNorm.

    The original `two_stream_rel_attn` + `positionwise_ffn`: `x = LN(x +
    Dropout(RelAttn(x)))`, `x = LN(x + Dropout(W2 Dropout(act(W1 x))))`,
    post-LN with epsilon 1e-12. The query stream, when given, goes through
    the same attention (its own queries, the content stream's keys) and the
    same feed-forward weights.

    Args:
        d_model: int. H.
        n_head: int. Attention heads.
        d_head: int. Width of each head.
        d_inner: int. Feed-forward width (I).
        ff_activation: str. "gelu", "gelu_new" or "relu" (`XLNetConfig`).
        dropout: float. Dropout on attention weights, both sublayer
            outputs and the feed-forward activations.
        layer_norm_eps: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the normal init.

    Call arguments:
        content: `(B, L, H)`.
        positions, biases, masks, memory: as `RelativeAttention`.
        query: optional `(B, P, H)`, the query stream.
        training: bool.

    Returns:
        content `(B, L, H)`; with `query`, the pair `(content, query
        (B, P, H))`.
    """

    config_names = ("d_model", "n_head", "d_head", "d_inner", "ff_activation", "dropout",
                    "layer_norm_eps", "initializer_range")

    def __init__(
        self,
        d_model,
        n_head,
        d_head,
        d_inner,
        ff_activation="gelu",
        dropout=0.0,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if ff_activation not in ACTIVATIONS:
            raise ValueError(f"`ff_activation` must be one of {sorted(ACTIVATIONS)}. "
                             f"Received: ff_activation={ff_activation!r}.")
        self.d_model = d_model
        self.n_head = n_head
        self.d_head = d_head
        self.d_inner = d_inner
        self.ff_activation = ff_activation
        self.dropout = dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        init = keras.initializers.RandomNormal(stddev=initializer_range)
        policy = self.dtype_policy
        self.rel_attn = RelativeAttention(d_model, n_head, d_head, dropout, initializer_range,
                                          dtype=policy, name="rel_attn")
        self.attention_dropout = FastDropout(dropout, dtype=policy, name="attention_dropout")
        self.attention_layer_norm = FastLayerNormalization(
            epsilon=layer_norm_eps,
            dtype="float32",  # numerically sensitive: float32 under mixed precision
            name="attention_layer_norm",
        )
        self.layer_1 = keras.layers.Dense(
            d_inner, activation=get_activation(ACTIVATIONS[ff_activation]),
            kernel_initializer=init, dtype=policy, name="layer_1")
        self.inner_dropout = FastDropout(dropout, dtype=policy, name="inner_dropout")
        self.layer_2 = keras.layers.Dense(d_model, kernel_initializer=init, dtype=policy,
                                          name="layer_2")
        self.output_dropout = FastDropout(dropout, dtype=policy, name="output_dropout")
        self.output_layer_norm = FastLayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="output_layer_norm")

    def build(self, content_shape):
        shape = (None, None, self.d_model)
        self.rel_attn.build(shape)
        self.attention_layer_norm.build(shape)
        self.layer_1.build((None, self.d_model))
        self.layer_2.build((None, self.d_inner))
        self.output_layer_norm.build(shape)
        self.built = True

    def call(self, content, positions, biases, masks, memory=None, query=None, training=None):
        content_attn, query_attn = self.rel_attn(
            content, positions, biases, masks, memory=memory, query=query, training=training)
        content = self._feed_forward(self._residual(content, content_attn, training), training)
        if query is None:
            return content
        return content, self._feed_forward(self._residual(query, query_attn, training), training)

    def _residual(self, x, attention, training):
        x = self.attention_layer_norm(x + self.attention_dropout(attention, training=training))
        return keras.ops.cast(x, self.compute_dtype)

    def _feed_forward(self, x, training):
        shape = keras.ops.shape(x)
        # 2-D (B*T, .) Dense layers: grappler fuses MatMul + BiasAdd (+ ReLU/GELU).
        y = self.layer_1(keras.ops.reshape(x, (-1, self.d_model)))  # (B*T, I)
        y = self.layer_2(self.inner_dropout(y, training=training))  # (B*T, H)
        y = self.output_dropout(keras.ops.reshape(y, shape), training=training)  # (B, T, H)
        return keras.ops.cast(self.output_layer_norm(x + y), self.compute_dtype)

    def compute_output_spec(self, content, positions, biases, masks, memory=None, query=None,
                            training=None):
        out = keras.KerasTensor(content.shape, dtype=self.compute_dtype)
        if query is None:
            return out
        return out, keras.KerasTensor(query.shape, dtype=self.compute_dtype)
