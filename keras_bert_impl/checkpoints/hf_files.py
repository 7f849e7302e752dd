"""What every family's Hugging Face folder shares: the file names and the
tensors of `model.safetensors`."""

import os
import re

import numpy as np
import safetensors.numpy

from keras_bert_impl.base.json_files import write_atomic

WEIGHTS_FILE = "model.safetensors"


CONFIG_FILE = "config.json"


def _legacy_spelling(key):
    """Old transformers files spell LayerNorm weights gamma/beta."""
    return re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key))


def read_hf_tensors(folder):
    """`{Hugging Face key: float32 array}` from `model.safetensors`."""
    path = os.path.join(folder, WEIGHTS_FILE)
    if not os.path.exists(path):
        raise ValueError(f"No {WEIGHTS_FILE} in {folder}.")
    try:
        tensors = safetensors.numpy.load_file(path)
    except Exception as e:  # safetensors raises its own error types
        raise ValueError(f"Cannot read {path}: {e}") from e
    return {_legacy_spelling(k): np.asarray(v, dtype=np.float32) for k, v in tensors.items()}


def write_hf_tensors(folder, tensors):
    """Writes `{key: array}` as `folder`'s `model.safetensors`, atomically."""
    # "pt": transformers loads only safetensors files marked as PyTorch's.
    write_atomic(os.path.join(folder, WEIGHTS_FILE),
                 lambda tmp: safetensors.numpy.save_file(tensors, tmp, metadata={"format": "pt"}),
                 ".safetensors")
