"""Our variables under the original Google checkpoint names, both ways.

This is the one place where the layer structure of `BertBackbone` and the
pretraining heads meets the names of `google-research/bert`'s `modeling.py`
(`bert/encoder/layer_0/attention/self/query/kernel`, ...). Both converters
(Google TF1 and Hugging Face) go through it, so a tensor has one name map.

Layouts follow the original: Dense kernels are `(in, out)`;
`cls/seq_relationship/output_weights` is `(2, H)`. Our fused query/key/value
kernel `(H, 3H)` is split into the three original `(H, H)` tensors.
"""

import numpy as np

from keras_bert_impl.bert.bert_backbone import BertBackbone
from keras_bert_impl.bert.bert_pretrainer import BertMaskedLMPretrainer
from keras_bert_impl.bert.bert_pretrainer import BertPretrainer

MLM_HEAD_PREFIX = "cls/predictions/"
NSP_HEAD_PREFIX = "cls/seq_relationship/"
# The heads' own tensors: a checkpoint holds a head when it holds one of these
# (a stray tensor under the prefix is then reported as unexpected, not as a
# head with its tensors missing).
MLM_HEAD_NAMES = tuple(MLM_HEAD_PREFIX + name for name in (
    "transform/dense/kernel", "transform/dense/bias", "transform/LayerNorm/gamma",
    "transform/LayerNorm/beta", "output_bias"))
NSP_HEAD_NAMES = (NSP_HEAD_PREFIX + "output_weights", NSP_HEAD_PREFIX + "output_bias")


class _Slot:
    """One variable of ours and the original tensor(s) it holds."""

    def __init__(self, names, variable, transpose=False):
        self.names = names
        self.variable = variable
        self.transpose = transpose

    def original_shapes(self):
        shape = tuple(self.variable.shape)
        if self.transpose:
            shape = shape[::-1]
        if len(self.names) > 1:  # fused on the last axis
            shape = shape[:-1] + (shape[-1] // len(self.names),)
        return {name: shape for name in self.names}

    def read(self):
        value = np.asarray(self.variable.numpy())
        if self.transpose:
            value = value.T
        parts = np.split(value, len(self.names), axis=-1)
        return dict(zip(self.names, parts))

    def write(self, tensors):
        value = np.concatenate([tensors[name] for name in self.names], axis=-1)
        if self.transpose:
            value = value.T
        self.variable.assign(value.astype(self.variable.dtype))


def _dense(prefix, dense):
    return [_Slot((prefix + "kernel",), dense.kernel), _Slot((prefix + "bias",), dense.bias)]


def _layer_norm(prefix, layer_norm):
    return [_Slot((prefix + "gamma",), layer_norm.gamma), _Slot((prefix + "beta",), layer_norm.beta)]


def _parts(model):
    if isinstance(model, BertBackbone):
        return model, None, None
    if isinstance(model, BertPretrainer):
        return model.backbone, model.masked_lm_head, model.next_sentence_head
    if isinstance(model, BertMaskedLMPretrainer):
        return model.backbone, model.masked_lm_head, None
    raise ValueError(
        "Expected a BertBackbone, BertPretrainer or BertMaskedLMPretrainer. "
        f"Received: {type(model).__name__}."
    )


def _slots(model):
    backbone, mlm_head, nsp_head = _parts(model)
    embeddings = backbone.embeddings
    slots = [
        _Slot(("bert/embeddings/word_embeddings",), backbone.word_embedding.embeddings),
        _Slot(("bert/embeddings/token_type_embeddings",), embeddings.token_type_embeddings),
        _Slot(("bert/embeddings/position_embeddings",), embeddings.position_embeddings),
        *_layer_norm("bert/embeddings/LayerNorm/", embeddings.layer_norm),
    ]
    for i, layer in enumerate(backbone.encoder_layers):
        prefix = f"bert/encoder/layer_{i}/"
        qkv = layer.attention.query_key_value
        slots += [
            _Slot(tuple(f"{prefix}attention/self/{n}/kernel" for n in ("query", "key", "value")), qkv.kernel),
            _Slot(tuple(f"{prefix}attention/self/{n}/bias" for n in ("query", "key", "value")), qkv.bias),
            *_dense(prefix + "attention/output/dense/", layer.attention.output_dense),
            *_layer_norm(prefix + "attention/output/LayerNorm/", layer.attention_layer_norm),
            *_dense(prefix + "intermediate/dense/", layer.intermediate_dense),
            *_dense(prefix + "output/dense/", layer.output_dense),
            *_layer_norm(prefix + "output/LayerNorm/", layer.output_layer_norm),
        ]
    slots += _dense("bert/pooler/dense/", backbone.pooler.dense)
    if mlm_head is not None:
        slots += [
            *_dense(MLM_HEAD_PREFIX + "transform/dense/", mlm_head.dense),
            *_layer_norm(MLM_HEAD_PREFIX + "transform/LayerNorm/", mlm_head.layer_norm),
            _Slot((MLM_HEAD_PREFIX + "output_bias",), mlm_head.output_bias),
        ]
    if nsp_head is not None:
        slots += [
            _Slot((NSP_HEAD_PREFIX + "output_weights",), nsp_head.dense.kernel, transpose=True),
            _Slot((NSP_HEAD_PREFIX + "output_bias",), nsp_head.dense.bias),
        ]
    return slots


def original_shapes(model):
    """`{original name: shape}` of every tensor the model holds."""
    shapes = {}
    for slot in _slots(model):
        shapes.update(slot.original_shapes())
    return shapes


def get_original_weights(model):
    """`{original name: numpy array}` of every tensor the model holds.

    Raises `ValueError` for a masked-LM head whose activation or epsilon is
    not the backbone's (as a model read from a keras-hub `BertMaskedLM`
    preset has): the original config has no field for them, so the written
    checkpoint would load as a different model.
    """
    _, mlm_head, _ = _parts(model)
    config = backbone_of(model).bert_config
    if mlm_head is not None:
        for field, head_value, value in (
                ("hidden_act", mlm_head.hidden_act, config.hidden_act),
                ("layer_norm_eps", mlm_head.layer_norm_eps, config.layer_norm_eps)):
            if head_value != value:
                raise ValueError(
                    f"The masked-LM head of this {type(model).__name__} has {field}="
                    f"{head_value!r} but its backbone {field}={value!r}; the original "
                    "checkpoint formats have one field for both. Write its `.backbone` "
                    "instead (the head is then dropped).")
    tensors = {}
    for slot in _slots(model):
        tensors.update(slot.read())
    return tensors


def set_original_weights(model, tensors, source, describe=str):
    """Assigns `{original name: array}` to the model, strictly.

    Every tensor the model needs must be present with its exact shape and
    every given tensor must be used; otherwise a `ValueError` names the first
    offending tensor (through `describe`, so a Hugging Face loader can name
    its own key) and nothing is assigned.

    Args:
        model: a BertBackbone, BertPretrainer or BertMaskedLMPretrainer.
        tensors: dict of original name -> array.
        source: str. The file or folder, quoted in errors.
        describe: callable. Original name -> the name shown in errors.
    """
    slots = _slots(model)
    expected = original_shapes(model)
    missing = [name for name in expected if name not in tensors]
    unused = sorted(name for name in tensors if name not in expected)
    if missing:
        # Both at once usually means names the model does not read (another
        # prefix, another architecture): say which it holds instead.
        instead = (f"; it holds {len(unused)} tensors the model has no place for, e.g. "
                   f"{describe(unused[0])!r}" if unused else "")
        raise ValueError(
            f"{source} lacks tensor {describe(missing[0])!r} "
            f"({len(missing)} missing in all) for a {type(model).__name__} "
            f"with {model_summary(model)}{instead}."
        )
    if unused:
        raise ValueError(
            f"{source} holds unexpected tensor {describe(unused[0])!r} ({len(unused)} "
            f"unexpected in all) that a {type(model).__name__} with "
            f"{model_summary(model)} has no place for. Check the config, or load it "
            "into the model with the matching heads."
        )
    for name, shape in expected.items():
        got = tuple(np.shape(tensors[name]))
        if got != shape:
            raise ValueError(
                f"Tensor {describe(name)!r} in {source} has shape {got}; the model "
                f"expects {shape}. Does the config match the checkpoint?"
            )
    for slot in slots:
        slot.write(tensors)


def backbone_of(model):
    """The `BertBackbone` inside any of our BERT models."""
    return _parts(model)[0]


def model_summary(model):
    config = backbone_of(model).bert_config
    return (
        f"L={config.num_hidden_layers}, H={config.hidden_size}, "
        f"V={config.vocab_size}"
    )


def build_model_for(config, names, dtype=None):
    """The model a checkpoint's tensor names call for.

    Pretraining heads present -> `BertPretrainer` (both) or
    `BertMaskedLMPretrainer` (masked LM only); none -> `BertBackbone`.
    """
    backbone = BertBackbone.from_bert_config(config, dtype=dtype)
    has_mlm = any(name in MLM_HEAD_NAMES for name in names)
    has_nsp = any(name in NSP_HEAD_NAMES for name in names)
    if has_mlm and has_nsp:
        return BertPretrainer(backbone)
    if has_mlm:
        return BertMaskedLMPretrainer(backbone)
    return backbone
