"""The export formats a deployer's runtime reads, and what each needs
installed: `FORMATS`, `parse_formats` (the `--export_formats` flag's value),
`check_installed` (a clear message naming the `[export]` extra) and
`check_quantize` (the `--quantize` flag's).

Nothing here imports TensorFlow or a runtime: the commands check the flag
before they read data or train.
"""

import dataclasses
import importlib.util


@dataclasses.dataclass(frozen=True)
class Format:
    """One export format: its folder under the export (`name`), the file
    Keras' `model.export(format=keras_format)` writes in it, and the Python
    modules the export and its runtime need (`modules`; the pip
    distributions, for the message, in `packages`)."""

    name: str
    keras_format: str
    file: str
    runtime: str  # the pip distribution that runs the file
    modules: tuple = ()
    packages: tuple = ()
    int8_modules: tuple = ()  # and their packages: what `--quantize=int8` needs more
    int8_packages: tuple = ()


FORMATS = {
    "saved_model": Format("saved_model", "tf_saved_model", "", "tensorflow"),
    "onnx": Format("onnx", "onnx", "model.onnx", "onnxruntime",
                   ("tf2onnx", "onnx", "onnxruntime"), ("tf2onnx", "onnx", "onnxruntime")),
    "openvino": Format("openvino", "openvino", "model.xml", "openvino", ("openvino",),
                       ("openvino",), ("nncf",), ("nncf",)),
    "litert": Format("litert", "litert", "model.tflite", "ai-edge-litert", ("ai_edge_litert",),
                     ("ai-edge-litert",)),
}
EXTRA = "pip install 'keras-bert-impl[export]'"
QUANTIZE_MODES = ("none", "int8")


def parse_formats(text, flag="--export_formats"):
    """`("saved_model", "onnx", ...)` of a comma-separated `text`, in the
    order given; `ValueError` naming `flag` for an unknown, repeated or
    missing name."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError(f"{flag}={text!r}: name at least one of {', '.join(FORMATS)}.")
    unknown = [name for name in names if name not in FORMATS]
    if unknown:
        raise ValueError(f"{flag}={text!r}: {', '.join(map(repr, unknown))} not one of "
                         f"{', '.join(FORMATS)}.")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{flag}={text!r}: {', '.join(repeated)} named twice.")
    return tuple(names)


def check_installed(names, flag="--export_formats", int8=False):
    """`ValueError` naming the formats of `names` whose converter or runtime
    (`int8`: or quantisation tool) is not installed, what is missing and the
    extra that installs it."""
    missing = {}
    for name in names:
        found = FORMATS[name]
        modules = found.modules + (found.int8_modules if int8 else ())
        packages = found.packages + (found.int8_packages if int8 else ())
        lacking = [package for module, package in zip(modules, packages)
                   if importlib.util.find_spec(module) is None]
        if lacking:
            missing[name] = lacking
    if missing:
        shown = "; ".join(f"{name} needs {', '.join(lacking)}" for name, lacking in missing.items())
        raise ValueError(f"{flag}: {shown}, not installed here. {EXTRA} installs the runtimes "
                         "(the SavedModel needs none of them).")


def check_quantize(names, quantize):
    """`ValueError` naming `--quantize` for a mode not in `QUANTIZE_MODES`,
    or int8 asked of formats `names` it does not apply to: each runtime
    format is quantised by its runtime's own tool
    (`keras_bert_impl.runtimes.quantize`); the SavedModel has none."""
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"--quantize={quantize!r} is not one of: {', '.join(QUANTIZE_MODES)}.")
    if quantize == "none":
        return
    if "saved_model" in names:
        raise ValueError(f"--quantize={quantize} quantises the runtime exports (onnx, openvino, "
                         "litert) with their runtimes' own tools; the SavedModel has no int8 "
                         "export: leave saved_model out of --export_formats.")
    check_installed(names, "--quantize", int8=True)


def check_family_formats(family, model, export_formats):
    """`SystemExit` naming `--export_formats` when it asks `--model`'s
    family (`family`, a fine-tuning or pretraining recipe, its class or
    instance: its `export_formats` and `export_refusal`) for a format it
    does not convert to, with the family's reason."""
    unsupported = [name for name in parse_formats(export_formats)
                   if name not in family.export_formats]
    if unsupported:
        raise SystemExit(f"--export_formats={export_formats}: --model={model} exports "
                         f"{', '.join(family.export_formats)}, not {', '.join(unsupported)}: "
                         f"{family.export_refusal}")
