"""The conversions of `training.convert_checkpoint`: a BERT checkpoint read
in one format (Hugging Face, original Google, `.keras`), written in others,
and each result reloaded and compared with the original on the same inputs.

The command imports this module once its flags are checked, inside its
console: the checkpoints' models import TensorFlow."""

import os

import keras
import numpy as np

from keras_bert_impl.bert.google_checkpoint import load_google_checkpoint
from keras_bert_impl.bert.google_checkpoint import save_google_checkpoint
from keras_bert_impl.bert.google_names import backbone_of
from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint
from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint
from keras_bert_impl.checkpoints.keras_files import check_keras_file


def load(path, fmt):
    if fmt == "hf":
        return load_hf_checkpoint(path)
    if fmt == "google":
        return load_google_checkpoint(path)
    check_keras_file(path)
    return keras.saving.load_model(path, safe_mode=True)


def save(model, folder, fmt, vocab_file):
    if fmt == "hf":
        save_hf_checkpoint(model, folder, vocab_file=vocab_file)
        return folder
    if fmt == "google":
        save_google_checkpoint(model, folder, vocab_file=vocab_file)
        return folder
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.keras")
    tmp = os.path.join(folder, ".tmp-model.keras")
    model.save(tmp)
    os.replace(tmp, path)
    return path


def sample_inputs(model, batch=4, seq=32):
    config = backbone_of(model).bert_config
    rng = np.random.default_rng(0)
    seq = min(seq, config.max_position_embeddings)
    # Ids past the special and [unusedN] ones of a real vocabulary; any id of a tiny one.
    ids = rng.integers(1000 if config.vocab_size > 2000 else 0, config.vocab_size,
                       (batch, seq)).astype("int32")
    mask = np.ones_like(ids)
    mask[0, seq // 2:] = 0
    x = {"input_word_ids": ids, "input_mask": mask,
         "input_type_ids": (np.arange(seq)[None] >= seq // 3).astype("int32") * mask}
    if len(model.inputs) == 4:
        x["masked_lm_positions"] = np.tile(np.arange(1, 6, dtype="int32"), (batch, 1))
    return x


def convert(path, fmt, vocab_file, output, output_formats):
    """Reads the checkpoint `path` (format `fmt`) whole, then writes it in
    each of `output_formats` under `output/<format>`, reloads it and stops
    (`SystemExit`) if its outputs differ from the original's at all."""
    try:
        model = load(path, fmt)
        config = backbone_of(model).bert_config
    except ValueError as e:
        raise SystemExit(f"--input={path}: {e}") from None
    print(f"Loaded {type(model).__name__} ({fmt}): {config}")
    print(f"Parameters: {model.count_params():,}")
    x = sample_inputs(model)
    reference = model(x)
    for out_fmt in output_formats:
        written = save(model, os.path.join(output, out_fmt), out_fmt, vocab_file)
        again = load(written, out_fmt)
        diff = max(np.abs(np.asarray(a) - np.asarray(b)).max()
                   for a, b in zip(keras.tree.flatten(reference), keras.tree.flatten(again(x))))
        print(f"Wrote {out_fmt:6s} -> {written}; reloaded, max |difference| = {diff:.1e}")
        if diff != 0:
            raise SystemExit(f"Conversion to {out_fmt} changed the outputs by {diff}.")
