"""An export of `keras_bert_impl.runtimes.export` loaded back in its own
runtime (`load_export`): a callable from the model's input ids to its
outputs by name, as a deployer would run it. The parity tests and the
serving benchmark run the exports through it.
"""

import json
import os
import re

import numpy as np


def load_export(folder, threads=None):
    """The export in `folder` (its `serving_info.json` says which runtime),
    ready to run: `runner(inputs) -> {output name: array}`, `inputs` a dict
    of arrays by input name. `threads`: the runtime's intra-op threads
    (None: its default)."""
    with open(os.path.join(folder, "serving_info.json"), encoding="utf-8") as f:
        info = json.load(f)
    path = os.path.join(folder, info["file"])
    runner = {"onnx": _OnnxRunner, "openvino": _OpenVinoRunner, "litert": _LiteRtRunner}[
        info["format"]]
    return runner(path, info, threads)


class _Runner:
    def __init__(self, path, info, threads):
        self.info = info
        self.inputs = {spec["name"]: spec["dtype"] for spec in info["inputs"]}
        self.outputs = info["outputs"]
        self.load(path, threads)

    def feed(self, inputs):
        missing = sorted(set(self.inputs) - set(inputs))
        if missing:
            raise ValueError(f"The export takes {sorted(self.inputs)}; missing {missing}.")
        return {name: np.asarray(inputs[name], dtype) for name, dtype in self.inputs.items()}

    def __call__(self, inputs):
        return dict(zip(self.outputs, self.run(self.feed(inputs))))


class _OnnxRunner(_Runner):
    def load(self, path, threads):
        import onnxruntime  # lazy: the [export] extra

        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(path, options,
                                                    providers=["CPUExecutionProvider"])

    def run(self, feed):
        return self.session.run(None, {i.name: feed[i.name] for i in self.session.get_inputs()})


class _OpenVinoRunner(_Runner):
    def load(self, path, threads):
        import openvino  # lazy: the [export] extra

        config = dict(self.info.get("runtime_config", {}))
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        self.compiled = openvino.Core().compile_model(path, "CPU", config)
        self.request = self.compiled.create_infer_request()

    def run(self, feed):
        results = self.request.infer({i.get_any_name(): feed[i.get_any_name()]
                                      for i in self.compiled.inputs})
        return [results[output] for output in self.compiled.outputs]


class _LiteRtRunner(_Runner):
    def load(self, path, threads):
        from ai_edge_litert.interpreter import Interpreter  # lazy: the [export] extra

        self.interpreter = Interpreter(model_path=path, num_threads=threads)
        self.signature = self.interpreter.get_signature_runner()

    def run(self, feed):
        results = self.signature(**feed)
        if set(results) == set(self.outputs):
            return [results[name] for name in self.outputs]
        # Unnamed outputs: output_0, output_1, ... in order.
        return [results[key] for key in sorted(
            results, key=lambda k: int(re.search(r"(\d+)$", k).group(1)))]
