"""A Hugging Face folder's `config.json`, read as every family's converter
reads it (`hf_files` holds its name and the weights' files)."""

import os

from keras_bert_impl.base.json_files import read_json_file
from keras_bert_impl.checkpoints.hf_files import CONFIG_FILE


def read_hf_config_values(folder):
    """`(path, values)`: where `folder`'s `config.json` is and its JSON object.

    `ValueError` when the folder has none (not a Hugging Face model folder)
    or the file holds no JSON object.
    """
    path = os.path.join(folder, CONFIG_FILE)
    if not os.path.exists(path):
        raise ValueError(f"No {CONFIG_FILE} in {folder}: not a Hugging Face model folder.")
    values = read_json_file(path)
    if not isinstance(values, dict):
        raise ValueError(f"{path} holds no JSON object.")
    return path, values
