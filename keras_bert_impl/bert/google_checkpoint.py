"""Original Google TF1 checkpoints (`bert_config.json`, `bert_model.ckpt.*`).

Reads the checkpoints `google-research/bert` released and its
`run_pretraining.py` writes, pretraining heads included, and writes the same
layout: TF V2 checkpoint files whose keys are the original variable names.
"""

import os
import tempfile

import numpy as np
import tensorflow as tf

from keras_bert_impl.base.json_files import copy_atomic
from keras_bert_impl.bert import google_names
from keras_bert_impl.bert.bert_config import BertConfig
from keras_bert_impl.file_modes import as_if_created

CONFIG_FILE = "bert_config.json"
CHECKPOINT_NAME = "bert_model.ckpt"
VOCAB_FILE = "vocab.txt"


def _is_training_state(name):
    """Optimizer slots and the step counter: not model weights, ignored."""
    return name == "global_step" or name.endswith(("/adam_m", "/adam_v"))


def _checkpoint_prefix(path):
    """Folder or prefix -> checkpoint prefix (`.../bert_model.ckpt`)."""
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        prefix = os.path.join(path, CHECKPOINT_NAME)
    else:
        prefix = path
    if not tf.io.gfile.exists(prefix + ".index"):
        raise ValueError(
            f"No TF checkpoint at {path}: expected {prefix}.index "
            f"(and its .data files)."
        )
    return prefix


def read_google_tensors(path):
    """`{original name: float32 array}`, training state left out."""
    prefix = _checkpoint_prefix(path)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise ValueError(f"Cannot read checkpoint {prefix}: {e}") from e
    return prefix, {
        name: np.asarray(reader.get_tensor(name), dtype=np.float32)
        for name in reader.get_variable_to_shape_map()
        if not _is_training_state(name)
    }


def load_google_checkpoint(path, config=None, dtype=None):
    """Builds the model an original checkpoint holds and loads it strictly.

    Args:
        path: str. A folder with `bert_config.json` and `bert_model.ckpt.*`,
            or a checkpoint prefix (then `config` or a `bert_config.json`
            beside it is needed).
        config: optional `BertConfig`; read from `bert_config.json` if None.
        dtype: optional dtype policy for the built model.

    Returns:
        `BertPretrainer` when the checkpoint has both `cls/predictions` and
        `cls/seq_relationship`, `BertMaskedLMPretrainer` with the first only,
        else `BertBackbone`. `global_step` and Adam slots are ignored; any
        other tensor the model has no place for is an error.
    """
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if config is None:
        config_path = os.path.join(folder, CONFIG_FILE)
        if not os.path.exists(config_path):
            raise ValueError(f"No {CONFIG_FILE} in {folder}; pass `config=`.")
        config = BertConfig.from_json_file(config_path)
    prefix, tensors = read_google_tensors(path)
    model = google_names.build_model_for(config, tensors, dtype=dtype)
    google_names.set_original_weights(model, tensors, prefix)
    return model


def save_google_checkpoint(model, folder, vocab_file=None, name=CHECKPOINT_NAME):
    """Writes `bert_config.json` and `bert_model.ckpt.*` with original names.

    The checkpoint is written under a temporary prefix and renamed into place
    (data file first, index last), so a crash never leaves an index that
    points at a half-written data file.
    """
    os.makedirs(folder, exist_ok=True)
    tensors = google_names.get_original_weights(model)
    names = sorted(tensors)
    tmp_dir = tempfile.mkdtemp(dir=folder, prefix=".tmp-ckpt-")
    try:
        tmp_prefix = os.path.join(tmp_dir, name)
        tf.raw_ops.SaveV2(
            prefix=tmp_prefix,
            tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[tf.constant(tensors[n]) for n in names],
        )
        final_prefix = os.path.join(folder, name)
        files = sorted(os.listdir(tmp_dir), key=lambda f: f.endswith(".index"))
        for file in files:  # .index last
            os.replace(os.path.join(tmp_dir, file), os.path.join(folder, file))
    finally:
        for file in os.listdir(tmp_dir):
            os.remove(os.path.join(tmp_dir, file))
        os.rmdir(tmp_dir)
    google_names.backbone_of(model).bert_config.to_json_file(os.path.join(folder, CONFIG_FILE))
    state = os.path.join(folder, "checkpoint")
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, prefix=".tmp-") as f:
        f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
    as_if_created(f.name)
    os.replace(f.name, state)
    if vocab_file:
        copy_atomic(vocab_file, os.path.join(folder, VOCAB_FILE))
    return final_prefix
