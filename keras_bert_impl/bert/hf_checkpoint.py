"""Hugging Face BERT folders (`config.json`, `model.safetensors`, `vocab.txt`).

Reads what `transformers` writes for `BertModel` (keys without a prefix) and
`BertForPreTraining` (keys under `bert.` plus `cls.`), and writes the same.
Names go through the original Google names (`google_names`), so this file
only knows how a Hugging Face key spells an original name.
"""

import os
import re

import numpy as np

from keras_bert_impl.base.json_files import copy_atomic
from keras_bert_impl.base.json_files import write_json_atomic
from keras_bert_impl.bert import google_names
from keras_bert_impl.bert.bert_config import BertConfig
from keras_bert_impl.checkpoints.hf_config import read_hf_config_values
from keras_bert_impl.checkpoints.hf_files import CONFIG_FILE
from keras_bert_impl.checkpoints.hf_files import WEIGHTS_FILE
from keras_bert_impl.checkpoints.hf_files import read_hf_tensors
from keras_bert_impl.checkpoints.hf_files import write_hf_tensors

SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size")
VOCAB_FILE = "vocab.txt"

# Buffers and tied copies transformers may store that hold no parameter of
# their own: the decoder is tied to the word embeddings and its bias to
# `cls.predictions.bias` (checked equal on load, never written).
_NON_PARAMETERS = ("embeddings.position_ids",)
_TIED = {
    "cls.predictions.decoder.weight": "bert/embeddings/word_embeddings",
    "cls.predictions.decoder.bias": "cls/predictions/output_bias",
}
_SPECIAL = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}


def hf_name(original, prefix):
    """Original Google name -> (Hugging Face key, transpose?).

    `prefix` is "bert." for BertForPreTraining files and "" for BertModel.
    """
    if original in _SPECIAL:
        return _SPECIAL[original], False
    parts = original.split("/")
    if parts[0] == "bert":
        parts = parts[1:]
        head = prefix
    else:
        head = ""
    parts = [re.sub(r"^layer_(\d+)$", r"layer.\1", p) for p in parts]
    last = parts[-1]
    transpose = last == "kernel"
    if last in ("kernel", "gamma"):
        parts[-1] = "weight"
    elif last == "beta":
        parts[-1] = "bias"
    elif last.endswith("_embeddings"):
        parts.append("weight")
    return head + ".".join(parts), transpose


def read_hf_config(folder):
    path, values = read_hf_config_values(folder)
    # Old openai-gpt configs may lack model_type; their keys (n_embd, ...) differ from BERT's.
    model_type = values.get("model_type", "openai-gpt" if "n_embd" in values else "bert")
    if model_type == "openai-gpt":
        raise ValueError(
            f"{folder} is an OpenAI GPT checkpoint (model_type 'openai-gpt' in config.json), "
            "not BERT. Load it with keras_bert_impl.gpt.load_gpt_checkpoint.")
    if model_type == "xlnet":
        raise ValueError(
            f"{folder} is an XLNet checkpoint (model_type 'xlnet' in config.json), not BERT. "
            "Load it with keras_bert_impl.xlnet.load_xlnet_checkpoint.")
    if model_type != "bert":
        raise ValueError(f"{path} has model_type={model_type!r}; only 'bert' is supported.")
    # A size left out would take BERT-BASE's default and surface as a
    # "missing tensor" of a model the file never described.
    missing = [key for key in SIZE_KEYS if key not in values]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}: the model's size is not "
                         "guessed. Add the checkpoint's values.")
    return BertConfig.from_hf_dict(values, source=path)


def original_name(key, prefix):
    """Hugging Face key -> (original Google name, transpose?); inverse of `hf_name`.

    Returns None for a key that spells no BERT tensor.
    """
    for original, special in _SPECIAL.items():
        if key == special:
            return original, False
    if key.startswith("cls."):
        head, rest = "", key
    elif key.startswith(prefix):
        head, rest = "bert/", key[len(prefix):]
    else:
        return None
    parts = rest.split(".")
    if len(parts) < 2:
        return None
    merged = []
    for part in parts:
        if part.isdigit() and merged and merged[-1] == "layer":
            merged[-1] = f"layer_{part}"
        else:
            merged.append(part)
    parts, last = merged[:-1], merged[-1]
    if parts[-1] == "LayerNorm":
        parts.append({"weight": "gamma", "bias": "beta"}.get(last, last))
    elif parts[-1].endswith("_embeddings") and last == "weight":
        pass
    else:
        parts.append({"weight": "kernel"}.get(last, last))
    original = head + "/".join(parts)
    if hf_name(original, prefix)[0] != key:
        return None
    return original, hf_name(original, prefix)[1]


def hf_to_original(tensors, config, source):
    """Hugging Face tensors -> `{original name: array}` in original layouts.

    Every key must spell an original name; tied copies must equal their
    source. Raises `ValueError` naming the first key that does not fit.
    """
    prefix = "bert." if any(k.startswith("bert.") for k in tensors) else ""
    originals = {}
    for key in sorted(tensors):
        value = tensors[key]
        if key in _TIED or key.removeprefix(prefix) in _NON_PARAMETERS:
            continue
        found = original_name(key, prefix)
        if found is None:
            raise ValueError(
                f"{source} holds unexpected tensor {key!r} that BERT has no place for "
                f"(a {config.num_hidden_layers}-layer model per {CONFIG_FILE})."
            )
        original, transpose = found
        originals[original] = value.T if transpose else value
    for key, original in _TIED.items():
        if key in tensors and original in originals:
            if not np.array_equal(tensors[key], originals[original]):
                raise ValueError(
                    f"{source}: {key!r} should be tied to {hf_name(original, prefix)[0]!r} "
                    "but differs from it; an untied decoder is not BERT's."
                )
    return originals, prefix


def load_hf_checkpoint(folder, dtype=None):
    """Builds the model a Hugging Face BERT folder holds and loads it strictly.

    Returns a `BertBackbone` (a `BertModel` file), or a `BertPretrainer`
    (`BertForPreTraining`: both heads), or `BertMaskedLMPretrainer`
    (`BertForMaskedLM`: MLM head only). Every tensor is used and every shape
    checked; a `ValueError` names the first Hugging Face key that is missing,
    unused or of the wrong shape.

    Args:
        folder: str. Holds `config.json` and `model.safetensors`.
        dtype: optional dtype policy for the built model.
    """
    config = read_hf_config(folder)
    tensors = read_hf_tensors(folder)
    source = os.path.join(folder, WEIGHTS_FILE)
    originals, prefix = hf_to_original(tensors, config, source)
    model = google_names.build_model_for(config, originals, dtype=dtype)
    google_names.set_original_weights(
        model, originals, source, describe=lambda name: hf_name(name, prefix)[0]
    )
    return model


def save_hf_checkpoint(model, folder, vocab_file=None):
    """Writes a model as a Hugging Face BERT folder, each file atomically.

    A backbone is written as `BertModel` (keys without prefix), a pretrainer
    as `BertForPreTraining` / `BertForMaskedLM` (keys under `bert.`).
    """
    os.makedirs(folder, exist_ok=True)
    originals = google_names.get_original_weights(model)
    heads = any(name.startswith("cls/") for name in originals)
    prefix = "bert." if heads else ""
    tensors = {}
    for original, value in originals.items():
        key, transpose = hf_name(original, prefix)
        tensors[key] = np.ascontiguousarray(value.T if transpose else value, dtype=np.float32)
    write_hf_tensors(folder, tensors)
    config = google_names.backbone_of(model).bert_config.to_hf_dict()
    if heads:
        has_nsp = any(name.startswith(google_names.NSP_HEAD_PREFIX) for name in originals)
        config["architectures"] = ["BertForPreTraining" if has_nsp else "BertForMaskedLM"]
    write_json_atomic(os.path.join(folder, CONFIG_FILE), config)
    if vocab_file:
        copy_atomic(vocab_file, os.path.join(folder, VOCAB_FILE))


