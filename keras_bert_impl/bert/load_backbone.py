"""`load_backbone`: the BERT backbone of a checkpoint in any format we read."""

import os

import keras

from keras_bert_impl.bert.bert_backbone import BertBackbone
from keras_bert_impl.bert.bert_bilstm_backbone import BertBiLstmBackbone
from keras_bert_impl.bert.bert_feature_backbone import BertFeatureBackbone
from keras_bert_impl.bert.google_checkpoint import load_google_checkpoint
from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint
from keras_bert_impl.bert.keras_hub_preset import keras_hub_preset_vocab
from keras_bert_impl.bert.keras_hub_preset import load_keras_hub_preset
from keras_bert_impl.checkpoints.hub_names import resolve_checkpoint
from keras_bert_impl.checkpoints.keras_files import check_keras_file
from keras_bert_impl.checkpoints.keras_hub_common import is_keras_hub_preset

FORMATS = (
    "a Hugging Face folder (config.json + model.safetensors)",
    "an original Google folder or prefix (bert_config.json + bert_model.ckpt.*)",
    "a .keras file of any keras_bert_impl model",
    "a keras-hub preset folder (BertBackbone, BertMaskedLM, BertTextClassifier)",
)


def checkpoint_format(path):
    """"hf", "google", "keras" or "keras_hub", from the files at `path`;
    `ValueError` if none."""
    if path.endswith(".keras") and os.path.isfile(path):
        return "keras"
    if is_keras_hub_preset(path):
        return "keras_hub"
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "model.safetensors")):
        return "hf"
    if os.path.exists(os.path.join(folder, "bert_config.json")) and (
            os.path.isdir(path) or os.path.exists(path + ".index")):
        return "google"
    raise ValueError(f"No checkpoint found at {path!r}. Expected one of: {'; '.join(FORMATS)}.")


def load_backbone(path, dtype=None, causal=None):
    """The `BertBackbone` of a checkpoint, with its weights.

    Pretraining heads in the checkpoint are dropped (fine-tuning starts from
    the encoder, as the paper). The format is read from the files.

    Args:
        path: str. A Hugging Face folder, an original Google folder or
            checkpoint prefix, a `.keras` file, or a Hugging Face Hub
            repository id such as "bert-base-uncased" or "org/name@revision"
            (`hub_names.resolve_checkpoint`: the cache when offline).
        dtype: optional dtype policy, e.g. "mixed_bfloat16".
        causal: bool or None. None keeps the checkpoint's attention (a
            `.keras` file of the LTR ablation stays causal); True or False
            rebuilds the backbone with that mask and the same weights (the
            causal mask has no weights of its own).

    Returns:
        `BertBackbone`.
    """
    path = resolve_checkpoint(path)  # a Hub name -> its folder; a Path -> str
    kind = checkpoint_format(path)
    if kind == "hf":
        model = load_hf_checkpoint(path, dtype=dtype)
    elif kind == "google":
        model = load_google_checkpoint(path, dtype=dtype)
    elif kind == "keras_hub":
        model = load_keras_hub_preset(path, dtype=dtype)
    else:
        check_keras_file(path)
        model = keras.saving.load_model(path, compile=False)
    backbone = model if isinstance(model, BertBackbone) else getattr(model, "backbone", None)
    if not isinstance(backbone, BertBackbone):
        raise ValueError(f"{path} holds a {type(model).__name__}, which has no BERT backbone.")
    new_dtype = kind == "keras" and dtype is not None and backbone.dtype_policy.name != dtype
    if new_dtype or (causal is not None and causal != backbone.causal):
        backbone = _rebuilt(backbone, dtype or backbone.dtype_policy.name,
                            backbone.causal if causal is None else causal)
    return backbone


def _rebuilt(backbone, dtype, causal):
    """The same weights in a backbone of another dtype policy or attention mask."""

    def build(like):
        if isinstance(like, BertBiLstmBackbone):
            return BertBiLstmBackbone(build(like.backbone))
        if isinstance(like, BertFeatureBackbone):
            return BertFeatureBackbone(build(like.backbone))
        return BertBackbone.from_bert_config(like.bert_config, causal=causal, dtype=dtype)

    rebuilt = build(backbone)
    rebuilt.set_weights(backbone.get_weights())
    return rebuilt


def find_vocab_file(path):
    """`vocab.txt` beside a checkpoint (a path or Hub name), or None."""
    path = resolve_checkpoint(path)
    if is_keras_hub_preset(path):
        return keras_hub_preset_vocab(path).vocab_file
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    candidate = os.path.join(folder, "vocab.txt")
    return candidate if os.path.exists(candidate) else None
