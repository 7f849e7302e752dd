"""Hugging Face XLNet folders (`config.json`, `model.safetensors`).

Reads what `transformers` writes for `XLNetModel` (keys without a prefix)
and `XLNetLMHeadModel` (keys under `transformer.`, plus `lm_loss.bias`; the
tied `lm_loss.weight` usually left out), and writes either.

transformers stores q, k, v, o and r as `(H, N, D)` tensors (the original
TF layout, ours too); our q, k, v are one `(H, 3, N, D)` kernel, so the
converter stacks and splits it. The feed-forward `nn.Linear` weights are
`(out, in)` and are transposed into Keras `(in, out)` kernels.
transformers always has per-layer `r_w_bias`, `r_r_bias` and `r_s_bias`;
a model with `untie_r=False` shares one set, written to every layer and
loaded only when every layer holds the same values.
"""

import os

import keras
import numpy as np

from keras_bert_impl.base.json_files import write_json_atomic
from keras_bert_impl.checkpoints.hf_config import read_hf_config_values
from keras_bert_impl.checkpoints.hf_files import CONFIG_FILE
from keras_bert_impl.checkpoints.hf_files import WEIGHTS_FILE
from keras_bert_impl.checkpoints.hf_files import read_hf_tensors
from keras_bert_impl.checkpoints.hf_files import write_hf_tensors
from keras_bert_impl.checkpoints.hub_names import resolve_checkpoint
from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
from keras_bert_impl.xlnet.xlnet_config import XLNetConfig
from keras_bert_impl.xlnet.xlnet_pretrainer import XLNetPretrainer

# V=vocab, H=d_model, N=heads, D=d_head, I=d_inner

# `XLNetLMHeadModel` keeps the backbone under this prefix; its head is the
# tied table (accepted when equal to it, never written) plus a bias.
LM_PREFIX = "transformer."
LM_BIAS = "lm_loss.bias"
TIED_HEAD = "lm_loss.weight"
WORD_TABLE = "word_embedding.weight"
_QKV = ("q", "k", "v")


def xlnet_hf_slots(backbone):
    """`{Hugging Face key: (Keras variable, part)}` of every backbone weight.

    Keys are spelled as `XLNetModel` spells them (no `transformer.`).
    `part` says how the tensor sits in the variable: None (as is), "T"
    (transposed) or 0 / 1 / 2 (q / k / v of the fused kernel, axis 1).
    With `untie_r=False` every layer's bias keys name the one shared set.
    """
    slots = {
        WORD_TABLE: (backbone.word_embedding.embeddings, None),  # (V, H)
        "mask_emb": (backbone.mask_embedding.mask_emb, None),  # (1, 1, H)
    }
    for i, block in enumerate(backbone.blocks):
        p = f"layer.{i}."
        attention = block.rel_attn
        biases = backbone.attention_biases[i if backbone.untie_r else 0]
        for part, name in enumerate(_QKV):
            slots[p + "rel_attn." + name] = (attention.query_key_value, part)  # (H, N, D)
        slots.update({
            p + "rel_attn.o": (attention.output_kernel, None),  # (H, N, D)
            p + "rel_attn.r": (attention.position_kernel, None),  # (H, N, D)
            p + "rel_attn.r_r_bias": (biases.r_r_bias, None),  # (N, D)
            p + "rel_attn.r_s_bias": (biases.r_s_bias, None),
            p + "rel_attn.r_w_bias": (biases.r_w_bias, None),
            p + "rel_attn.seg_embed": (attention.seg_embed, None),  # (2, N, D)
            p + "rel_attn.layer_norm.weight": (block.attention_layer_norm.gamma, None),
            p + "rel_attn.layer_norm.bias": (block.attention_layer_norm.beta, None),
            p + "ff.layer_1.weight": (block.layer_1.kernel, "T"),  # (I, H)
            p + "ff.layer_1.bias": (block.layer_1.bias, None),
            p + "ff.layer_2.weight": (block.layer_2.kernel, "T"),  # (H, I)
            p + "ff.layer_2.bias": (block.layer_2.bias, None),
            p + "ff.layer_norm.weight": (block.output_layer_norm.gamma, None),
            p + "ff.layer_norm.bias": (block.output_layer_norm.beta, None),
        })
    return slots


def _hf_value(variable, part):
    value = keras.ops.convert_to_numpy(variable).astype(np.float32)
    if part == "T":
        return value.T
    return value if part is None else value[:, part]


def _hf_shape(variable, part):
    shape = tuple(variable.shape)
    if part == "T":
        return shape[::-1]
    return shape if part is None else shape[:1] + shape[2:]


def xlnet_hf_tensors(backbone):
    """`{Hugging Face key (XLNetModel spelling): float32 array}` of a backbone."""
    return {key: np.ascontiguousarray(_hf_value(*slot))
            for key, slot in xlnet_hf_slots(backbone).items()}


def read_xlnet_config(folder):
    """The `XLNetConfig` of a Hugging Face xlnet folder's `config.json`."""
    path, values = read_hf_config_values(folder)
    if values.get("tie_word_embeddings", True) is False:
        raise ValueError(
            f"{path} has tie_word_embeddings=false; XLNet's LM head is the word-embedding "
            "table itself, so an untied head cannot be loaded.")
    return XLNetConfig.from_dict(values, source=path)


def _assign(backbone, tensors, source, prefix):
    """Strictly assigns `{XLNetModel key: array}` (every key present, shapes checked)."""
    slots = xlnet_hf_slots(backbone)
    missing = [prefix + key for key in slots if key not in tensors]
    if missing:
        raise ValueError(
            f"{source} lacks tensor {missing[0]!r} ({len(missing)} missing in all: "
            f"{missing[:5]}{' ...' if len(missing) > 5 else ''}).")
    for key, (variable, part) in slots.items():
        if tensors[key].shape != _hf_shape(variable, part):
            raise ValueError(
                f"{source}: tensor {prefix + key!r} has shape {tensors[key].shape}, but the "
                f"model {CONFIG_FILE} describes needs {_hf_shape(variable, part)}.")
    values = {}  # id(variable) -> (variable, value)
    for key, (variable, part) in slots.items():
        tensor = tensors[key]
        if part == "T":
            tensor = tensor.T
        elif part is not None:  # q, k, v: stacked on axis 1 once all three are read
            stack = values.setdefault(id(variable), (variable, [None] * 3))[1]
            stack[part] = tensor
            continue
        if id(variable) in values and not np.array_equal(values[id(variable)][1], tensor):
            raise ValueError(
                f"{source}: tensor {prefix + key!r} differs from the same bias of layer 0, but "
                f"{CONFIG_FILE} says untie_r=false (one set shared by every layer). Load it "
                "with untie_r=true.")
        values[id(variable)] = (variable, tensor)
    for variable, value in values.values():
        variable.assign(np.stack(value, axis=1) if isinstance(value, list) else value)


def _read_folder(folder, changes):
    folder = resolve_checkpoint(folder)  # a Hub name (e.g. xlnet-base-cased) -> its folder
    config = read_xlnet_config(folder)
    if changes:
        config = config.replace(**changes)
    tensors = read_hf_tensors(folder)  # float32, clear errors for a missing file
    source = os.path.join(folder, WEIGHTS_FILE)
    prefix = LM_PREFIX if any(k.startswith(LM_PREFIX) for k in tensors) else ""
    return config, tensors, source, prefix


def _split(backbone, tensors, source, prefix):
    """`(backbone tensors by XLNetModel key, lm bias or None)`; strict on the rest."""
    known = set(xlnet_hf_slots(backbone))
    body, head, bias = {}, None, None
    for key in sorted(tensors):
        name = key[len(prefix):] if key.startswith(prefix) else None
        if key == TIED_HEAD:
            head = tensors[key]
        elif key == LM_BIAS and prefix:
            bias = tensors[key]
        elif name in known:
            body[name] = tensors[key]
        else:
            raise ValueError(
                f"{source} holds unexpected tensor {key!r}: a {backbone.n_layer}-layer xlnet "
                f"model (per {CONFIG_FILE}) has no place for it.")
    if head is not None and WORD_TABLE in body and not np.array_equal(head, body[WORD_TABLE]):
        raise ValueError(
            f"{source}: {TIED_HEAD!r} should be tied to {prefix + WORD_TABLE!r} but differs "
            "from it; XLNet's LM head is the word-embedding table itself.")
    if head is not None and WORD_TABLE not in body:
        body[WORD_TABLE] = head  # transformers kept the other copy of the tie
    if bias is not None and bias.shape != (backbone.vocab_size,):
        raise ValueError(f"{source}: tensor {LM_BIAS!r} has shape {bias.shape}, but the model "
                         f"{CONFIG_FILE} describes needs {(backbone.vocab_size,)}.")
    return body, bias


def load_xlnet_checkpoint(folder, two_stream=False, dtype=None, **changes):
    """Builds the `XLNetBackbone` a Hugging Face xlnet folder holds.

    Strict: every weight must be present with the shape `config.json`
    implies, and nothing else may be there except, in an
    `XLNetLMHeadModel` folder, `lm_loss.bias` (checked for shape; an
    `XLNetPretrainer` keeps it, see `load_xlnet_pretrainer`) and the tied
    `lm_loss.weight` (equal to the table). A `ValueError` names the first
    missing, unexpected or misshaped tensor.

    Args:
        folder: str. Holds `config.json` and `model.safetensors`.
        two_stream: bool. Build the pretraining (two-stream) backbone.
        dtype: optional dtype policy for the built model.
        **changes: `XLNetConfig` fields to change from the folder's
            (e.g. `mem_len=384, reuse_len=256, bi_data=True` to pretrain
            further, `mem_len=None` to fine-tune).

    Returns:
        `XLNetBackbone` with the folder's weights.

    Example:
    >>> backbone = load_xlnet_checkpoint("tests/goldens/xlnet_parity", mem_len=None)
    >>> backbone.d_model
    12
    """
    config, tensors, source, prefix = _read_folder(folder, changes)
    backbone = XLNetBackbone.from_config_object(config, two_stream=two_stream, dtype=dtype)
    body, _ = _split(backbone, tensors, source, prefix)
    _assign(backbone, body, source, prefix)
    return backbone


def load_xlnet_pretrainer(folder, max_batch_size=None, dtype=None, **changes):
    """Builds an `XLNetPretrainer` (two streams, LM head) from a folder.

    As `load_xlnet_checkpoint`, plus the LM head's `lm_loss.bias`. A bare
    `XLNetModel` folder has no head: the bias then starts at zero (the
    original's initialisation).

    Args:
        folder: str.
        max_batch_size: int or None. Rows of carried memory (with `mem_len`).
        dtype: optional dtype policy.
        **changes: `XLNetConfig` fields to change from the folder's.

    Returns:
        `XLNetPretrainer`.
    """
    config, tensors, source, prefix = _read_folder(folder, changes)
    backbone = XLNetBackbone.from_config_object(config, two_stream=True, dtype=dtype)
    body, bias = _split(backbone, tensors, source, prefix)
    if prefix and bias is None:
        raise ValueError(f"{source} lacks tensor {LM_BIAS!r}, the LM head's bias of an "
                         "XLNetLMHeadModel folder.")
    _assign(backbone, body, source, prefix)
    pretrainer = XLNetPretrainer(backbone, max_batch_size=max_batch_size)
    if bias is not None:
        pretrainer.lm_bias.assign(bias)
    return pretrainer


def save_xlnet_checkpoint(model, folder):
    """Writes a Hugging Face xlnet folder.

    An `XLNetPretrainer` becomes an `XLNetLMHeadModel` folder (keys under
    `transformer.`, `lm_loss.bias`, the tied weight left out as
    transformers does); an `XLNetBackbone` a bare `XLNetModel` folder.
    `model.safetensors` and `config.json` are each written to a temp file
    and renamed into place, so a crash never leaves a torn file.

    Args:
        model: `XLNetPretrainer` or `XLNetBackbone`.
        folder: str. Created if needed.

    Example:
    >>> save_xlnet_checkpoint(pretrainer, "/tmp/xlnet")
    """
    if isinstance(model, XLNetPretrainer):
        backbone, prefix, architecture = model.backbone, LM_PREFIX, "XLNetLMHeadModel"
    elif isinstance(model, XLNetBackbone):
        backbone, prefix, architecture = model, "", "XLNetModel"
    else:
        raise ValueError("`model` must be an XLNetPretrainer or an XLNetBackbone. "
                         f"Received: {type(model).__name__}.")
    config = backbone.xlnet_config
    if config.n_head * config.d_head != config.d_model:
        raise ValueError(
            "transformers' XLNet needs n_head * d_head == d_model. Received: "
            f"n_head={config.n_head}, d_head={config.d_head}, d_model={config.d_model}.")
    tensors = {prefix + key: value for key, value in xlnet_hf_tensors(backbone).items()}
    if prefix:
        tensors[LM_BIAS] = keras.ops.convert_to_numpy(model.lm_bias).astype(np.float32)
    os.makedirs(folder, exist_ok=True)
    write_hf_tensors(folder, tensors)
    values = config.to_hf_dict()
    values["architectures"] = [architecture]
    write_json_atomic(os.path.join(folder, CONFIG_FILE), values)
