"""Hugging Face openai-gpt folders (`config.json`, `model.safetensors`, BPE files).

Reads what `transformers` writes for `OpenAIGPTModel` (keys without a
prefix) and `OpenAIGPTLMHeadModel` (keys under `transformer.`, the tied
`lm_head.weight` usually left out), and writes the latter.

No tensor is transposed or split. Hugging Face's `Conv1D` stores its weight
as `(in, out)`, the layout of a Keras `Dense` kernel, and `c_attn`'s `3H`
output columns are [query | key | value], each split into heads as
`(N, D)`: the layout of our fused `query_key_value` kernel, which
`SelfAttention` reshapes to `(3, N, D)`.
"""

import os
import re

import keras
import numpy as np

from keras_bert_impl.base.json_files import copy_atomic
from keras_bert_impl.base.json_files import read_json_file
from keras_bert_impl.base.json_files import write_json_atomic
from keras_bert_impl.checkpoints.hf_files import CONFIG_FILE
from keras_bert_impl.checkpoints.hf_files import WEIGHTS_FILE
from keras_bert_impl.checkpoints.hf_files import read_hf_tensors
from keras_bert_impl.checkpoints.hf_files import write_hf_tensors
from keras_bert_impl.checkpoints.hub_names import resolve_checkpoint
from keras_bert_impl.gpt.gpt_backbone import GptBackbone
from keras_bert_impl.gpt.gpt_config import GptConfig

# V=vocab, P=positions, H=hidden, I=intermediate (4H), N=heads, D=H // N

# `OpenAIGPTLMHeadModel` keeps the backbone under this prefix.
LM_PREFIX = "transformer."
# The LM head, tied to `tokens_embed.weight`: accepted when equal to it,
# never written (transformers leaves tied copies out of safetensors).
TIED_HEAD = "lm_head.weight"
TOKEN_TABLE = "tokens_embed.weight"
# The BPE tokenizer files of an openai-gpt folder, in `vocab_files` order.
VOCAB_FILES = ("vocab.json", "merges.txt")
# Buffers older transformers stored as if they were weights: each block's
# causal mask and the position ids. Checked and ignored on load.
_CAUSAL_MASK = re.compile(r"^h\.(\d+)\.attn\.bias$")
_POSITION_IDS = "position_ids"


def gpt_hf_variables(backbone):
    """`{Hugging Face key: Keras variable}` of every weight of a `GptBackbone`.

    Keys are spelled as `OpenAIGPTModel` spells them (no `transformer.`).
    """
    variables = {
        TOKEN_TABLE: backbone.token_embedding.embeddings,  # (V, H)
        "positions_embed.weight": backbone.embeddings.position_embeddings,  # (P, H)
    }
    for i, layer in enumerate(backbone.decoder_layers):
        p = f"h.{i}."
        variables.update({
            p + "attn.c_attn.weight": layer.attention.query_key_value.kernel,  # (H, 3H)
            p + "attn.c_attn.bias": layer.attention.query_key_value.bias,  # (3H,)
            p + "attn.c_proj.weight": layer.attention.output_dense.kernel,  # (H, H)
            p + "attn.c_proj.bias": layer.attention.output_dense.bias,
            p + "ln_1.weight": layer.attention_layer_norm.gamma,
            p + "ln_1.bias": layer.attention_layer_norm.beta,
            p + "mlp.c_fc.weight": layer.intermediate_dense.kernel,  # (H, I)
            p + "mlp.c_fc.bias": layer.intermediate_dense.bias,
            p + "mlp.c_proj.weight": layer.output_dense.kernel,  # (I, H)
            p + "mlp.c_proj.bias": layer.output_dense.bias,
            p + "ln_2.weight": layer.output_layer_norm.gamma,
            p + "ln_2.bias": layer.output_layer_norm.beta,
        })
    return variables


def read_gpt_config(folder):
    """The `GptConfig` of a Hugging Face openai-gpt folder's `config.json`."""
    path = os.path.join(folder, CONFIG_FILE)
    if not os.path.exists(path):
        raise ValueError(f"No {CONFIG_FILE} in {folder}: not a Hugging Face model folder.")
    values = read_json_file(path)
    if values.get("tie_word_embeddings", True) is False:
        raise ValueError(
            f"{path} has tie_word_embeddings=false; GPT's LM head is the token-embedding "
            "table itself, so an untied head cannot be loaded.")
    return GptConfig.from_dict(values, source=path)


def _check_buffer(name, value, config, source, key):
    """True for a stored buffer GPT recomputes (checked to hold what GPT
    computes); False for a key that is no buffer."""
    match = _CAUSAL_MASK.match(name)
    if match and int(match.group(1)) < config.n_layer:
        size = value.shape[-1] if value.ndim == 4 else 0
        if value.shape != (1, 1, size, size) or not np.array_equal(
                value[0, 0], np.tril(np.ones((size, size), np.float32))):
            raise ValueError(
                f"{source}: buffer {key!r} of shape {value.shape} is not a causal mask "
                "(1, 1, n, n) of lower-triangular ones; GPT attends left to right only.")
        return True
    if name == _POSITION_IDS:
        ids = value.reshape(-1)
        if not np.array_equal(ids, np.arange(ids.size)):
            raise ValueError(f"{source}: buffer {key!r} is not 0, 1, 2, ...; "
                             "GPT reads position t from row t.")
        return True
    return False


def load_gpt_checkpoint(folder, dtype=None):
    """Builds the `GptBackbone` a Hugging Face openai-gpt folder holds.

    Strict: every weight must be present with the shape `config.json`
    implies, and nothing else may be there except the tied
    `lm_head.weight` (equal to `tokens_embed.weight`) and the buffers older
    transformers stored (each block's causal mask `h.{i}.attn.bias`, and
    `position_ids`), checked and ignored. A `ValueError` names the first
    missing, unexpected or misshaped tensor.

    Args:
        folder: str. Holds `config.json` and `model.safetensors`
            (`OpenAIGPTModel` or `OpenAIGPTLMHeadModel`); or a Hub
            repository id, e.g. "openai-community/openai-gpt" (the cache
            when offline).
        dtype: optional dtype policy for the built model.

    Returns:
        `GptBackbone` with the folder's weights.

    Example:
    >>> backbone = load_gpt_checkpoint("tests/goldens/gpt_parity")
    >>> backbone.gpt_config.n_embd
    12
    """
    folder = resolve_checkpoint(folder)
    config = read_gpt_config(folder)
    tensors = read_hf_tensors(folder)  # float32, clear errors for a missing file
    source = os.path.join(folder, WEIGHTS_FILE)
    backbone = GptBackbone.from_config_object(config, dtype=dtype)
    variables = gpt_hf_variables(backbone)
    prefix = LM_PREFIX if any(k.startswith(LM_PREFIX) for k in tensors) else ""

    values, head = _sorted_tensors(tensors, variables, prefix, config, source)
    _check_complete(values, head, variables, prefix, source)
    for name, variable in variables.items():
        variable.assign(values[name])
    return backbone


def _sorted_tensors(tensors, variables, prefix, config, source):
    """`({name: value} of the weights, the tied LM head or None)`: the
    checkpoint's tensors by their `OpenAIGPTModel` names, the buffers checked
    and dropped, anything else refused."""
    values, head = {}, None
    for key in sorted(tensors):
        name = key[len(prefix):] if key.startswith(prefix) else None
        if key == TIED_HEAD:
            head = tensors[key]
        elif name in variables:
            values[name] = tensors[key]
        elif name is None or not _check_buffer(name, tensors[key], config, source, key):
            raise ValueError(
                f"{source} holds unexpected tensor {key!r}: a {config.n_layer}-layer "
                f"openai-gpt model (per {CONFIG_FILE}) has no place for it.")
    if TOKEN_TABLE not in values and head is not None:
        values[TOKEN_TABLE], head = head, None  # transformers kept the other copy of the tie
    return values, head


def _check_complete(values, head, variables, prefix, source):
    """`ValueError` naming the first weight of `variables` missing from
    `values` or of another shape, or a tied `head` that differs from the
    token table."""
    missing = [prefix + name for name in variables if name not in values]
    if missing:
        raise ValueError(
            f"{source} lacks tensor {missing[0]!r} ({len(missing)} missing in all: "
            f"{missing[:5]}{' ...' if len(missing) > 5 else ''}).")
    for name, variable in variables.items():
        if values[name].shape != tuple(variable.shape):
            raise ValueError(
                f"{source}: tensor {prefix + name!r} has shape {values[name].shape}, but the "
                f"model {CONFIG_FILE} describes needs {tuple(variable.shape)}.")
    if head is not None and not np.array_equal(head, values[TOKEN_TABLE]):
        raise ValueError(
            f"{source}: {TIED_HEAD!r} should be tied to {prefix + TOKEN_TABLE!r} but differs "
            "from it; GPT's LM head is the token-embedding table itself.")


def save_gpt_checkpoint(backbone, folder, vocab_files=None):
    """Writes a `GptBackbone` as a Hugging Face `OpenAIGPTLMHeadModel` folder.

    `model.safetensors` (keys under `transformer.`, the tied LM head left
    out as transformers does) and `config.json`, each written to a temp
    file and renamed into place, so a crash never leaves a torn file.

    Args:
        backbone: `GptBackbone`.
        folder: str. Created if needed.
        vocab_files: optional pair of paths `(vocab.json, merges.txt)`,
            copied beside the weights under those names.

    Example:
    >>> save_gpt_checkpoint(backbone, "/tmp/gpt", ("vocab.json", "merges.txt"))
    """
    if vocab_files is not None:
        vocab_files = tuple(vocab_files)
        if len(vocab_files) != len(VOCAB_FILES):
            raise ValueError(
                f"`vocab_files` must be the pair {VOCAB_FILES}. Received: {vocab_files!r}.")
        for path in vocab_files:
            if not os.path.isfile(path):
                raise ValueError(f"`vocab_files` names {path!r}, which is not a file.")
    os.makedirs(folder, exist_ok=True)
    tensors = {
        LM_PREFIX + key: np.ascontiguousarray(keras.ops.convert_to_numpy(variable), np.float32)
        for key, variable in gpt_hf_variables(backbone).items()
    }
    write_hf_tensors(folder, tensors)
    write_json_atomic(os.path.join(folder, CONFIG_FILE), backbone.gpt_config.to_hf_dict())
    for src, name in zip(vocab_files or (), VOCAB_FILES):
        copy_atomic(src, os.path.join(folder, name))
