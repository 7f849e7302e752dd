"""`XLNetConfig`: XLNet's hyper-parameters, as Hugging Face's `config.json`.

Field names are the keys of Hugging Face's xlnet `config.json` (the
original `zihangdai/xlnet` flags use the same `d_model`, `n_head`,
`d_head`, `d_inner`, `untie_r`, `mem_len`, ... names), so a released config
loads without translation.
"""

import dataclasses

from keras_bert_impl.base.model_config import ModelConfig

# `ff_activation` -> our activation name. transformers' "gelu" is the exact
# x * Phi(x), and the released configs say "gelu", so that is what "gelu"
# computes here (parity with transformers). The original TF code's "gelu"
# is the tanh approximation, which transformers calls "gelu_new".
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "relu": "relu"}
ATTENTION_TYPES = ("bi", "uni")

# Keys of a Hugging Face xlnet config.json that are not hyper-parameters of
# the backbone (task heads, generation, memory switches of transformers'
# forward pass, bookkeeping).
_HF_EXTRAS = ("architectures", "model_type", "transformers_version", "dtype", "torch_dtype",
              "summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout",
              "start_n_top", "end_n_top", "use_mems_eval", "use_mems_train",
              "task_specific_params", "id2label", "label2id", "problem_type",
              "output_attentions", "output_hidden_states", "return_dict", "use_cache",
              "chunk_size_feed_forward", "is_encoder_decoder", "_name_or_path",
              "bos_token_id", "eos_token_id", "pad_token_id",
              # The tie is checked on the weights.
              "tie_word_embeddings")


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}.")


@dataclasses.dataclass(frozen=True)
class XLNetConfig(ModelConfig):
    """Hyper-parameters of an XLNet backbone (Yang et al. 2019).

    Defaults are transformers' `XLNetConfig` defaults (XLNet-Large's
    shape), except `mem_len`: memory is off unless asked for (the released
    configs say `null` too).

    Args:
        vocab_size: int. Rows of the word-embedding table (V; 32,000
            SentencePiece pieces in the release).
        d_model: int. Width of every hidden state (H); even (sinusoids).
        n_layer: int. Transformer-XL blocks.
        n_head: int. Attention heads (N).
        d_head: int or None. Width of each head (D); None: d_model // n_head.
        d_inner: int. Feed-forward width (I).
        ff_activation: str. "gelu" (exact, as transformers), "gelu_new"
            (the tanh form the original TF code computes) or "relu".
        untie_r: bool. Per-layer `r_w_bias`, `r_r_bias`, `r_s_bias`
            (the release); False: one set shared by every layer.
        attn_type: str. "bi" (XLNet) or "uni" (causal Transformer-XL).
        bi_data: bool. The second half of each batch reads the text
            backwards and gets negated relative positions (pretraining).
        clamp_len: int. Clamp relative distances to [-clamp_len,
            clamp_len]; -1 (or 0): no clamping.
        same_length: bool. With "uni": every query sees the same number of
            keys (Transformer-XL evaluation).
        mem_len: int or None. Memory states cached per layer; None or 0: no
            memory inputs and outputs.
        reuse_len: int or None. How many of a segment's first states go
            into the memory (pretraining: the reused half); None: all.
        dropout: float. Dropout on embeddings, positions, attention
            weights and both sublayer outputs.
        layer_norm_eps: float. LayerNorm epsilon (1e-12).
        initializer_range: float. Stddev of the normal init.
    """

    vocab_size: int = 32000
    d_model: int = 1024
    n_layer: int = 24
    n_head: int = 16
    d_head: int = None
    d_inner: int = 4096
    ff_activation: str = "gelu"
    untie_r: bool = True
    attn_type: str = "bi"
    bi_data: bool = False
    clamp_len: int = -1
    same_length: bool = False
    mem_len: int = None
    reuse_len: int = None
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layer", "n_head", "d_inner"):
            _positive_int(name, getattr(self, name))
        if self.d_head is None:
            object.__setattr__(self, "d_head", self.d_model // self.n_head)
        _positive_int("d_head", self.d_head)
        if self.d_model % 2:
            raise ValueError(
                "`d_model` must be even (the relative positions are d_model / 2 sines and as "
                f"many cosines). Received: d_model={self.d_model}.")
        if self.ff_activation not in ACTIVATIONS:
            raise ValueError(f"`ff_activation` must be one of {sorted(ACTIVATIONS)}. "
                             f"Received: ff_activation={self.ff_activation!r}.")
        if self.attn_type not in ATTENTION_TYPES:
            raise ValueError(f"`attn_type` must be one of {ATTENTION_TYPES}. "
                             f"Received: attn_type={self.attn_type!r}.")
        for name in ("untie_r", "bi_data", "same_length"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"`{name}` must be True or False. "
                                 f"Received: {name}={getattr(self, name)!r}.")
        if isinstance(self.clamp_len, bool) or not isinstance(self.clamp_len, int):
            raise ValueError(f"`clamp_len` must be an integer (-1: no clamping). "
                             f"Received: clamp_len={self.clamp_len!r}.")
        for name in ("mem_len", "reuse_len"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise ValueError(f"`{name}` must be None or an integer >= 0. "
                                 f"Received: {name}={value!r}.")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={self.dropout!r}.")

    # Relative positions: any length fits
    # (`keras_bert_impl.base.sequence_checks.check_fits_positions`).
    MAX_LENGTH_FIELD = None

    @property
    def uses_memory(self):
        """True when the backbone takes `mems` and returns `new_mems`."""
        return bool(self.mem_len)

    @classmethod
    def from_dict(cls, values, source="config"):
        """Builds a config from its keys; unknown keys are an error.

        Hugging Face's extras (`model_type`, `architectures`, the summary
        head and memory switches, ...) are dropped; anything else unknown
        is named. transformers' old name `n_token` is read as `vocab_size`.
        """
        values = dict(values)
        if "n_token" in values and "vocab_size" not in values:
            values["vocab_size"] = values.pop("n_token")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields - set(_HF_EXTRAS))
        if unknown:
            raise ValueError(
                f"Unknown XLNet config keys in {source}: {unknown}. Known keys: {sorted(fields)}.")
        model_type = values.get("model_type", "xlnet")
        if model_type != "xlnet":
            raise ValueError(f"{source} describes a {model_type!r} model, not 'xlnet'.")
        return cls(**{k: v for k, v in values.items() if k in fields})

    def to_hf_dict(self):
        """The Hugging Face xlnet `config.json` form of this config."""
        values = self.to_dict()
        values.update(model_type="xlnet", architectures=["XLNetLMHeadModel"])
        return values

    to_file_dict = to_hf_dict  # the Hugging Face `config.json`, as released


XLNET_PRESETS = {
    # xlnet-base-cased: 12 x 768, 12 heads of 64, FFN 3072, untied biases.
    "xlnet_base": XLNetConfig(d_model=768, n_layer=12, n_head=12, d_head=64, d_inner=3072),
    # xlnet-large-cased: 24 x 1024, 16 heads of 64, FFN 4096.
    "xlnet_large": XLNetConfig(d_model=1024, n_layer=24, n_head=16, d_head=64, d_inner=4096),
    # The original train_gpu.py's flag defaults: a CPU-sized model.
    "xlnet_debug": XLNetConfig(d_model=32, n_layer=6, n_head=4, d_head=8, d_inner=32,
                               ff_activation="relu", untie_r=False, dropout=0.0),
}


def xlnet_preset(name):
    """The `XLNetConfig` of a named preset ("xlnet_base", "xlnet_large", "xlnet_debug")."""
    if name not in XLNET_PRESETS:
        raise ValueError(f"Unknown XLNet preset {name!r}. Available: {sorted(XLNET_PRESETS)}.")
    return XLNET_PRESETS[name]


def xlnet_num_parameters(config, lm_head=False):
    """Parameters of the backbone, as transformers' `XLNetModel` counts them.

    xlnet_base: 116,718,336; `lm_head=True` adds the LM bias (the head's
    weight is the word-embedding table): 116,750,336.
    """
    h, i = config.d_model, config.d_inner
    nd = config.n_head * config.d_head
    biases = 3 * nd  # r_w_bias, r_r_bias, r_s_bias
    block = (
        5 * h * nd  # q, k, v, o, r
        + 2 * nd  # seg_embed
        + 2 * h  # attention LayerNorm
        + (h * i + i) + (i * h + h)  # feed-forward
        + 2 * h  # feed-forward LayerNorm
    )
    shared = 0 if config.untie_r else biases
    per_layer = block + (biases if config.untie_r else 0)
    total = config.vocab_size * h + h + shared + config.n_layer * per_layer  # + mask_emb
    return total + (config.vocab_size if lm_head else 0)
