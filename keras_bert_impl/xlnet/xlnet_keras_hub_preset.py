"""keras-hub `XLNetBackbone` preset folders, both ways.

The BERT converter's counterpart (`keras_bert_impl.checkpoints.
keras_hub_preset`), with the folder checks and the atomic write that both
take from `keras_bert_impl.checkpoints.keras_hub_common`.
keras-hub reads and writes the files; variables meet through the Hugging
Face names our XLNet already maps to (`xlnet_checkpoint.xlnet_hf_slots`):
keras-hub keeps q, k, v, o and r as `(H, N, D)` einsum kernels (the
Hugging Face layout, no change), per-layer `content_attention_bias`,
`positional_attention_bias`, `segment_attention_bias` (`r_w_bias`,
`r_r_bias`, `r_s_bias`) and `segment_encoding` (`seg_embed`), and
`(in, out)` Dense kernels (transposed from Hugging Face's `(out, in)`).

keras-hub's `XLNetBackbone` is the content stream of a bidirectional
XLNet without memory, relative-position clamping or `bi_data`, with
per-layer biases and LayerNorm epsilon 1e-12. keras-hub 0.32 has no XLNet
tokenizer, so a preset holds no vocabulary.
"""

import os

import keras
import numpy as np

from keras_bert_impl.checkpoints.keras_hub_common import CONFIG_FILE
from keras_bert_impl.checkpoints.keras_hub_common import XLNET_BACKBONE
from keras_bert_impl.checkpoints.keras_hub_common import activation_name
from keras_bert_impl.checkpoints.keras_hub_common import assign_checked
from keras_bert_impl.checkpoints.keras_hub_common import check_covered
from keras_bert_impl.checkpoints.keras_hub_common import check_replaceable
from keras_bert_impl.checkpoints.keras_hub_common import keras_hub_module
from keras_bert_impl.checkpoints.keras_hub_common import read_preset_config
from keras_bert_impl.checkpoints.keras_hub_common import write_preset_atomic
from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
from keras_bert_impl.xlnet.xlnet_checkpoint import _assign
from keras_bert_impl.xlnet.xlnet_checkpoint import xlnet_hf_tensors
from keras_bert_impl.xlnet.xlnet_config import XLNetConfig

# The keys keras-hub 0.32's `XLNetBackbone.get_config` writes; others are
# settings ours may not have, and are refused. `bias_initializer` only
# seeds new weights.
_XLNET_CONFIG_KEYS = frozenset((
    "name", "trainable", "dtype", "vocabulary_size", "num_layers", "num_heads", "hidden_dim",
    "intermediate_dim", "dropout", "activation", "kernel_initializer_range",
    "bias_initializer"))

# Our ff_activation (Hugging Face spelling) <-> our activation functions'
# names (`activation_name`), and what keras-hub's config can spell.
_FF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}
_HUB_ACTIVATIONS = {"gelu": "gelu", "relu": "relu"}  # keras.activations.get names


def _hub_xlnet_slots(hub):
    """`[(Hugging Face key, keras-hub variable, transpose?)]` for every variable."""
    slots = [
        ("word_embedding.weight", hub.content_query_embedding.word_embed.embeddings, False),
        ("mask_emb", hub.attn_mask_layer.mask_emb, False),  # (1, 1, H)
    ]
    for i, block in enumerate(hub.transformer_layers):
        p = f"layer.{i}."
        attention = block.relative_attention
        slots += [
            (p + "rel_attn.q", attention._query_dense.kernel, False),  # (H, N, D)
            (p + "rel_attn.k", attention._key_dense.kernel, False),
            (p + "rel_attn.v", attention._value_dense.kernel, False),
            # "ibnd,hnd->ibh": the same (H, N, D) as Hugging Face's `o`.
            (p + "rel_attn.o", attention._output_dense.kernel, False),
            (p + "rel_attn.r", attention._encoding_dense.kernel, False),
            (p + "rel_attn.r_w_bias", block.content_attention_bias, False),  # (N, D)
            (p + "rel_attn.r_r_bias", block.positional_attention_bias, False),
            (p + "rel_attn.r_s_bias", block.segment_attention_bias, False),
            (p + "rel_attn.seg_embed", block.segment_encoding, False),  # (2, N, D)
            (p + "rel_attn.layer_norm.weight", block.layer_norm.gamma, False),
            (p + "rel_attn.layer_norm.bias", block.layer_norm.beta, False),
            (p + "ff.layer_1.weight", block.feedforward_intermediate_dense.kernel, True),
            (p + "ff.layer_1.bias", block.feedforward_intermediate_dense.bias, False),
            (p + "ff.layer_2.weight", block.feedforward_output_dense.kernel, True),
            (p + "ff.layer_2.bias", block.feedforward_output_dense.bias, False),
            (p + "ff.layer_norm.weight", block.layer_norm_ff.gamma, False),
            (p + "ff.layer_norm.bias", block.layer_norm_ff.beta, False),
        ]
    return slots


def _xlnet_config(hub, values, source):
    """Our `XLNetConfig` for a keras-hub `XLNetBackbone`; `ValueError` naming
    the field ours cannot represent."""
    fields = values["config"]
    blocks = hub.transformer_layers
    activation = {activation_name(b.activation_function_ff, f"{source}: {b.name}'s feed-forward")
                  for b in blocks}
    epsilon = {norm.epsilon for b in blocks for norm in (b.layer_norm, b.layer_norm_ff)}
    if len(activation) != 1 or len(epsilon) != 1:
        raise ValueError(f"{source}: the activation or layer_norm_epsilon differs between "
                         "layers; ours has one value for every layer.")
    try:
        return XLNetConfig(
            vocab_size=fields["vocabulary_size"], d_model=fields["hidden_dim"],
            n_layer=fields["num_layers"], n_head=fields["num_heads"],
            # keras-hub's head width: hidden_dim // num_heads (XLNetBackbone).
            d_head=fields["hidden_dim"] // fields["num_heads"],
            d_inner=fields["intermediate_dim"], ff_activation=_FF_ACTIVATIONS[activation.pop()],
            untie_r=True, attn_type="bi", dropout=fields.get("dropout", 0.0),
            layer_norm_eps=epsilon.pop(),
            initializer_range=fields.get("kernel_initializer_range", 0.02))
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{source}: {e}") from None


def load_keras_hub_xlnet_preset(folder, dtype=None):
    """Our `XLNetBackbone` from a keras-hub `XLNetBackbone` preset folder.

    keras-hub loads the folder (`Backbone.from_preset`); its variables are
    spelled as Hugging Face keys and assigned strictly (every one present,
    shapes checked), as `load_xlnet_checkpoint` does. The backbone is
    bidirectional with untied biases, no memory and no clamping, as
    keras-hub's; its content stream (`sequence_output`) equals keras-hub's
    output.

    Args:
        folder: str. A keras-hub preset folder (`config.json`,
            `model.weights.h5`, `metadata.json`).
        dtype: optional dtype policy for the built model.

    Returns:
        `XLNetBackbone`.

    Raises:
        ValueError: naming the folder and what it holds when it is not a
            keras-hub XLNet preset, or the setting ours cannot represent.

    Example:
    >>> backbone = load_keras_hub_xlnet_preset("xlnet_preset")
    """
    values = read_preset_config(folder, XLNET_BACKBONE, _XLNET_CONFIG_KEYS)
    source = os.path.join(folder, CONFIG_FILE)
    keras_hub = keras_hub_module()

    hub = keras_hub.models.Backbone.from_preset(folder, dtype="float32")
    if type(hub) is not keras_hub.models.XLNetBackbone:
        raise ValueError(f"{folder}: keras-hub built a {type(hub).__name__}, not an "
                         "XLNetBackbone.")
    slots = _hub_xlnet_slots(hub)
    check_covered(hub, [variable for _, variable, _ in slots], folder)
    config = _xlnet_config(hub, values, source)
    backbone = XLNetBackbone.from_config_object(config, dtype=dtype)
    tensors = {}
    for key, variable, transpose in slots:
        value = np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)
        tensors[key] = value.T if transpose else value
    _assign(backbone, tensors, folder, "")  # strict: every key, every shape
    return backbone


def _xlnet_backbone_of(model):
    backbone = model if isinstance(model, XLNetBackbone) else getattr(model, "backbone", None)
    if not isinstance(backbone, XLNetBackbone):
        raise ValueError(
            "Expected an XLNetBackbone or a model with one as `.backbone` (the pretrainer, a "
            f"task model). Received: {type(model).__name__} (BERT models: "
            "keras_bert_impl.checkpoints.save_keras_hub_preset).")
    return backbone


def _hub_xlnet_kwargs(config):
    """keras-hub `XLNetBackbone` arguments; `ValueError` naming the field it
    cannot represent."""
    fixed = (("attn_type", "bi"), ("bi_data", False), ("same_length", False),
             ("layer_norm_eps", 1e-12))
    for field, value in fixed:
        if getattr(config, field) != value:
            raise ValueError(f"{field}={getattr(config, field)!r}: keras-hub's XLNetBackbone "
                             f"has {field}={value!r} only.")
    if config.clamp_len > 0:
        raise ValueError(f"clamp_len={config.clamp_len}: keras-hub's XLNetBackbone does not "
                         "clamp relative positions.")
    if config.d_head != config.d_model // config.n_head:
        raise ValueError(f"d_head={config.d_head}: keras-hub's XLNetBackbone has heads of "
                         f"d_model // n_head = {config.d_model // config.n_head}.")
    if config.ff_activation not in _HUB_ACTIVATIONS:
        raise ValueError(f"ff_activation={config.ff_activation!r}: keras-hub's XLNetBackbone "
                         f"config spells only {sorted(_HUB_ACTIVATIONS)}.")
    return dict(
        vocabulary_size=config.vocab_size, num_layers=config.n_layer, num_heads=config.n_head,
        hidden_dim=config.d_model, intermediate_dim=config.d_inner, dropout=config.dropout,
        activation=_HUB_ACTIVATIONS[config.ff_activation],
        kernel_initializer_range=config.initializer_range)


def save_keras_hub_xlnet_preset(model, folder):
    """Writes our XLNet backbone as a keras-hub `XLNetBackbone` preset.

    keras-hub builds its own backbone of the same shape, takes our weights
    (through the Hugging Face names) and writes the folder with its own
    `save_to_preset`, so `keras_hub.models.XLNetBackbone.from_preset(folder)`
    loads it; written in float32, atomically and never over a folder that
    is not a keras-hub preset (see `write_preset_atomic`).

    Shared biases (`untie_r=False`) are written to every layer (keras-hub's
    are per layer; the outputs are the same). `mem_len`, `reuse_len` and the
    two-stream mode are ways of running the same weights and are not
    written: keras-hub's backbone has neither memory nor a query stream.
    A pretrainer's LM bias is not written either (keras-hub has no XLNet LM).

    Args:
        model: `XLNetBackbone`, or a model whose `.backbone` is one.
        folder: str. The preset folder to write.

    Raises:
        ValueError: naming the setting keras-hub's `XLNetBackbone` cannot
            represent (`attn_type`, `bi_data`, `clamp_len`, `same_length`,
            `d_head`, `ff_activation`, `layer_norm_eps`), or a target folder
            that is not a keras-hub preset.
    """
    backbone = _xlnet_backbone_of(model)
    kwargs = _hub_xlnet_kwargs(backbone.xlnet_config)
    check_replaceable(os.path.abspath(folder))  # before the slow part
    keras_hub = keras_hub_module()

    hub = keras_hub.models.XLNetBackbone(**kwargs, dtype="float32")
    slots = _hub_xlnet_slots(hub)
    check_covered(hub, [variable for _, variable, _ in slots], "save_keras_hub_xlnet_preset")
    tensors = xlnet_hf_tensors(backbone)
    for key, variable, transpose in slots:
        assign_checked(variable, tensors[key].T if transpose else tensors[key], key,
                       "save_keras_hub_xlnet_preset")
    write_preset_atomic(folder, hub.save_to_preset)
