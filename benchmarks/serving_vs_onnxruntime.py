"""Serving latency and throughput: our SavedModel against ONNX Runtime and
`transformers` on PyTorch, the same classifier, each side in its own process.

What a deployer compares: one BERT sentence classifier (all-MiniLM-L6-v2's
encoder, or a random `base`, with one seeded 2-class head; the same
weights on every side), served

- ours: `keras_bert_impl.bert.bert_serving.export_saved_model`, loaded with
  `tf.saved_model.load`, called through `serving_default` (ids in) and
  `serving_text` (raw strings, tokenized in the graph), exported with
  `row_branches` = the cores and the default `head_branches`, served as
  docs/serving.md says (1 intra-op thread, the cores as inter-op threads);
  `ours_one_graph`: the export without either (`row_branches=1`,
  `head_branches=1`) on TensorFlow's default threads
  (the cores as intra-op threads), as every export was before them;
- ONNX Runtime: `transformers.BertForSequenceClassification` exported with
  `torch.onnx.export` (dynamic batch and length), run by an
  `InferenceSession` with every graph optimization (ORT_ENABLE_ALL); its
  text path pays the `tokenizers` fast tokenizer, as its users do;
- PyTorch: the same `transformers` model in `torch.inference_mode()`.

The peers get the machine's cores as intra-op threads. Rounds alternate
between the sides (a shared machine's drift hits all alike); per sequence
length: batch-1 latency p50 and p99 over `--latency_calls` requests per
round, pooled over rounds, and batch-`--batch_size` throughput. The table
gives each side's figures and ours over ONNX Runtime's. Parity: each side's
logits on one fixed batch, max abs difference from ours.

The ceiling: each batch throughput also as a share of the float32 matmul
peak of this machine (one 4096 x 1024 x 1024 matmul on every core, the
better of TensorFlow's oneDNN in `ours_one_graph`'s process and ONNX
Runtime's MLAS in its own), counting the forward matmuls' FLOPs; and the
share that 1.25x ONNX Runtime's throughput would need. Two facts let our
share pass 100%: the row branches run their matmuls side by side, a thread
each, which is faster than one matmul split across the cores (`ours`
measures that ceiling, `serving_bounds.side_by_side_matmul_peak`); and
the count is the model's, while our classifier's last block computes the
[CLS] row alone (about 7% of `base`'s FLOPs left out, 14% of MiniLM's).

The peers need `torch`, `transformers`, `onnxruntime`, `onnx`, `tokenizers`
and `safetensors` (the `bench` extra); `--peer_python` runs them with
another interpreter (an environment without TensorFlow is fine: the peer
side imports none of this package).

    python benchmarks/serving_vs_onnxruntime.py --peer_python=/path/to/torchenv/bin/python
    python benchmarks/serving_vs_onnxruntime.py --model=base --seq_lengths=128 --rounds=2
    python benchmarks/serving_vs_onnxruntime.py --floor --seq_lengths=32,128  # and serving_bounds.Floor
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
from serving_bounds import forward_flops
from serving_peers import TransformersSide
from serving_peers import ask
from serving_peers import ids as request_ids
from serving_peers import prepare
from serving_peers import start_worker
from serving_peers import threads

SIDES = ("ours", "ours_one_graph", "onnxruntime", "pytorch")
TEXT = ("the quick brown fox jumps over the lazy dog while the committee debates whether "
        "bidirectional transformers pretrained on unlabeled text can be fine tuned with one "
        "extra output layer for question answering and language inference ")


FLAGS = flags.FLAGS
flags.DEFINE_enum("model", "minilm", ["minilm", "base"], "all-MiniLM-L6-v2's encoder or a "
                  "random base.")
flags.DEFINE_string("seq_lengths", "32,128,384", "Sequence lengths, comma-separated.")
flags.DEFINE_integer("batch_size", 32, "Sequences per throughput request.")
flags.DEFINE_integer("rounds", 3, "Alternating rounds per side, length and signature.")
flags.DEFINE_integer("latency_calls", 100, "Batch-1 requests per round.")
flags.DEFINE_integer("throughput_calls", 4, "Batch requests per round (their median).")
flags.DEFINE_string("peer_python", sys.executable, "Interpreter of the ONNX Runtime and "
                    "PyTorch sides (an environment with the bench extra).")
flags.DEFINE_bool("floor", False, "Also time `serving_bounds.Floor` (ids, batch 1): the "
                  "export's matmuls, softmax and GELU alone, a floor under ours.")
flags.DEFINE_enum("worker", None, list(SIDES) + ["floor"], "Internal: run one side's worker.")
flags.DEFINE_string("folder", None, "Internal: the worker's shared-weights folder.")


def _texts(batch, length):
    """`batch` texts long enough to fill `length` pieces."""
    words = TEXT.split()
    return [" ".join(words[(i + j) % len(words)] for j in range(length)) for i in range(batch)]


# --- the workers: one process per side, commands on stdin, answers on stdout -------------------


class _Ours:
    def __init__(self, folder, lengths, branches):
        import tensorflow as tf

        from keras_bert_impl.bert.bert_classifier import BertClassifier
        from keras_bert_impl.bert.bert_serving import export_saved_model
        from keras_bert_impl.bert.load_backbone import load_backbone

        if branches > 1:  # the serving guide's threads for row branches
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(threads())
        else:
            tf.config.threading.set_intra_op_parallelism_threads(threads())
        head = np.load(os.path.join(folder, "head.npz"))
        model = BertClassifier(load_backbone(folder), 2)
        model.output_dense.set_weights([head["kernel"], head["bias"]])
        self.tf, self.branches = tf, branches
        self.signatures = {}
        for length in lengths:  # serving_text packs to the export's max_seq_length
            path = os.path.join(folder, f"saved_model_{length}_{branches}")
            export_saved_model(model, path, os.path.join(folder, "vocab.txt"),
                               max_seq_length=length, row_branches=branches,
                               head_branches=None if branches > 1 else 1)
            self.signatures[length] = tf.saved_model.load(path).signatures

    def ids(self, ids):
        tf = self.tf
        # The mask and type ids made in numpy, as the peers' are: TensorFlow's
        # eager ones_like / zeros_like would add two op dispatches to our side.
        out = self.signatures[ids.shape[1]]["serving_default"](
            input_word_ids=tf.constant(ids), input_mask=tf.constant(np.ones_like(ids)),
            input_type_ids=tf.constant(np.zeros_like(ids)))
        return out["logits"].numpy()

    def text(self, texts, length):
        return self.signatures[length]["serving_text"](
            text=self.tf.constant(texts))["logits"].numpy()

    def peak(self):
        """The float32 matmul peak; with row branches, their matmuls side by side."""
        from serving_bounds import side_by_side_matmul_peak
        from train_step_timing import measure_matmul_peak

        if self.branches > 1:
            return side_by_side_matmul_peak(self.branches)
        return measure_matmul_peak()["float32"]


def _worker(args):
    lengths = [int(x) for x in args.seq_lengths.split(",")]
    if args.worker == "floor":
        from serving_bounds import Floor

        side = Floor(args.folder, threads())
    elif args.worker.startswith("ours"):
        side = _Ours(args.folder, lengths, 1 if args.worker == "ours_one_graph" else threads())
    else:
        side = TransformersSide(args.folder, onnx=args.worker == "onnxruntime")
    with open(os.path.join(args.folder, "config.json"), encoding="utf-8") as f:
        vocab_size = json.load(f)["vocab_size"]
    print("READY", flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        if order["kind"] == "peak":
            print(json.dumps({"gflops": side.peak()}), flush=True)
            continue
        kind, length, batch, calls = order["kind"], order["length"], order["batch"], order["calls"]
        ids, texts = request_ids(batch, length, vocab_size), _texts(batch, length)

        def call(kind=kind, ids=ids, texts=texts, length=length):
            return side.ids(ids) if kind == "ids" else side.text(texts, length)

        logits = call()  # warm: the first call of a shape traces or plans
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        print(json.dumps({"times": times, "logits": np.asarray(logits).tolist()}), flush=True)


# --- the driver --------------------------------------------------------------------------------


def _start(side, args, folder):
    python = sys.executable if side.startswith("ours") or side == "floor" else args.peer_python
    return start_worker(python, __file__, side, [f"--folder={folder}",
                                                 f"--seq_lengths={args.seq_lengths}"])


def main(argv):
    del argv
    args = FLAGS
    if args.worker:
        return _worker(args)
    lengths = [int(x) for x in args.seq_lengths.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        prepare(args.model, folder)
        procs = {side: _start(side, args, folder)
                 for side in SIDES + (("floor",) if args.floor else ())}
        floor = {n: [] for n in lengths}
        latency = {(s, k, n): [] for s in SIDES for k in ("ids", "text") for n in lengths}
        rate = {(s, k, n): [] for s in SIDES for k in ("ids", "text") for n in lengths}
        parity = {}
        try:
            for _ in range(args.rounds):
                for length in lengths:
                    for kind in ("ids", "text"):
                        for side in SIDES:  # alternating: one round of each side in turn
                            one = ask(procs[side], kind=kind, length=length, batch=1,
                                       calls=args.latency_calls)
                            latency[side, kind, length] += one["times"]
                            many = ask(procs[side], kind=kind, length=length,
                                        batch=args.batch_size, calls=args.throughput_calls)
                            rate[side, kind, length].append(
                                args.batch_size / statistics.median(many["times"]))
                            parity[side, kind, length] = np.array(many["logits"])
                        if args.floor and kind == "ids":
                            floor[length] += ask(procs["floor"], kind=kind, length=length,
                                                  batch=1, calls=args.latency_calls)["times"]
            peaks = {side: ask(procs[side], kind="peak")["gflops"]
                     for side in ("ours", "ours_one_graph", "onnxruntime")}
            with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
                config = json.load(f)
        finally:
            for proc in procs.values():
                proc.stdin.close()
                proc.wait()
    print(f"\n{args.model}, {threads()} cores, batch 1 latency over "
          f"{args.rounds} x {args.latency_calls} requests, batch {args.batch_size} throughput "
          f"(median of {args.throughput_calls} calls, best round)")
    print(f"{'signature':9s} {'len':>4s}  " + "  ".join(
        f"{s + ' p50/p99 ms':>21s} {'seq/s':>6s}" for s in SIDES)
        + "   ours/ORT p50  p99  seq/s   one_graph/ORT p50  p99  seq/s")
    for length in lengths:
        for kind in ("ids", "text"):
            cells, figures = [], {}
            for side in SIDES:
                times = np.array(latency[side, kind, length]) * 1e3
                p50, p99 = np.percentile(times, 50), np.percentile(times, 99)
                best = max(rate[side, kind, length])
                figures[side] = (p50, p99, best)
                cells.append(f"{p50:10.2f} / {p99:8.2f} {best:6.1f}")
            ort = figures["onnxruntime"]
            ratios = "".join(f"   {o[0] / ort[0]:12.2f} {o[1] / ort[1]:4.2f} {o[2] / ort[2]:5.2f}"
                             for o in (figures["ours"], figures["ours_one_graph"]))
            print(f"{kind:9s} {length:4d}  " + "  ".join(cells) + ratios)
    if args.floor:
        print("\nfloor (serving_bounds.Floor: the export's matmuls, softmax and GELU alone, in "
              "its row branches), ids, batch 1, p50 / p99 ms, over ONNX Runtime's:")
        for length in lengths:
            mine = np.percentile(np.array(floor[length]) * 1e3, [50, 99])
            ort = np.percentile(np.array(latency["onnxruntime", "ids", length]) * 1e3, [50, 99])
            print(f"  {length:4d} tokens: {mine[0]:.2f} / {mine[1]:.2f}; "
                  f"{mine[0] / ort[0]:.2f}x / {mine[1] / ort[1]:.2f}x")
    peak = max(peaks["ours_one_graph"], peaks["onnxruntime"])
    print(f"\nfloat32 matmul peak (4096 x 1024 x 1024, {threads()} threads): TensorFlow "
          f"{peaks['ours_one_graph']:.0f}, ONNX Runtime {peaks['onnxruntime']:.0f} GFLOP/s; "
          f"{threads()} of them side by side, a thread each, as the row branches run: "
          f"{peaks['ours']:.0f} ({100 * peaks['ours'] / peak:.0f}% of {peak:.0f}); "
          f"batch {args.batch_size} ids throughput as a share of {peak:.0f}:")
    for length in lengths:
        flops = forward_flops(config, length)
        shares = {side: 100 * max(rate[side, "ids", length]) * flops / 1e9 / peak
                  for side in SIDES}
        print(f"  {length:4d} tokens ({flops / 1e9:.2f} GFLOP a sequence): " + ", ".join(
            f"{side} {share:.0f}%" for side, share in shares.items())
            + f"; 1.25x ONNX Runtime would need {1.25 * shares['onnxruntime']:.0f}%")
    for (side, kind, length), logits in sorted(parity.items()):
        if side != "ours":
            diff = np.abs(logits - parity["ours", kind, length]).max()
            print(f"parity {side} vs ours, {kind} {length}: max abs logit difference {diff:.1e}")


if __name__ == "__main__":
    app.run(main)
