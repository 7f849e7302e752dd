"""`BertConfig`: the original `bert_config.json`, as a frozen dataclass.

Field names are the original Google keys, so a released `bert_config.json`
loads without translation. Presets follow the paper (BASE, LARGE) and the
"Well-Read Students Learn Better" compact models (TINY .. MEDIUM) that Google
released beside it.
"""

import dataclasses

from keras_bert_impl.base.model_config import ModelConfig

HIDDEN_ACTS = ("gelu", "gelu_tanh", "relu")

# Hugging Face spellings of the activations we support, to ours.
_HF_HIDDEN_ACTS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
}


@dataclasses.dataclass(frozen=True)
class BertConfig(ModelConfig):
    """Hyper-parameters of a BERT backbone; the original config keys.

    Args:
        vocab_size: int. Rows of the word-embedding table.
        hidden_size: int. Width of every hidden state (H).
        num_hidden_layers: int. Transformer blocks (L).
        num_attention_heads: int. Attention heads (A); must divide H.
        intermediate_size: int. Width of the feed-forward layer (4H).
        hidden_act: str. "gelu" (exact erf form, as Hugging Face checkpoints
            are evaluated) or "gelu_tanh" (the tanh approximation the
            original TF code computes) or "relu".
        hidden_dropout_prob: float. Dropout on embeddings and sublayer
            outputs.
        attention_probs_dropout_prob: float. Dropout on attention weights.
        max_position_embeddings: int. Longest sequence the model accepts.
        type_vocab_size: int. Segment types (2: sentence A and B).
        initializer_range: float. Stddev of the truncated normal init.
        layer_norm_eps: float. LayerNorm epsilon; 1e-12 matches the
            original checkpoints.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"`{name}` must be a positive integer. Received: {name}={value!r}."
                )
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                "`hidden_size` must be divisible by `num_attention_heads`. "
                f"Received: hidden_size={self.hidden_size}, "
                f"num_attention_heads={self.num_attention_heads}."
            )
        if self.hidden_act not in HIDDEN_ACTS:
            raise ValueError(
                f"`hidden_act` must be one of {HIDDEN_ACTS}. "
                f"Received: hidden_act={self.hidden_act!r}."
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(
                    f"`{name}` must be in [0, 1). Received: {name}={value!r}."
                )

    # The longest sequence the model takes, and the key that says it
    # (`keras_bert_impl.base.sequence_checks.check_fits_positions`).
    MAX_LENGTH_FIELD = "max_position_embeddings"

    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values, source="config"):
        """Builds a config from the original keys; unknown keys are an error.

        Hugging Face `config.json` extras (`model_type`, `architectures`, ...)
        are not BERT hyper-parameters; `from_hf_dict` drops them.
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ValueError(
                f"Unknown BERT config keys in {source}: {unknown}. "
                f"Known keys: {sorted(fields)}."
            )
        return cls(**values)

    @classmethod
    def from_hf_dict(cls, values, source="config.json"):
        """Builds a config from a Hugging Face `config.json` dict."""
        fields = {f.name for f in dataclasses.fields(cls)}
        kept = {k: v for k, v in values.items() if k in fields}
        act = kept.get("hidden_act", "gelu")
        if act not in _HF_HIDDEN_ACTS:
            raise ValueError(
                f"Unsupported `hidden_act` in {source}: {act!r}. "
                f"Supported: {sorted(_HF_HIDDEN_ACTS)}."
            )
        kept["hidden_act"] = _HF_HIDDEN_ACTS[act]
        position_type = values.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ValueError(
                f"Only absolute position embeddings are BERT's. Received "
                f"position_embedding_type={position_type!r} in {source}."
            )
        return cls(**kept)

    def to_hf_dict(self):
        """The Hugging Face `config.json` form of this config."""
        values = self.to_dict()
        values["hidden_act"] = {"gelu_tanh": "gelu_new"}.get(
            self.hidden_act, self.hidden_act
        )
        values.update(
            model_type="bert",
            architectures=["BertModel"],
            position_embedding_type="absolute",
            pad_token_id=0,
        )
        return values


def _preset(num_hidden_layers, hidden_size, num_attention_heads):
    return BertConfig(
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        intermediate_size=4 * hidden_size,
    )


PRESETS = {
    "tiny": _preset(2, 128, 2),
    "mini": _preset(4, 256, 4),
    "small": _preset(4, 512, 8),
    "medium": _preset(8, 512, 8),
    "base": _preset(12, 768, 12),
    "large": _preset(24, 1024, 16),
}


def preset(name):
    """The `BertConfig` of a named preset ("tiny" .. "large")."""
    if name not in PRESETS:
        raise ValueError(
            f"Unknown preset {name!r}. Available: {sorted(PRESETS)}."
        )
    return PRESETS[name]


def num_parameters(config):
    """Parameters of the backbone (embeddings + encoder + pooler).

    This is what the paper counts: BERT-BASE 109,482,240 (its "110M") and
    BERT-LARGE 335,141,888 (its "340M") with the 30,522-token uncased vocab.
    The pretraining heads are not counted (the MLM decoder is tied).
    """
    h, i = config.hidden_size, config.intermediate_size
    embeddings = (
        (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * h
        + 2 * h  # LayerNorm
    )
    block = (
        4 * (h * h + h)  # query, key, value, attention output
        + 2 * h  # attention LayerNorm
        + (h * i + i)  # intermediate
        + (i * h + h)  # output
        + 2 * h  # output LayerNorm
    )
    pooler = h * h + h
    return embeddings + config.num_hidden_layers * block + pooler
