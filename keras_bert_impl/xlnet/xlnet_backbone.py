"""`XLNetBackbone`: XLNet's Transformer-XL encoder as a functional Keras model."""

import keras
import numpy as np

from keras_bert_impl.base.backbone import backbone_config
from keras_bert_impl.base.backbone import dtype_policy_of
from keras_bert_impl.base.backbone import keep_config
from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.base.sequence_checks import check_sequence_inputs
from keras_bert_impl.layers.tied_word_embedding import TiedWordEmbedding
from keras_bert_impl.speed.fast_dropout import FastDropout
from keras_bert_impl.xlnet.relative_attention import RelativeAttentionBiases
from keras_bert_impl.xlnet.relative_positions import RelativePositionEncoding
from keras_bert_impl.xlnet.xlnet_attention_masks import XLNetAttentionMasks
from keras_bert_impl.xlnet.xlnet_block import XLNetBlock
from keras_bert_impl.xlnet.xlnet_config import XLNetConfig

# B=batch, L=sequence, P=predicted positions, M=memory length, H=d_model,
# V=vocab, n=n_layer

BASE_INPUTS = ("input_word_ids", "input_type_ids", "input_mask")
TWO_STREAM_INPUTS = ("perm_mask", "target_mapping")
MEMORY_INPUT = "mems"


def xlnet_input_names(config, two_stream=False):
    """The backbone's input names for a config (and stream mode)."""
    return (BASE_INPUTS + (TWO_STREAM_INPUTS if two_stream else ())
            + ((MEMORY_INPUT,) if config.uses_memory else ()))


def _values(x):
    """The numpy value of an array or eager tensor; None when symbolic."""
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x.numpy())
    except (AttributeError, NotImplementedError, ValueError, TypeError):
        return None


def check_xlnet_inputs(inputs, config, two_stream=False):
    """Clear `ValueError`s for inputs XLNet would get silently wrong.

    Names; int ids of one `(B, L)` shape inside the vocabulary;
    `input_mask` `(B, L)` of 0/1 (1 = padding); `perm_mask` `(B, L, L)` and
    `target_mapping` `(B, P, L)` of 0/1 with at most one 1 per mapping row;
    `mems` `(B, n_layer, M, d_model)`; an even batch with `bi_data`.
    Values are checked when concrete (eager calls, numpy).
    """
    names = xlnet_input_names(config, two_stream)
    check_sequence_inputs(
        inputs, ("input_word_ids", "input_type_ids"), float("inf"), "no limit",
        [("input_word_ids", config.vocab_size, "vocab_size")],
        extra_names=names[2:], family="XLNet")
    batch, length = tuple(inputs["input_word_ids"].shape)
    expected = {"input_mask": (batch, length), "perm_mask": (batch, length, length),
                "target_mapping": (batch, None, length),
                "mems": (batch, config.n_layer, None, config.d_model)}
    for name in names[2:]:
        shape = tuple(inputs[name].shape)
        if len(shape) != len(expected[name]) or any(
                a is not None and b is not None and a != b
                for a, b in zip(shape, expected[name])):
            raise ValueError(
                f"`{name}` must have shape {expected[name]} (None: any) for input_word_ids of "
                f"shape {(batch, length)}. Received shape={shape}.")
        values = _values(inputs[name]) if name != "mems" else None
        if values is not None and values.size and not np.isin(values, (0, 1)).all():
            raise ValueError(f"`{name}` must hold only 0 and 1"
                             f"{' (1 = padding)' if name == 'input_mask' else ''}. "
                             f"Received values {np.unique(values)[:5].tolist()}.")
        if name == "target_mapping" and values is not None and values.size and (
                values.sum(-1).max() > 1):
            raise ValueError("Each row of `target_mapping` must pick at most one position "
                             f"(one-hot or all zero). Received a row summing to "
                             f"{values.sum(-1).max()}.")
    if config.bi_data and batch is not None and batch % 2:
        raise ValueError(
            "With bi_data=True the second half of the batch is the backward stream, so the "
            f"batch size must be even. Received a batch of {batch}.")


def cache_memory(memory, states, mem_len, reuse_len=None):
    """`stop_gradient(concat(memory, states[:, :reuse_len])[:, -mem_len:])`.

    A layer's next memory: its input states (the first `reuse_len` of the
    segment, or all), after the memory it already holds, keeping the last
    `mem_len`; no gradient flows into it (the original `_cache_mem`).

    Args:
        memory: `(B, M, H)` or None.
        states: `(B, L, H)`, the layer's input.
        mem_len: int > 0.
        reuse_len: int or None.

    Returns:
        `(B, min(M + reused, mem_len), H)`.
    """
    if reuse_len:
        states = states[:, :reuse_len]
    if memory is not None:
        states = keras.ops.concatenate([keras.ops.cast(memory, states.dtype), states], axis=1)
    return keras.ops.stop_gradient(states[:, -mem_len:])


def _backbone_inputs(config, two_stream):
    """`{name: keras.Input}` of a backbone of this config and stream mode."""
    inputs = {
        "input_word_ids": keras.Input((None,), dtype="int32", name="input_word_ids"),
        "input_type_ids": keras.Input((None,), dtype="int32", name="input_type_ids"),
        "input_mask": keras.Input((None,), dtype="float32", name="input_mask"),
    }
    if two_stream:
        inputs["perm_mask"] = keras.Input((None, None), dtype="float32", name="perm_mask")
        inputs["target_mapping"] = keras.Input((None, None), dtype="float32",
                                               name="target_mapping")
    if config.uses_memory:
        inputs[MEMORY_INPUT] = keras.Input((config.n_layer, None, config.d_model),
                                           dtype="float32", name=MEMORY_INPUT)
    return inputs


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MaskEmbedding(NamedConfig, keras.layers.Layer):
    """XLNet's learned `mask_emb` `(1, 1, H)`: where the query stream starts.

    Call arguments:
        target_mapping: `(B, P, L)` (only B and P are read).

    Returns:
        `(B, P, H)`, `mask_emb` at every predicted position.
    """

    config_names = ("d_model", "initializer_range")

    def __init__(self, d_model, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.initializer_range = initializer_range
        self.mask_emb = self.add_weight(
            name="mask_emb", shape=(1, 1, d_model),
            initializer=keras.initializers.RandomNormal(stddev=initializer_range))
        self.built = True

    def call(self, target_mapping):
        shape = keras.ops.shape(target_mapping)
        table = keras.ops.cast(self.mask_emb, self.compute_dtype)
        return keras.ops.broadcast_to(table, (shape[0], shape[1], self.d_model))  # (B, P, H)

    def compute_output_shape(self, target_mapping_shape):
        return tuple(target_mapping_shape[:2]) + (self.d_model,)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class XLNetBackbone(keras.Model):
    """XLNet (Yang et al. 2019): Transformer-XL with two-stream attention.

    The word embedding (no positions, no scaling), then `n_layer`
    `XLNetBlock`s with sinusoidal relative positions ("bi" or "uni",
    `clamp_len`, `bi_data`), relative segments, and post-LN. Inputs follow
    XLNet's conventions: `input_mask` is 1 for PADDING (BERT's is the
    inverse); fine-tuning pads on the left and puts `<cls>` last.

    With `two_stream=True` (pretraining) the query stream runs beside the
    content stream: it starts from `mask_emb` at each of the P positions
    `target_mapping` picks, cannot see its own token, and attends under
    `perm_mask` (1: i cannot attend to j) through the same weights.

    With `mem_len > 0` the model takes `mems` `(B, n_layer, M, H)` (M may be
    0 or any length; memory is never masked and counts as segment 0) and
    returns `new_mems`: per layer, the last `mem_len` of its memory
    followed by its input states (the first `reuse_len`, or all), with no
    gradient. Feed a segment's `new_mems` to the next segment.

    Arguments are the `XLNetConfig` fields (Hugging Face `config.json`
    keys); build one from a config with `XLNetBackbone.from_config_object`.

    Args:
        vocab_size: int. Word-embedding rows (V).
        d_model: int. Width of every hidden state (H); even.
        n_layer: int. Blocks.
        n_head: int. Attention heads.
        d_head: int or None. Width of each head (None: d_model // n_head).
        d_inner: int. Feed-forward width.
        ff_activation: str. "gelu" (exact), "gelu_new" (tanh form) or "relu".
        untie_r: bool. Per-block attention biases (else one shared set).
        attn_type: str. "bi" or "uni" (causal, Transformer-XL).
        bi_data: bool. Second half of the batch: negated positions.
        clamp_len: int. Clamp relative distances; -1: no clamping.
        same_length: bool. "uni" only: every query sees as many keys.
        mem_len: int or None. Memory per layer; None or 0: none.
        reuse_len: int or None. States of a segment cached (None: all).
        dropout: float. Every dropout (embeddings, positions, attention,
            sublayers).
        layer_norm_eps: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the normal init.
        two_stream: bool. Add the query stream (pretraining).
        dtype: str or `keras.DTypePolicy`, e.g. "mixed_bfloat16".

    Call arguments:
        inputs: dict of `input_word_ids` int32 `(B, L)`, `input_type_ids`
            int32 `(B, L)` (segment ids), `input_mask` float32 `(B, L)`
            (1 = padding); with `two_stream` also `perm_mask` float32
            `(B, L, L)` and `target_mapping` float32 `(B, P, L)` (one-hot
            rows; an all-zero row is an unused slot whose query output
            means nothing and must carry no loss); with `mem_len` also
            `mems` float32 `(B, n_layer, M, H)`.

    Returns:
        dict: `sequence_output` `(B, L, H)` (content stream);
        `encoder_outputs` list of n_layer `(B, L, H)`; with `two_stream`
        `query_output` `(B, P, H)`; with `mem_len` `new_mems`
        `(B, n_layer, min(M + reused, mem_len), H)`.

    Example:
    >>> backbone = XLNetBackbone.from_config_object(xlnet_preset("xlnet_debug"))
    >>> ids = np.ones((3, 7), "int32")
    >>> out = backbone({"input_word_ids": ids, "input_type_ids": 0 * ids,
    ...                 "input_mask": np.zeros((3, 7), "float32")})
    >>> out["sequence_output"].shape
    TensorShape([3, 7, 32])
    """

    def __init__(
        self,
        vocab_size,
        d_model,
        n_layer,
        n_head,
        d_head,
        d_inner,
        ff_activation="gelu",
        untie_r=True,
        attn_type="bi",
        bi_data=False,
        clamp_len=-1,
        same_length=False,
        mem_len=None,
        reuse_len=None,
        dropout=0.1,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        two_stream=False,
        dtype=None,
        **kwargs,
    ):
        config = XLNetConfig(
            vocab_size=vocab_size, d_model=d_model, n_layer=n_layer, n_head=n_head,
            d_head=d_head, d_inner=d_inner, ff_activation=ff_activation, untie_r=untie_r,
            attn_type=attn_type, bi_data=bi_data, clamp_len=clamp_len, same_length=same_length,
            mem_len=mem_len, reuse_len=reuse_len, dropout=dropout,
            layer_norm_eps=layer_norm_eps, initializer_range=initializer_range,
        )  # validates every value
        if not isinstance(two_stream, bool):
            raise ValueError(f"`two_stream` must be True or False. Received: {two_stream!r}.")
        policy = dtype_policy_of(dtype)
        self._create_layers(config, two_stream, policy)
        inputs = _backbone_inputs(config, two_stream)
        super().__init__(inputs=inputs, outputs=self._graph_outputs(inputs, config, two_stream),
                         **kwargs)
        keep_config(self, policy, "xlnet_config", config,
                    {"two_stream": two_stream, **config.to_dict()})

    def _create_layers(self, config, two_stream, policy):
        d_model, n_head, dropout = config.d_model, config.n_head, config.dropout
        initializer_range = config.initializer_range
        init = keras.initializers.RandomNormal(stddev=initializer_range)
        self.word_embedding = TiedWordEmbedding(
            config.vocab_size, d_model, embeddings_initializer=init, dtype=policy,
            name="word_embedding")
        self.mask_embedding = MaskEmbedding(d_model, initializer_range, dtype=policy,
                                            name="mask_embedding")
        # Kept (checkpoints and parameter counts include it) but frozen when
        # the query stream does not run: it would get no gradient.
        self.mask_embedding.trainable = two_stream
        self.embedding_dropout = FastDropout(dropout, dtype=policy, name="embedding_dropout")
        self.position_encoding = RelativePositionEncoding(
            d_model, config.attn_type, config.bi_data, config.clamp_len, dtype=policy,
            name="position_encoding")
        self.position_dropout = FastDropout(dropout, dtype=policy, name="position_dropout")
        self.attention_masks = XLNetAttentionMasks(
            config.attn_type, config.same_length, dtype="float32", name="attention_masks")
        # untie_r: one set of r_w, r_r, r_s biases per block; else one shared set.
        untie_r = config.untie_r
        self.attention_biases = [
            RelativeAttentionBiases(n_head, config.d_head, initializer_range, dtype=policy,
                                    name=f"attention_biases_{i}" if untie_r else "attention_biases")
            for i in range(config.n_layer if untie_r else 1)
        ]
        self.blocks = [
            XLNetBlock(d_model, n_head, config.d_head, config.d_inner, config.ff_activation,
                       dropout, config.layer_norm_eps, initializer_range, dtype=policy,
                       name=f"layer_{i}")
            for i in range(config.n_layer)
        ]
        self.output_dropout = FastDropout(dropout, dtype=policy, name="output_dropout")

    def _graph_outputs(self, inputs, config, two_stream):
        """The functional graph: embeddings, positions and masks, the blocks
        (both streams with `two_stream`), the memory they cache."""
        mems = inputs.get(MEMORY_INPUT)
        word = self.word_embedding(inputs["input_word_ids"])  # (B, L, H)
        content = self.embedding_dropout(word)
        first_memory = None if mems is None else mems[:, 0]  # (B, M, H)
        positions = self.position_dropout(self.position_encoding(content, first_memory))
        masks = self.attention_masks(
            inputs["input_mask"], inputs["input_type_ids"], inputs.get("perm_mask"),
            inputs.get("target_mapping"), first_memory)
        query = None
        if two_stream:
            query = self.embedding_dropout(self.mask_embedding(inputs["target_mapping"]))
        biases = [layer(word) for layer in self.attention_biases]  # (3, N, D) each
        encoder_outputs, new_mems = [], []
        for i, block in enumerate(self.blocks):
            memory = None if mems is None else mems[:, i]  # (B, M, H)
            if mems is not None:
                new_mems.append(cache_memory(memory, content, config.mem_len, config.reuse_len))
            bias = biases[i if config.untie_r else 0]
            if two_stream:
                content, query = block(content, positions, bias, masks, memory=memory,
                                       query=query)  # (B, L, H), (B, P, H)
            else:
                content = block(content, positions, bias, masks, memory=memory)  # (B, L, H)
            encoder_outputs.append(content)
        outputs = {
            "sequence_output": self.output_dropout(content),
            "encoder_outputs": encoder_outputs,
        }
        if two_stream:
            outputs["query_output"] = self.output_dropout(query)
        if mems is not None:
            outputs["new_mems"] = keras.ops.stack(new_mems, axis=1)  # (B, n, M', H)
        return outputs

    @classmethod
    def from_config_object(cls, config, **kwargs):
        """A backbone of the shape an `XLNetConfig` describes."""
        return cls(**config.to_dict(), **kwargs)

    def call(self, inputs, training=None, mask=None):
        check_xlnet_inputs(inputs, self.xlnet_config, self.two_stream)
        return super().call(inputs, training=training, mask=mask)

    def get_config(self):
        return backbone_config(self, {**self.xlnet_config.to_dict(),
                                      "two_stream": self.two_stream})

    @classmethod
    def from_config(cls, config):
        return cls(**config)
