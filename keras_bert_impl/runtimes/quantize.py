"""int8 of a runtime export, each by its runtime's own post-training tool
(`quantize_for_runtime`), into `<format>_int8/` beside the fp32 folder:
- ONNX Runtime: `onnxruntime.quantization.quantize_dynamic`, int8 weights
  and activations quantised batch by batch at run time;
- OpenVINO: NNCF's `compress_weights`, int8 weights (asymmetric, per
  output channel), activations in fp32 (the f32 hint kept);
- LiteRT: the converter's dynamic-range quantisation
  (`optimizations=[tf.lite.Optimize.DEFAULT]`, passed through Keras'
  `model.export`), int8 weights.

No calibration data: each tool's weight-only or dynamic mode, the one its
documentation gives for transformer encoders without a calibration set.
"""

import importlib.metadata
import json
import os
import shutil

import tensorflow as tf

from keras_bert_impl.runtimes.export import input_signature
from keras_bert_impl.runtimes.export import swap_folder
from keras_bert_impl.runtimes.formats import FORMATS
from keras_bert_impl.speed.plain_ops import plain_ops

TOOLS = {
    "onnx": ("onnxruntime", "onnxruntime.quantization.quantize_dynamic (QInt8 weights, "
                            "dynamic activations)"),
    "openvino": ("nncf", "nncf.compress_weights (INT8_ASYM weights, fp32 activations)"),
    "litert": ("tensorflow", "TFLiteConverter dynamic-range quantisation "
                             "(optimizations=[tf.lite.Optimize.DEFAULT])"),
}


def int8_folder_name(name):
    """The folder of format `name`'s int8 export: `<name>_int8`."""
    return f"{name}_int8"


def model_files(folder):
    """The paths of the model's own files in an export `folder` (OpenVINO:
    the IR's .xml and its weights' .bin), not the tokenizer's."""
    with open(os.path.join(folder, "serving_info.json"), encoding="utf-8") as f:
        info = json.load(f)
    path = os.path.join(folder, info["file"])
    return [path, path[:-len(".xml")] + ".bin"] if info["format"] == "openvino" else [path]


def weights_bytes(folder):
    """The bytes of the model's files in an export `folder`."""
    return sum(os.path.getsize(path) for path in model_files(folder))


def quantize_for_runtime(model, export_dir, name):
    """Writes `<export_dir>/<name>_int8/` from the fp32 export in
    `<export_dir>/<name>/` (its tokenizer, `text_to_ids.py`, and
    `serving_info.json` with the precision, tool and its version), swapped
    in whole; returns its path. `model`: the Keras model the fp32 export
    came from (LiteRT converts it again)."""
    found = FORMATS[name]
    source = os.path.join(export_dir, name)
    folder = os.path.join(export_dir, int8_folder_name(name))
    partial = folder + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    skipped = {os.path.basename(path) for path in model_files(source)}
    shutil.copytree(source, partial, ignore=lambda _, names: [n for n in names if n in skipped])
    path = os.path.join(partial, found.file)
    {"onnx": _onnx, "openvino": _openvino, "litert": _litert}[name](
        model, os.path.join(source, found.file), path)
    info_path = os.path.join(partial, "serving_info.json")
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    package, tool = TOOLS[name]
    info.update(precision="int8", quantization=tool,
                versions={**info["versions"], package: importlib.metadata.version(package)})
    with open(info_path, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2, ensure_ascii=False)
    swap_folder(partial, folder)
    return folder


def _onnx(model, source, path):
    del model
    from onnxruntime.quantization import QuantType  # lazy: the [export] extra
    from onnxruntime.quantization import quantize_dynamic

    quantize_dynamic(source, path, weight_type=QuantType.QInt8)


def _openvino(model, source, path):
    del model
    import nncf  # lazy: the [export] extra
    import openvino as ov

    compressed = nncf.compress_weights(ov.Core().read_model(source),
                                       mode=nncf.CompressWeightsMode.INT8_ASYM)
    ov.save_model(compressed, path, compress_to_fp16=False)


def _litert(model, source, path):
    del source
    with plain_ops():
        model.export(path, format="litert", verbose=False, input_signature=input_signature(model),
                     optimizations=[tf.lite.Optimize.DEFAULT])
