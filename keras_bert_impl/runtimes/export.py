"""A task model exported for the runtime a deployer picks: ONNX Runtime,
OpenVINO or LiteRT (`export_for_runtime`), through Keras' own
`model.export(format=...)`.

Each format gets its own folder beside the SavedModel, swapped in whole:
the model file, the tokenizer's files, `text_to_ids.py` (a few lines that turn
text into the model's input ids with this package's tokenizer: the
runtimes take ids, not text) and `serving_info.json` (the format, the
runtime and converter versions, the precision, the inputs' and outputs'
names and the runtime settings the parity was measured with).

What the converters needed of our layers, fixed there, not here:
- tf2onnx has no `Erfc` (TensorFlow's `Gelu`), and OpenVINO made each
  custom gradient's `IdentityN` an output: exports trace inside
  `keras_bert_impl.speed.plain_ops.plain_ops()`;
- LiteRT's builtin strided slice takes no new axes: the attention mask is
  expanded with `expand_dims` (`attention_bias_from_mask`), and the other
  layers index with `keras.ops` calls that need no new axis either.

What is done here: OpenVINO's TensorFlow frontend also makes every tensor
that no op reads an output of the model (shapes a layer computes for
another path: 16 of them in a BERT classifier), so the IR keeps only the
Keras model's outputs (`_keep_model_outputs`).
"""

import importlib.metadata
import json
import os
import re
import shutil

import keras
import tensorflow as tf

from keras_bert_impl.runtimes.formats import FORMATS
from keras_bert_impl.speed.plain_ops import plain_ops

# fp32 against fp32: OpenVINO runs bf16 on CPUs with AMX or avx512_bf16 unless told.
OPENVINO_FP32 = {"INFERENCE_PRECISION_HINT": "f32"}


def output_names(model):
    """The names of the model's outputs in the order the exports return
    them (Keras' flattening: a dict's keys sorted): a dict's keys, else
    `output_0`, `output_1`, ..."""
    outputs = model.output
    if isinstance(outputs, dict):
        return sorted(outputs)
    return [f"output_{i}" for i in range(len(keras.tree.flatten(outputs)))]


def input_signature(model):
    """The model's inputs as `tf.TensorSpec`s in their structure (a dict by
    name), the one positional argument Keras' exporters trace: given, a model
    loaded from a `.keras` file and never called exports too."""
    return [keras.tree.map_structure(
        lambda t: tf.TensorSpec(t.shape, t.dtype, name=t.name.split(":")[0]), model.input)]


def input_specs(model):
    """`[{"name", "dtype", "shape"}]` of the model's inputs (None: any size)."""
    return [{"name": t.name.split(":")[0], "dtype": str(t.dtype), "shape": list(t.shape)}
            for t in model.inputs]


def export_for_runtime(model, export_dir, name, files=(), tokenize_source=None, info=None):
    """Writes `<export_dir>/<name>/` for the runtime of format `name`
    (`FORMATS`), replacing an earlier one whole, and returns its path.

    Args:
        model: a built Keras task model (token ids in, logits out).
        export_dir: str. The export's folder (the SavedModel's parent).
        name: str. "onnx", "openvino" or "litert".
        files: paths copied beside the model (the tokenizer's).
        tokenize_source: str or None. `text_to_ids.py`'s text.
        info: dict or None. More for `serving_info.json` (the task, labels).
    """
    found = FORMATS[name]
    folder = os.path.join(export_dir, name)
    partial = folder + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    path = os.path.join(partial, found.file)
    with plain_ops():
        model.export(path, format=found.keras_format, verbose=False,
                     input_signature=input_signature(model))
    names = output_names(model)
    if name == "openvino":
        _keep_model_outputs(path, names)
    for source in files:
        shutil.copy(source, os.path.join(partial, os.path.basename(source)))
    if tokenize_source:
        with open(os.path.join(partial, "text_to_ids.py"), "w", encoding="utf-8") as f:
            f.write(tokenize_source)
    serving = {"format": name, "file": found.file, "runtime": found.runtime,
               "versions": _versions(found), "precision": "fp32",
               "inputs": input_specs(model), "outputs": names,
               "runtime_config": OPENVINO_FP32 if name == "openvino" else {},
               **(info or {})}
    with open(os.path.join(partial, "serving_info.json"), "w", encoding="utf-8") as f:
        json.dump(serving, f, indent=2, ensure_ascii=False)
    swap_folder(partial, folder)
    return folder


def swap_folder(partial, folder):
    """Puts the finished `partial` folder at `folder`: an earlier `folder`
    is moved aside first and removed once the new one is in place."""
    old = folder + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(folder):
        os.replace(folder, old)
    os.replace(partial, folder)
    shutil.rmtree(old, ignore_errors=True)


def _versions(found):
    """The runtime's, the converter's, Keras' and TensorFlow's versions."""
    names = dict.fromkeys((found.runtime, *found.packages, "keras", "tensorflow"))
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _keep_model_outputs(path, names):
    """Rewrites the OpenVINO IR at `path` with only the traced function's
    outputs, named `names`: a dict's outputs carry their keys, others are
    `Identity:0`, `Identity_1:0`, ... in order."""
    import openvino as ov  # lazy: the [export] extra

    model = ov.Core().read_model(path)
    found = {}
    for output in model.outputs:
        for tensor_name in output.get_names():
            matched = re.fullmatch(r"Identity(?:_(\d+))?:0", tensor_name)
            if tensor_name in names:
                found[tensor_name] = output
            elif matched:
                found[f"output_{int(matched.group(1) or 0)}"] = output
    if any(name not in found for name in names):
        raise ValueError(f"{path}: the outputs {names} not all found among "
                         f"{[sorted(o.get_names()) for o in model.outputs]}.")
    kept = [found[name] for name in names]
    for output, name in zip(kept, names):
        output.get_tensor().set_names({name})
    pruned = ov.Model(kept, model.get_parameters(), model.get_friendly_name())
    os.remove(path)
    os.remove(path[:-len(".xml")] + ".bin")
    ov.serialize(pruned, path)
