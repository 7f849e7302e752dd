"""`TransformerEncoder`: one post-LN Transformer block, as in BERT."""

import keras

from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.layers.select_positions import select_positions
from keras_bert_impl.layers.self_attention import SelfAttention
from keras_bert_impl.speed.fast_dropout import FastDropout
from keras_bert_impl.speed.fast_layer_norm import FastLayerNormalization
from keras_bert_impl.speed.head_branches import current_head_branch_weights
from keras_bert_impl.speed.head_branches import encoder_in_head_branches
from keras_bert_impl.speed.row_branches import current_row_branches
from keras_bert_impl.speed.row_branches import encoder_in_row_branches

# B=batch, S=sequence, Q=selected positions, H=hidden, I=intermediate



@keras.saving.register_keras_serializable(package="keras_bert_impl")
class TransformerEncoder(NamedConfig, keras.layers.Layer):
    """Self-attention and feed-forward sublayers, each residual + LayerNorm.

    "Attention Is All You Need" Sec. 3.1 with the post-LayerNorm placement
    BERT uses: `x = LN(x + Dropout(Attn(x)))`, `x = LN(x + Dropout(FFN(x)))`.

    Args:
        hidden_size: int. Width of every hidden state (H).
        num_attention_heads: int. Attention heads; must divide H.
        intermediate_size: int. Width of the feed-forward layer (I).
        hidden_act: str. "gelu", "gelu_tanh" or "relu".
        hidden_dropout_prob: float. Dropout on both sublayer outputs.
        attention_probs_dropout_prob: float. Dropout on attention weights.
        initializer_range: float. Stddev of the truncated normal init.
        layer_norm_eps: float. LayerNorm epsilon.
        causal: bool. Left-to-right attention (GPT; BERT's LTR ablation).

    Call arguments:
        inputs: float `(B, S, H)`.
        input_mask: int `(B, S)`, 1 for real tokens and 0 for padding.
        query_positions: optional int `(B, Q)`: compute the block's output
            only at these positions (attending to all of them), e.g. [CLS]
            and the masked positions in the last block of a pretrainer,
            whose heads read nothing else. Equal to gathering the full
            output at those rows, for a fraction of the work.
        training: bool. Applies dropout when True.

    Returns:
        `(B, S, H)`, or `(B, Q, H)` with `query_positions`.

    Example:
    >>> block = TransformerEncoder(12, 3, 37, "gelu")
    >>> block(np.ones((3, 7, 12)), np.ones((3, 7), "int32")).shape
    (3, 7, 12)
    """

    config_names = ("hidden_size", "num_attention_heads", "intermediate_size", "hidden_act",
                    "hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range",
                    "layer_norm_eps", "causal")

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        causal=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.causal = causal
        init = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.attention = SelfAttention(
            hidden_size,
            num_attention_heads,
            attention_probs_dropout_prob,
            initializer_range,
            causal,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.attention_dropout = FastDropout(hidden_dropout_prob, dtype=self.dtype_policy)
        self.attention_layer_norm = FastLayerNormalization(
            epsilon=layer_norm_eps,
            dtype="float32",  # numerically sensitive: float32 under mixed precision
            name="attention_layer_norm",
        )
        self.intermediate_dense = keras.layers.Dense(
            intermediate_size,
            activation=get_activation(hidden_act),
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="intermediate_dense",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy, name="output_dense"
        )
        self.output_dropout = FastDropout(hidden_dropout_prob, dtype=self.dtype_policy)
        self.output_layer_norm = FastLayerNormalization(
            epsilon=layer_norm_eps, dtype="float32", name="output_layer_norm"
        )

    def build(self, inputs_shape, input_mask_shape=None):
        self.attention.build(inputs_shape)
        self.attention_layer_norm.build(inputs_shape)
        self.intermediate_dense.build((None, self.hidden_size))
        self.output_dense.build((None, self.intermediate_size))
        self.output_layer_norm.build(inputs_shape)
        self.built = True

    def call(self, inputs, input_mask, query_positions=None, training=None):
        if training or query_positions is not None:
            return self._call(inputs, input_mask, query_positions, training)
        weights = current_head_branch_weights(self)
        if weights is not None:
            return encoder_in_head_branches(self, inputs, input_mask, weights)
        return self._inference_call(inputs, input_mask, training)

    def _inference_call(self, inputs, input_mask, training=None):
        """`call` on all positions outside training: in row branches when
        traced in `traced_in_row_branches`, else as one graph."""
        branches = current_row_branches()
        if branches > 1:
            return encoder_in_row_branches(self, inputs, input_mask, branches)
        return self._call(inputs, input_mask, None, training)

    def _call(self, inputs, input_mask, query_positions=None, training=None):
        """`call` as one graph."""
        queries = None
        if query_positions is not None:
            queries = select_positions(inputs, query_positions)  # (B, Q, H)
        x = self.attention(inputs, input_mask, query_inputs=queries, training=training)
        x = self.attention_dropout(x, training=training)
        x = self.attention_layer_norm((inputs if queries is None else queries) + x)
        return self._feed_forward(x, training)

    def _feed_forward(self, x, training=None):
        """The second sublayer on the first's output `x` `(B, S, H)`."""
        x = keras.ops.cast(x, self.compute_dtype)
        # 2-D (B*S, .) Dense layers: lets grappler fuse MatMul + BiasAdd + GELU.
        h = self.intermediate_dense(keras.ops.reshape(x, (-1, self.hidden_size)))  # (B*S, I)
        h = self.output_dense(h)  # (B*S, H)
        h = keras.ops.reshape(h, keras.ops.shape(x))  # (B, S, H)
        h = self.output_dropout(h, training=training)
        h = self.output_layer_norm(x + h)
        return keras.ops.cast(h, self.compute_dtype)

    def compute_output_shape(self, inputs_shape, input_mask_shape=None,
                             query_positions_shape=None):
        if query_positions_shape is None:
            return inputs_shape
        return tuple(query_positions_shape) + (inputs_shape[-1],)


def encoder_blocks(model):
    """Every `TransformerEncoder` in `model` (a layer or model), in the order
    its layers were added (Keras' `_flatten_layers` lists the last first)."""
    found, seen = [], set()

    def walk(layer):
        if id(layer) in seen:
            return
        seen.add(id(layer))
        if isinstance(layer, TransformerEncoder):
            found.append(layer)
            return
        for sublayer in layer._layers:
            walk(sublayer)

    walk(model)
    return found
