"""Bad input (issue 17) to checkpoint conversion (`training.convert_checkpoint`)
and to the checkpoint loaders: `load_backbone`, `load_hf_checkpoint`.

The table's machinery, and what each case asserts of the exit status,
the message and the output folder: `tests/bad_input_cases.py`.
"""

import os
import shutil
import sys
import zipfile

import numpy as np
import pytest
from bad_input_cases import command
from bad_input_cases import outcome
from bad_input_cases import table
from bad_input_cases import write_text

CASES, case, test_bad_input, assets = table()


# --- training.convert_checkpoint and the checkpoint loaders ----------------------------------

def _convert(a, out, *flags_):
    from training import convert_checkpoint

    return command(convert_checkpoint, f"--input={a.hf_folder}", "--input_format=hf",
                   f"--output={out}", "--output_format=keras", *flags_)


def _convert_fixed(a, out):
    got = _convert(a, out)
    assert os.path.isfile(os.path.join(out, "keras", "model.keras")), got
    return got


@case(1, lambda a, out: ["--output_format", "'onnx'"], "usable", _convert_fixed)
def case_convert_unknown_output_format(a, out):
    return _convert(a, out, "--output_format=keras,onnx")


@case(1, lambda a, out: ["--input=" + a.path("no_such_model")], "usable", _convert_fixed)
def case_convert_input_missing(a, out):
    return _convert(a, out, f"--input={a.path('no_such_model')}")


@case(1, lambda a, out: ["--input=", "--input_format=hf reads a folder"], "usable",
      _convert_fixed)
def case_convert_hf_input_is_a_file(a, out):
    return _convert(a, out, f"--input={a.corpus}")


@case(1, lambda a, out: ["--vocab_file=" + a.path("no_vocab.txt")], "usable", _convert_fixed)
def case_convert_vocab_file_missing(a, out):
    return _convert(a, out, f"--vocab_file={a.path('no_vocab.txt')}")


@case(1, lambda a, out: [a.path("corrupt.keras"), "not a valid .keras file"], "usable",
      _convert_fixed)
def case_convert_corrupt_keras_file(a, out):
    write_text(a.path("corrupt.keras"), "not a zip archive")
    return _convert(a, out, f"--input={a.path('corrupt.keras')}", "--input_format=keras")


@case(1, lambda a, out: ["unexpected tensor 'cls.predictions.stray'"], "usable",
      _convert_fixed)
def case_convert_hf_folder_with_a_stray_tensor(a, out):
    import safetensors.numpy

    folder = a.path("hf_stray")
    if not os.path.isdir(folder):
        shutil.copytree(a.hf_folder, folder)
        path = os.path.join(folder, "model.safetensors")
        tensors = safetensors.numpy.load_file(path)
        tensors["cls.predictions.stray"] = np.zeros(3, np.float32)
        safetensors.numpy.save_file(tensors, path)
    return _convert(a, out, f"--input={folder}")


@case(1, lambda a, out: ["No model.safetensors in"], "usable", _convert_fixed)
def case_convert_hf_folder_without_weights(a, out):
    folder = a.path("hf_no_weights")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(a.hf_folder, "config.json"), folder)
    return _convert(a, out, f"--input={folder}")


@case(1, lambda a, out: ["--output=" + out, "is a file"], "unchanged",
      prepare=lambda a, out: write_text(out, "a file"))
def case_convert_output_is_a_file(a, out):
    return _convert(a, out)


@case(ValueError, lambda a, out: [a.path("truncated.keras"), "not a valid .keras file"])
def case_load_backbone_truncated_keras_file(a, out):
    from keras_bert_impl.bert.load_backbone import load_backbone

    path = a.path("truncated.keras")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", "{}" * 2000)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    return outcome(lambda: load_backbone(path))


@case(ValueError, lambda a, out: [a.path("other.keras"), "without the model's config.json"])
def case_load_backbone_zip_that_is_no_keras_file(a, out):
    from keras_bert_impl.bert.load_backbone import load_backbone

    path = a.path("other.keras")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "hello")
    return outcome(lambda: load_backbone(path))


@case(ValueError, lambda a, out: ["unexpected tensor 'cls.seq_relationship.weight'",
                                  "BertBackbone"])
def case_hf_nsp_tensor_without_the_mlm_head(a, out):
    import safetensors.numpy

    from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint

    folder = a.path("hf_nsp_only")
    if not os.path.isdir(folder):
        shutil.copytree(a.hf_folder, folder)
        path = os.path.join(folder, "model.safetensors")
        tensors = safetensors.numpy.load_file(path)
        tensors["cls.seq_relationship.weight"] = np.zeros((2, 12), np.float32)
        safetensors.numpy.save_file(tensors, path)
    return outcome(lambda: load_hf_checkpoint(folder))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
