"""`GptConfig`: OpenAI GPT's hyper-parameters, as Hugging Face's `config.json`.

Field names are the keys of Hugging Face's openai-gpt `config.json` (the
original `finetune-transformer-lm` code uses the same `n_embd`, `n_head`,
`n_layer` names), so a released config loads without translation.
"""

import dataclasses

from keras_bert_impl.base.model_config import ModelConfig

# The activations of Hugging Face's openai-gpt code. Its "gelu" is the tanh
# approximation (the original GPT code computes that form too), not BERT's
# exact "gelu".
AFNS = {"gelu": "gelu_tanh", "relu": "relu"}

# Keys of a Hugging Face openai-gpt config.json that are not hyper-parameters
# of the backbone (task heads, generation settings, bookkeeping).
_HF_EXTRAS = ("architectures", "model_type", "transformers_version", "dtype", "torch_dtype",
              "predict_special_tokens", "summary_activation", "summary_first_dropout",
              "summary_proj_to_labels", "summary_type", "summary_use_proj", "task_specific_params",
              "id2label", "label2id", "n_ctx", "n_special", "output_attentions",
              "output_hidden_states", "use_cache", "return_dict",
              # transformers 5 writes these too; the tie is checked on the weights.
              "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings")

# The three tokens GPT's fine-tuning appends to the vocabulary (its Sec. 3.3
# input transformations): start, delimiter and the extract token read by the
# classifier.
FINE_TUNING_TOKENS = ("_start_", "_delimiter_", "_classify_")


@dataclasses.dataclass(frozen=True)
class GptConfig(ModelConfig):
    """Hyper-parameters of an OpenAI GPT backbone (Radford et al. 2018).

    Args:
        vocab_size: int. Rows of the token-embedding table (40,478 BPE
            tokens in the release; +3 with the fine-tuning tokens).
        n_positions: int. Longest sequence (learned position embeddings).
        n_embd: int. Width of every hidden state (H).
        n_layer: int. Transformer blocks (L).
        n_head: int. Attention heads; must divide H. The feed-forward
            width is 4H, as the original.
        afn: str. "gelu" (the tanh form, as GPT) or "relu".
        resid_pdrop: float. Dropout on both sublayer outputs.
        embd_pdrop: float. Dropout on the summed embeddings.
        attn_pdrop: float. Dropout on attention weights.
        layer_norm_epsilon: float. LayerNorm epsilon (1e-5; BERT's is 1e-12).
        initializer_range: float. Stddev of the normal init.
    """

    vocab_size: int = 40478
    n_positions: int = 512
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    afn: str = "gelu"
    resid_pdrop: float = 0.1
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02

    def __post_init__(self):
        for name in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"`{name}` must be a positive integer. Received: {name}={value!r}.")
        if self.n_embd % self.n_head:
            raise ValueError(
                "`n_embd` must be divisible by `n_head`. "
                f"Received: n_embd={self.n_embd}, n_head={self.n_head}.")
        if self.afn not in AFNS:
            raise ValueError(f"`afn` must be one of {sorted(AFNS)}. Received: afn={self.afn!r}.")
        for name in ("resid_pdrop", "embd_pdrop", "attn_pdrop"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}.")

    # The longest sequence the model takes, and the key that says it
    # (`keras_bert_impl.base.sequence_checks.check_fits_positions`).
    MAX_LENGTH_FIELD = "n_positions"

    @property
    def intermediate_size(self):
        return 4 * self.n_embd

    @classmethod
    def from_dict(cls, values, source="config"):
        """Builds a config from its keys; unknown keys are an error.

        Hugging Face's extras (`model_type`, `architectures`, the summary
        head settings, ...) are dropped; anything else unknown is named.
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields - set(_HF_EXTRAS))
        if unknown:
            raise ValueError(
                f"Unknown GPT config keys in {source}: {unknown}. Known keys: {sorted(fields)}.")
        model_type = values.get("model_type", "openai-gpt")
        if model_type != "openai-gpt":
            raise ValueError(
                f"{source} describes a {model_type!r} model, not 'openai-gpt'.")
        return cls(**{k: v for k, v in values.items() if k in fields})

    def to_hf_dict(self):
        """The Hugging Face openai-gpt `config.json` form of this config."""
        values = self.to_dict()
        values.update(model_type="openai-gpt", architectures=["OpenAIGPTLMHeadModel"])
        return values

    to_file_dict = to_hf_dict  # the Hugging Face `config.json`, as released


GPT_PRESETS = {
    # openai-gpt: 12 x 768, 12 heads, 512 positions, 40,478 BPE tokens.
    "gpt": GptConfig(),
    # CPU-sized models of the same shape (vocab_size is usually the data's).
    "gpt_tiny": GptConfig(vocab_size=8000, n_positions=128, n_embd=128, n_layer=2, n_head=2),
    "gpt_mini": GptConfig(vocab_size=8000, n_positions=128, n_embd=256, n_layer=4, n_head=4),
}


def gpt_preset(name):
    """The `GptConfig` of a named preset ("gpt", "gpt_tiny", "gpt_mini")."""
    if name not in GPT_PRESETS:
        raise ValueError(f"Unknown GPT preset {name!r}. Available: {sorted(GPT_PRESETS)}.")
    return GPT_PRESETS[name]


def gpt_num_parameters(config):
    """Parameters of the backbone; the LM head is tied and adds none.

    openai-gpt: 116,534,784 (Hugging Face's count); with the three
    fine-tuning tokens 116,537,088 (the original release's).
    """
    h, i = config.n_embd, config.intermediate_size
    embeddings = (config.vocab_size + config.n_positions) * h
    block = (
        (h * 3 * h + 3 * h)  # fused query, key, value
        + (h * h + h)  # attention output
        + 2 * h  # attention LayerNorm
        + (h * i + i) + (i * h + h)  # feed-forward
        + 2 * h  # output LayerNorm
    )
    return embeddings + config.n_layer * block
