"""`BertBackbone`: the BERT encoder as a functional Keras model."""

import keras

from keras_bert_impl.base.backbone import backbone_config
from keras_bert_impl.base.backbone import dtype_policy_of
from keras_bert_impl.base.backbone import keep_config
from keras_bert_impl.base.backbone import run_blocks
from keras_bert_impl.base.backbone import sequence_inputs
from keras_bert_impl.base.sequence_checks import check_sequence_inputs
from keras_bert_impl.bert.bert_config import BertConfig
from keras_bert_impl.bert.bert_embeddings import BertEmbeddings
from keras_bert_impl.bert.bert_pooler import BertPooler
from keras_bert_impl.layers.tied_word_embedding import TiedWordEmbedding
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def check_inputs(inputs, config, extra_names=()):
    """Raises a clear `ValueError` for inputs BERT would get silently wrong.

    Checks the names, integer dtype, rank 2, a common `(B, S)` shape and
    `S <= max_position_embeddings` whenever shapes are known; when values are
    concrete (eager calls, numpy), also that ids lie in the vocabulary and
    type ids in `[0, type_vocab_size)`. Inside a traced `tf.function` the
    values are not known; there TensorFlow's own gather still rejects
    out-of-range ids on CPU.
    """
    check_sequence_inputs(
        inputs, INPUT_NAMES, config.max_position_embeddings, "max_position_embeddings",
        [("input_word_ids", config.vocab_size, "vocab_size"),
         ("input_type_ids", config.type_vocab_size, "type_vocab_size"),
         ("input_mask", 2, "2 (mask values are 0 or 1)")],
        extra_names=extra_names, family="BERT")


def pooled_rows(x, input_mask, causal):
    """The rows the pooler reads: [CLS] at position 0, or under a causal
    mask (where [CLS] sees only itself) each row's last real token."""
    if not causal:
        return x  # the pooler reads position 0
    last = keras.ops.sum(input_mask, axis=1, keepdims=True) - 1  # (B, 1)
    return keras.ops.take_along_axis(x, keras.ops.maximum(last, 0)[:, :, None], axis=1)  # (B, 1, H)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertBackbone(keras.Model):
    """The BERT encoder: embeddings, L Transformer blocks and the pooler.

    Devlin et al. 2018, Sec. 3. Takes the three TF Hub inputs and returns
    `sequence_output` (the last block), `pooled_output` (the [CLS] vector
    through Dense + tanh) and `encoder_outputs` (every block, for
    feature-based use). Arguments are the `bert_config.json` keys; build one
    from a `BertConfig` with `BertBackbone.from_bert_config(config)`.

    Args:
        vocab_size: int. Rows of the word-embedding table (V).
        hidden_size: int. Width of every hidden state (H).
        num_hidden_layers: int. Transformer blocks (L).
        num_attention_heads: int. Attention heads (A); must divide H.
        intermediate_size: int. Width of the feed-forward layer.
        hidden_act: str. "gelu" (exact), "gelu_tanh" or "relu".
        hidden_dropout_prob: float. Dropout on embeddings and sublayers.
        attention_probs_dropout_prob: float. Dropout on attention weights.
        max_position_embeddings: int. Longest sequence accepted.
        type_vocab_size: int. Segment types.
        initializer_range: float. Stddev of the truncated normal init.
        layer_norm_eps: float. LayerNorm epsilon.
        causal: bool. Left-to-right attention in every block: the paper's
            "LTR & No NSP" ablation (Sec. 5.1). Under a causal mask [CLS] at
            position 0 sees nothing but itself, so `pooled_output` then
            reads the last non-padding token instead (the extract-token
            convention of OpenAI GPT). Not a `bert_config.json` key: the
            converters write the weights, not this flag.
        dtype: str or `keras.DTypePolicy`, e.g. "mixed_bfloat16".

    Call arguments:
        inputs: dict of int32 `(B, S)` tensors `input_word_ids`,
            `input_mask`, `input_type_ids`.

    Returns:
        dict: `sequence_output` `(B, S, H)`, `pooled_output` `(B, H)`,
        `encoder_outputs` list of L `(B, S, H)`.

    Example:
    >>> backbone = BertBackbone.from_bert_config(preset("tiny"))
    >>> ids = np.ones((3, 7), "int32")
    >>> out = backbone({"input_word_ids": ids, "input_mask": ids,
    ...                 "input_type_ids": 0 * ids})
    >>> out["sequence_output"].shape
    TensorShape([3, 7, 128])
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        num_hidden_layers,
        num_attention_heads,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        causal=False,
        dtype=None,
        **kwargs,
    ):
        config = BertConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            intermediate_size=intermediate_size,
            hidden_act=hidden_act,
            hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size,
            initializer_range=initializer_range,
            layer_norm_eps=layer_norm_eps,
        )  # validates every value
        policy = dtype_policy_of(dtype)
        self._create_layers(config, causal, policy)
        inputs = sequence_inputs(INPUT_NAMES)
        super().__init__(inputs=inputs, outputs=self._graph_outputs(inputs, causal), **kwargs)
        keep_config(self, policy, "bert_config", config, {"causal": causal, **config.to_dict()})

    def _create_layers(self, config, causal, policy):
        self.word_embedding = TiedWordEmbedding(
            config.vocab_size,
            config.hidden_size,
            embeddings_initializer=keras.initializers.TruncatedNormal(
                stddev=config.initializer_range),
            dtype=policy,
            name="word_embeddings",
        )
        self.embeddings = BertEmbeddings(
            config.max_position_embeddings,
            config.type_vocab_size,
            config.hidden_size,
            config.hidden_dropout_prob,
            config.initializer_range,
            config.layer_norm_eps,
            dtype=policy,
            name="embeddings",
        )
        self.encoder_layers = [
            TransformerEncoder(
                config.hidden_size,
                config.num_attention_heads,
                config.intermediate_size,
                config.hidden_act,
                config.hidden_dropout_prob,
                config.attention_probs_dropout_prob,
                config.initializer_range,
                config.layer_norm_eps,
                causal,
                dtype=policy,
                name=f"encoder_layer_{i}",
            )
            for i in range(config.num_hidden_layers)
        ]
        self.pooler = BertPooler(
            config.hidden_size, config.initializer_range, dtype=policy, name="pooler")

    def _graph_outputs(self, inputs, causal):
        """The functional graph: embeddings, the blocks, the pooler."""
        x = self.embeddings(
            self.word_embedding(inputs["input_word_ids"]), inputs["input_type_ids"]
        )  # (B, S, H)
        encoder_outputs = run_blocks(self.encoder_layers, x, inputs["input_mask"])
        x = encoder_outputs[-1]
        return {
            "sequence_output": x,
            "pooled_output": self.pooler(pooled_rows(x, inputs["input_mask"], causal)),  # (B, H)
            "encoder_outputs": encoder_outputs,
        }

    @classmethod
    def from_bert_config(cls, config, **kwargs):
        """A backbone of the shape a `BertConfig` describes."""
        return cls(**config.to_dict(), **kwargs)

    def call(self, inputs, training=None, mask=None):
        check_inputs(inputs, self.bert_config)
        return super().call(inputs, training=training, mask=mask)

    def get_config(self):
        return backbone_config(self, {"causal": self.causal, **self.bert_config.to_dict()})

    @classmethod
    def from_config(cls, config):
        return cls(**config)
