"""Serving on the runtimes deployers pick: our ONNX and OpenVINO exports
(`--export_formats`, `--quantize=int8`) against transformers' own ONNX
export of the same weights, and our SavedModel, one MiniLM classifier.

Each side runs in its own process; rounds alternate between the sides (a
shared machine's drift hits all alike). Per sequence length: batch-1
latency p50 and p99 over `--latency_calls` requests a round, pooled over
rounds, and batch-`--batch_size` throughput (the median of
`--throughput_calls` calls, the best round). Token ids in, logits out: the
runtimes take ids (the text is tokenized beside them, `text_to_ids.py`).

The sides, each with the machine's cores as its threads:
- `ours_onnx`, `ours_openvino`: `keras_bert_impl.runtimes.export_for_runtime`
  of our `BertClassifier` (Keras' `model.export`), fp32;
- `ours_onnx_int8`, `ours_openvino_int8`: their `--quantize=int8` folders
  (ONNX Runtime's dynamic quantisation; NNCF's int8 weight compression);
- `ours_saved_model`: our SavedModel on TensorFlow, served as
  docs/serving.md says (its row branches, 1 intra-op thread);
- `hf_onnx`, `hf_onnx_int8`: `transformers.BertForSequenceClassification`
  exported by `torch.onnx.export` (dynamic batch and length, opset 17),
  fp32 and through the same `quantize_dynamic`, on ONNX Runtime;
- `hf_openvino`, `hf_openvino_int8`: that ONNX file read by OpenVINO, fp32
  and through the same `nncf.compress_weights`.

ONNX Runtime sessions all get every graph optimization; OpenVINO all get
`INFERENCE_PRECISION_HINT=f32` (on a CPU with AMX or avx512_bf16 it runs
bf16 otherwise), so fp32 is compared with fp32 and int8 (int8 weights,
fp32 activations in OpenVINO) with int8. The ratios are to `hf_onnx`, or
to `hf_onnx_int8` for the int8 rows. Parity: each side's batch logits,
max abs difference from `hf_onnx`'s.

The transformers sides need torch, transformers, onnxruntime, openvino and
nncf (the `bench` and `export` extras); `--peer_python` runs them with
another interpreter (one without TensorFlow is fine: they import nothing
of this package).

    python benchmarks/runtime_speed.py --peer_python=/path/to/torchenv/bin/python
    python benchmarks/runtime_speed.py --seq_lengths=32 --rounds=1 --latency_calls=20
"""

import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
from absl import app
from absl import flags
from serving_peers import ask
from serving_peers import ids as request_ids
from serving_peers import ort_session
from serving_peers import prepare
from serving_peers import start_worker
from serving_peers import threads

FP32 = ("ours_onnx", "ours_openvino", "ours_saved_model", "hf_onnx", "hf_openvino")
INT8 = ("ours_onnx_int8", "ours_openvino_int8", "hf_onnx_int8", "hf_openvino_int8")
SIDES = FP32 + INT8
OPENVINO_FP32 = {"INFERENCE_PRECISION_HINT": "f32"}

FLAGS = flags.FLAGS
flags.DEFINE_string("seq_lengths", "32,128", "Sequence lengths, comma-separated.")
flags.DEFINE_integer("batch_size", 32, "Sequences per throughput request.")
flags.DEFINE_integer("rounds", 3, "Alternating rounds per side and length.")
flags.DEFINE_integer("latency_calls", 100, "Batch-1 requests per round.")
flags.DEFINE_integer("throughput_calls", 4, "Batch requests per round (their median).")
flags.DEFINE_string("peer_python", sys.executable, "Interpreter of the transformers sides (an "
                    "environment with the bench and export extras).")
flags.DEFINE_enum("worker", None, list(SIDES) + ["peer_exports"], "Internal: one side's worker.")
flags.DEFINE_string("folder", None, "Internal: the worker's shared folder.")


# --- the exports -------------------------------------------------------------------------------


def _our_exports(folder):
    """Our classifier of the folder's weights: its ONNX and OpenVINO exports
    and their int8 (`<folder>/ours/`), and its SavedModel."""
    from keras_bert_impl.bert.bert_classifier import BertClassifier
    from keras_bert_impl.bert.bert_serving import export_saved_model
    from keras_bert_impl.bert.load_backbone import load_backbone
    from keras_bert_impl.runtimes.export import export_for_runtime
    from keras_bert_impl.runtimes.quantize import quantize_for_runtime

    head = np.load(os.path.join(folder, "head.npz"))
    model = BertClassifier(load_backbone(folder), 2)
    model.output_dense.set_weights([head["kernel"], head["bias"]])
    ours = os.path.join(folder, "ours")
    for name in ("onnx", "openvino"):
        export_for_runtime(model, ours, name)
        quantize_for_runtime(model, ours, name)
    export_saved_model(model, os.path.join(ours, "saved_model"), os.path.join(folder, "vocab.txt"),
                       max_seq_length=512, row_branches=threads())


def _peer_exports(folder):
    """transformers' ONNX export, and its int8 by the same tools as ours."""
    import nncf
    import openvino
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic
    from serving_peers import transformers_onnx

    path = transformers_onnx(folder)
    quantize_dynamic(path, os.path.join(folder, "hf_int8.onnx"), weight_type=QuantType.QInt8)
    compressed = nncf.compress_weights(openvino.Core().read_model(path),
                                       mode=nncf.CompressWeightsMode.INT8_ASYM)
    openvino.save_model(compressed, os.path.join(folder, "hf_int8.xml"), compress_to_fp16=False)


# --- the workers: one process per side ---------------------------------------------------------


def _feed(names, ids):
    """The three inputs by `names`: ours take int32, transformers' int64."""
    ids = ids.astype(np.int32 if names[0] == "input_word_ids" else np.int64)
    return dict(zip(names, (ids, np.ones_like(ids), np.zeros_like(ids))))


class _Onnx:
    def __init__(self, path, names):
        self.session, self.names = ort_session(path), names

    def ids(self, ids):
        return self.session.run(None, _feed(self.names, ids))[0]


class _OpenVino:
    def __init__(self, path, names):
        import openvino

        self.compiled = openvino.Core().compile_model(
            path, "CPU", {**OPENVINO_FP32, "INFERENCE_NUM_THREADS": threads()})
        self.request, self.names = self.compiled.create_infer_request(), names

    def ids(self, ids):
        return self.request.infer(_feed(self.names, ids))[self.compiled.outputs[0]]


class _SavedModel:
    def __init__(self, path):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the tokenizer's ops the SavedModel holds)

        tf.config.threading.set_intra_op_parallelism_threads(1)  # the serving guide's threads
        tf.config.threading.set_inter_op_parallelism_threads(threads())
        self.tf, self.signature = tf, tf.saved_model.load(path).signatures["serving_default"]

    def ids(self, ids):
        tf = self.tf
        return self.signature(input_word_ids=tf.constant(ids),
                              input_mask=tf.constant(np.ones_like(ids)),
                              input_type_ids=tf.constant(np.zeros_like(ids)))["logits"].numpy()


def _side(name, folder):
    ours = ("input_word_ids", "input_mask", "input_type_ids")
    hf = ("input_ids", "attention_mask", "token_type_ids")
    paths = {"ours_onnx": ("onnx", "ours/onnx/model.onnx", ours),
             "ours_onnx_int8": ("onnx", "ours/onnx_int8/model.onnx", ours),
             "ours_openvino": ("openvino", "ours/openvino/model.xml", ours),
             "ours_openvino_int8": ("openvino", "ours/openvino_int8/model.xml", ours),
             "hf_onnx": ("onnx", "model.onnx", hf),
             "hf_onnx_int8": ("onnx", "hf_int8.onnx", hf),
             "hf_openvino": ("openvino", "model.onnx", hf),
             "hf_openvino_int8": ("openvino", "hf_int8.xml", hf)}
    if name == "ours_saved_model":
        return _SavedModel(os.path.join(folder, "ours", "saved_model"))
    runtime, path, names = paths[name]
    return (_Onnx if runtime == "onnx" else _OpenVino)(os.path.join(folder, path), names)


def _worker(args):
    if args.worker == "peer_exports":
        _peer_exports(args.folder)
        print("READY", flush=True)
        return
    side = _side(args.worker, args.folder)
    with open(os.path.join(args.folder, "config.json"), encoding="utf-8") as f:
        vocab_size = json.load(f)["vocab_size"]
    print("READY", flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        ids = request_ids(order["batch"], order["length"], vocab_size)
        logits = side.ids(ids)  # warm: the first call of a shape plans it
        times = []
        for _ in range(order["calls"]):
            start = time.perf_counter()
            side.ids(ids)
            times.append(time.perf_counter() - start)
        print(json.dumps({"times": times, "logits": np.asarray(logits).tolist()}), flush=True)


# --- the driver --------------------------------------------------------------------------------


def _python(side, args):
    return args.peer_python if side.startswith("hf_") or side == "peer_exports" else sys.executable


def _measure(args, folder, lengths):
    procs = {side: start_worker(_python(side, args), __file__, side, [f"--folder={folder}"])
             for side in SIDES}
    latency = {(s, n): [] for s in SIDES for n in lengths}
    rate = {(s, n): [] for s in SIDES for n in lengths}
    logits = {}
    try:
        for _ in range(args.rounds):
            for length in lengths:
                for side in SIDES:  # alternating: one round of each side in turn
                    one = ask(procs[side], length=length, batch=1, calls=args.latency_calls)
                    latency[side, length] += one["times"]
                    many = ask(procs[side], length=length, batch=args.batch_size,
                               calls=args.throughput_calls)
                    rate[side, length].append(args.batch_size / statistics.median(many["times"]))
                    logits[side, length] = np.array(many["logits"])
    finally:
        for proc in procs.values():
            proc.stdin.close()
            proc.wait()
    return latency, rate, logits


def _cpu():
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    return names[0] if names else "unknown CPU"


def main(argv):
    del argv
    args = FLAGS
    if args.worker:
        return _worker(args)
    lengths = [int(x) for x in args.seq_lengths.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        prepare("minilm", folder)
        _our_exports(folder)
        start_worker(_python("peer_exports", args), __file__, "peer_exports",
                     [f"--folder={folder}"]).wait()
        latency, rate, logits = _measure(args, folder, lengths)
    print(f"\nall-MiniLM-L6-v2 classifier, {_cpu()}, {threads()} cores, token ids in; batch-1 "
          f"latency over {args.rounds} x {args.latency_calls} requests, batch {args.batch_size} "
          f"throughput (median of {args.throughput_calls} calls, best round); ratios to "
          "hf_onnx (fp32) or hf_onnx_int8 (int8)")
    print(f"{'side':20s} {'precision':9s} {'len':>4s} {'p50 ms':>8s} {'p99 ms':>8s} "
          f"{'seq/s':>7s} {'p50 x':>6s} {'p99 x':>6s} {'seq/s x':>7s} {'max |dlogit|':>12s}")
    for length in lengths:
        figures = {}
        for side in SIDES:
            times = np.array(latency[side, length]) * 1e3
            figures[side] = (np.percentile(times, 50), np.percentile(times, 99),
                             max(rate[side, length]))
        for side in SIDES:
            peer = figures["hf_onnx_int8" if side in INT8 else "hf_onnx"]
            p50, p99, seqs = figures[side]
            diff = np.abs(logits[side, length] - logits["hf_onnx", length]).max()
            print(f"{side:20s} {'int8' if side in INT8 else 'fp32':9s} {length:4d} {p50:8.2f} "
                  f"{p99:8.2f} {seqs:7.1f} {p50 / peer[0]:6.2f} {p99 / peer[1]:6.2f} "
                  f"{seqs / peer[2]:7.2f} {diff:12.1e}")


if __name__ == "__main__":
    app.run(main)
