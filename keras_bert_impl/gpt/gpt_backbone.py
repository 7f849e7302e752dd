"""`GptBackbone`: OpenAI GPT's decoder as a functional Keras model."""

import keras

from keras_bert_impl.base.backbone import backbone_config
from keras_bert_impl.base.backbone import dtype_policy_of
from keras_bert_impl.base.backbone import keep_config
from keras_bert_impl.base.backbone import run_blocks
from keras_bert_impl.base.backbone import sequence_inputs
from keras_bert_impl.base.sequence_checks import check_sequence_inputs
from keras_bert_impl.gpt.gpt_config import AFNS
from keras_bert_impl.gpt.gpt_config import GptConfig
from keras_bert_impl.gpt.gpt_embeddings import GptEmbeddings
from keras_bert_impl.layers.tied_word_embedding import TiedWordEmbedding
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder

# B=batch, S=sequence, H=hidden, V=vocab

INPUT_NAMES = ("input_word_ids", "input_mask")


def check_gpt_inputs(inputs, config, extra_names=()):
    """Clear `ValueError`s for inputs GPT would get silently wrong (see
    `check_sequence_inputs`): names, int dtype, rank 2, one shape, length
    at most `n_positions`, and concrete ids inside the vocabulary."""
    check_sequence_inputs(
        inputs, INPUT_NAMES, config.n_positions, "n_positions",
        [("input_word_ids", config.vocab_size, "vocab_size"),
         ("input_mask", 2, "2 (mask values are 0 or 1)")],
        extra_names=extra_names, family="GPT")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GptBackbone(keras.Model):
    """OpenAI GPT (Radford et al. 2018): a left-to-right Transformer decoder.

    The token and learned position embeddings are summed (no LayerNorm),
    then L post-LN blocks, the same `TransformerEncoder` BERT uses with
    `causal=True` (LayerNorm epsilon 1e-5, fused QKV, GELU in its tanh form).
    The LM head is the token-embedding table itself (`lm_logits = h E^T`),
    as the original and Hugging Face's `OpenAIGPTLMHeadModel`. Right
    padding: a position never attends to later ones, so padding after the
    text changes nothing before it; `input_mask` also hides padded keys.

    Arguments are the Hugging Face `config.json` keys; build one from a
    `GptConfig` with `GptBackbone.from_config_object(config)`.

    Args:
        vocab_size: int. Token-embedding rows (V).
        n_positions: int. Longest sequence accepted.
        n_embd: int. Width of every hidden state (H).
        n_layer: int. Transformer blocks (L).
        n_head: int. Attention heads; must divide H.
        afn: str. "gelu" (tanh form) or "relu".
        resid_pdrop: float. Dropout on sublayer outputs.
        embd_pdrop: float. Dropout on the embeddings.
        attn_pdrop: float. Dropout on attention weights.
        layer_norm_epsilon: float. LayerNorm epsilon.
        initializer_range: float. Stddev of the init.
        dtype: str or `keras.DTypePolicy`, e.g. "mixed_bfloat16".

    Call arguments:
        inputs: dict of int32 `(B, S)` tensors `input_word_ids`, `input_mask`.

    Returns:
        dict: `sequence_output` `(B, S, H)`, `lm_logits` float32 `(B, S, V)`
        (the next-token scores at every position), `encoder_outputs` list
        of L `(B, S, H)`.

    Example:
    >>> backbone = GptBackbone.from_config_object(gpt_preset("gpt_tiny"))
    >>> ids = np.ones((3, 7), "int32")
    >>> backbone({"input_word_ids": ids, "input_mask": ids})["lm_logits"].shape
    TensorShape([3, 7, 8000])
    """

    def __init__(
        self,
        vocab_size,
        n_positions,
        n_embd,
        n_layer,
        n_head,
        afn="gelu",
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,
        layer_norm_epsilon=1e-5,
        initializer_range=0.02,
        dtype=None,
        **kwargs,
    ):
        config = GptConfig(
            vocab_size=vocab_size,
            n_positions=n_positions,
            n_embd=n_embd,
            n_layer=n_layer,
            n_head=n_head,
            afn=afn,
            resid_pdrop=resid_pdrop,
            embd_pdrop=embd_pdrop,
            attn_pdrop=attn_pdrop,
            layer_norm_epsilon=layer_norm_epsilon,
            initializer_range=initializer_range,
        )  # validates every value
        policy = dtype_policy_of(dtype)
        self._create_layers(config, policy)
        inputs = sequence_inputs(INPUT_NAMES)
        super().__init__(inputs=inputs, outputs=self._graph_outputs(inputs), **kwargs)
        keep_config(self, policy, "gpt_config", config, config.to_dict())

    def _create_layers(self, config, policy):
        self.token_embedding = TiedWordEmbedding(
            config.vocab_size,
            config.n_embd,
            embeddings_initializer=keras.initializers.RandomNormal(
                stddev=config.initializer_range),
            dtype=policy,
            name="token_embedding",
        )
        self.embeddings = GptEmbeddings(
            config.n_positions, config.n_embd, config.embd_pdrop, config.initializer_range,
            dtype=policy, name="embeddings"
        )
        self.decoder_layers = [
            TransformerEncoder(
                config.n_embd,
                config.n_head,
                config.intermediate_size,
                AFNS[config.afn],
                config.resid_pdrop,
                config.attn_pdrop,
                config.initializer_range,
                config.layer_norm_epsilon,
                causal=True,
                dtype=policy,
                name=f"decoder_layer_{i}",
            )
            for i in range(config.n_layer)
        ]

    def _graph_outputs(self, inputs):
        """The functional graph: embeddings, the blocks, the tied LM head."""
        x = self.embeddings(self.token_embedding(inputs["input_word_ids"]))  # (B, S, H)
        encoder_outputs = run_blocks(self.decoder_layers, x, inputs["input_mask"])
        x = encoder_outputs[-1]
        logits = self.token_embedding(x, reverse=True)  # (B, S, V)
        return {
            "sequence_output": x,
            "lm_logits": keras.ops.cast(logits, "float32"),
            "encoder_outputs": encoder_outputs,
        }

    @classmethod
    def from_config_object(cls, config, **kwargs):
        """A backbone of the shape a `GptConfig` describes."""
        return cls(**config.to_dict(), **kwargs)

    def call(self, inputs, training=None, mask=None):
        check_gpt_inputs(inputs, self.gpt_config)
        return super().call(inputs, training=training, mask=mask)

    def get_config(self):
        return backbone_config(self, self.gpt_config.to_dict())

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def grow_vocabulary(backbone, new_tokens):
    """A copy of `backbone` with `new_tokens` more token-embedding rows.

    GPT's fine-tuning appends `_start_`, `_delimiter_` and `_classify_`
    (ids V, V+1, V+2) and learns their embeddings; the original initialises
    every row N(0, 0.02), so the new rows are drawn that way. Every other
    weight is copied.
    """
    config = backbone.gpt_config
    grown = GptBackbone.from_config_object(
        config.replace(vocab_size=config.vocab_size + new_tokens),
        dtype=backbone.dtype_policy)
    old = keras.ops.convert_to_numpy(backbone.token_embedding.embeddings)
    fresh = keras.ops.convert_to_numpy(grown.token_embedding.embeddings)[config.vocab_size:]
    grown.token_embedding.embeddings.assign(keras.ops.concatenate([old, fresh], axis=0))
    table = backbone.token_embedding.embeddings
    for src, dst in zip(backbone.weights, grown.weights):
        if src is not table:
            dst.assign(src)
    return grown
