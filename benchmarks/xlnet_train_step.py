"""Times XLNet's train steps, each model in its own process.

Over 400 lines: one benchmark, about 35 of them this docstring; its two parts
share the sizes, the FLOP counts and the process machinery (`serve`,
`_ModelProcess`, `time_pair`).

(a) The content-stream fine-tuning step: ours (`XLNetBackbone`, one
stream, no memory) against keras-hub's `XLNetBackbone` (which wires the
content stream only), the same classifier on the last position (XLNet's
`<cls>`: Dense H tanh, dropout, Dense 2) on both, the same size (layers,
width, heads of 64, feed-forward 4H, GELU, dropout 0.1, vocabulary 8000),
the same synthetic batches (seq 128, batch 32, two segments, no padding),
the same AdamW, both by plain `model.fit`.

(b) Our pretraining step, `XLNetPretrainer` (two streams, num_predict
seq / 6 = 21 predictions a row with their factorization masks from the
reader's own permutation, memory of seq / 2 states per layer carried from
step to step, the tied LM head), against our BERT masked-LM pretraining
step (`BertMaskedLMPretrainer`, as many predictions, no NSP: XLNet has
none) at the same size: what the two streams and the memory cost.

As `gpt_train_step.py`: each model in its own process; both build,
compile and warm up side by side (untimed), then take turns, one timing
`--steps` fit steps while the other waits (ABBA), so a shared machine's
drift hits both alike. Median step time -> sequences/s, achieved GFLOP/s
(`finetune_flops_per_sequence`, `xlnet_pretrain_flops_per_sequence`,
`bert_pretrain_flops_per_sequence`) against the measured matmul peak of
that dtype (MFU), the ratio, and the median CPU seconds per step (the
process's, all threads; steadier than wall time when other jobs share the
cores).

    python benchmarks/xlnet_train_step.py                    # mini, small; f32, bf16; both parts
    python benchmarks/xlnet_train_step.py --sizes=mini --precision=float32 --rounds=2

Both run with Keras' default `jit_compile="auto"` (XLA off on CPU-only
hosts, on with an accelerator); `--peer_jit` and `--ours_jit` override it.
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

# benchmarks/ is on sys.path when a script in it runs.
from train_step_timing import adamw_optimizer
from train_step_timing import in_subprocess
from train_step_timing import jit_setting
from train_step_timing import measure_matmul_peak
from train_step_timing import step_timer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["mini", "small"], "Model sizes to time (see SIZES).")
flags.DEFINE_list("precision", ["float32", "mixed_bfloat16"], "Dtype policies.")
flags.DEFINE_list("parts", ["finetune", "pretrain"], "finetune: ours vs keras-hub; pretrain: "
                  "our XLNet pretraining step vs our BERT one.")
flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("rounds", 4, "Alternating rounds of timed steps.")
flags.DEFINE_integer("steps", 1, "Timed steps per model per round.")
flags.DEFINE_integer("warmup", 1, "Untimed steps first (tracing, compiling).")
flags.DEFINE_enum("peer_jit", "auto", ["auto", "true", "false"], "XLA for the other model.")
flags.DEFINE_enum("ours_jit", "auto", ["auto", "true", "false"], "XLA for ours.")
flags.DEFINE_string("_single", None, "Internal: a model's process (see PAIRS), or 'peak'.")

# B=batch, L=seq_length, H=width, N=heads, D=64 per head, I=4H, V=vocab,
# n=layers, K=keys (memory + L), R=relative positions (K + L), P=predictions
SIZES = {"mini": (4, 256, 4), "small": (4, 512, 8)}  # (layers, width, heads of 64)
VOCAB = 8000
DROPOUT = 0.1
NUM_BATCHES = 4  # distinct synthetic batches, cycled
PAIRS = {"finetune": ("keras_hub", "ours"), "pretrain": ("bert_pretrain", "xlnet_pretrain")}


def xlnet_config(size, seq_length, memory=False):
    from keras_bert_impl.xlnet import XLNetConfig

    layers, width, heads = SIZES[size]
    reuse = seq_length // 2 if memory else None
    return XLNetConfig(vocab_size=VOCAB, d_model=width, n_layer=layers, n_head=heads,
                       d_head=width // heads, d_inner=4 * width, ff_activation="gelu",
                       dropout=DROPOUT, mem_len=reuse, reuse_len=reuse)


def bert_config(size):
    from keras_bert_impl import BertConfig

    layers, width, heads = SIZES[size]
    return BertConfig(vocab_size=VOCAB, hidden_size=width, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=4 * width,
                      max_position_embeddings=512, hidden_dropout_prob=DROPOUT,
                      attention_probs_dropout_prob=DROPOUT)


def num_predict(seq_length):
    return seq_length // 6  # XLNet's K = 6: about one token in six predicted


def _attention_block(n, h, inner, queries, keys, positions, projected_keys):
    """Matmul FLOPs of one relative-attention block for `queries` query rows
    (their q and output projections, scores AC over `keys`, position scores
    BD over `positions`, context over `keys`, feed-forward) plus the key and
    value projections of `projected_keys` positions."""
    nd = h  # heads x 64 = width, as every size here
    per_query = 2 * 2 * h * nd + 2 * keys * nd + 2 * positions * nd + 2 * keys * nd
    per_query += 2 * 2 * h * inner
    return n * (queries * per_query + projected_keys * 2 * 2 * h * nd)


def finetune_flops_per_sequence(size, seq_length):
    """Matmul FLOPs of one fine-tuning sequence, either model: the content
    stream with L keys and R = 2L relative positions ("bi", no memory), the
    position projection 2 R H ND per block once per batch (keras-hub tiles
    the positions over the batch and projects them B times: that extra work
    is not counted), the classifier (2 H H + 2 H 2); the backward pass twice
    the forward: 3x. Lookups, LayerNorm, softmax, rel_shift and the segment
    term (elementwise) are left out."""
    n, h, _ = SIZES[size]
    batch = FLAGS.batch_size
    forward = _attention_block(n, h, 4 * h, seq_length, seq_length, 2 * seq_length, seq_length)
    forward += n * 2 * 2 * seq_length * h * h / batch + 2 * h * h + 2 * h * 2
    return 3 * forward


def xlnet_pretrain_flops_per_sequence(size, seq_length):
    """Our pretraining step: the content stream over K = M + L keys (memory
    M = L / 2) and R = K + L positions, the query stream's P rows through
    the same block (their position scores over all R, then gathered), keys
    and values of the K positions, the tied LM head at the P rows; 3x."""
    n, h, _ = SIZES[size]
    memory, predictions = seq_length // 2, num_predict(seq_length)
    keys = memory + seq_length
    forward = _attention_block(n, h, 4 * h, seq_length + predictions, keys, keys + seq_length,
                               keys)
    forward += n * 2 * (keys + seq_length) * h * h / FLAGS.batch_size
    forward += predictions * 2 * h * VOCAB
    return 3 * forward


def bert_pretrain_flops_per_sequence(size, seq_length):
    """BERT's masked-LM step: per token q, k, v, o (2 * 4 H H), the
    feed-forward, scores and context (2 * 2 L H); the head's transform and
    tied decoder at the P rows (2 H H + 2 H V); 3x."""
    n, h, _ = SIZES[size]
    per_token = n * (2 * 4 * h * h + 2 * 2 * h * 4 * h + 2 * 2 * seq_length * h)
    return 3 * (seq_length * per_token + num_predict(seq_length) * (2 * h * h + 2 * h * VOCAB))


FLOPS = {"keras_hub": finetune_flops_per_sequence, "ours": finetune_flops_per_sequence,
         "xlnet_pretrain": xlnet_pretrain_flops_per_sequence,
         "bert_pretrain": bert_pretrain_flops_per_sequence}


def _ids(batch_size, seq_length):
    """`NUM_BATCHES` batches: random ids, segments A (0) then B (1), <cls> (2) last."""
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(9, VOCAB, (NUM_BATCHES, batch_size, seq_length)).astype("int32")
    types = np.zeros_like(ids)
    types[..., seq_length // 2:] = 1
    types[..., -1] = 2
    labels = rng.integers(0, 2, (NUM_BATCHES, batch_size)).astype("int32")
    return ids, types, labels


def _classifier(inputs, sequence, width, precision):
    """The same head on both: the last position -> Dense(H, tanh) -> dropout -> 2 logits."""
    import keras

    last = keras.layers.Lambda(lambda x: x[:, -1], dtype=precision, name="last")(sequence)
    summary = keras.layers.Dense(width, activation="tanh", dtype=precision, name="summary")(last)
    summary = keras.layers.Dropout(DROPOUT, dtype=precision, name="summary_dropout")(summary)
    logits = keras.layers.Dense(2, dtype="float32", name="logits")(summary)
    return keras.Model(inputs, logits)


def _finetune_compile_args():
    import keras

    return dict(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=[keras.metrics.SparseCategoricalAccuracy()])


def _ours(size, precision, batch_size, seq_length):
    import numpy as np

    from keras_bert_impl.xlnet import XLNetBackbone

    config = xlnet_config(size, seq_length)
    backbone = XLNetBackbone.from_config_object(config, dtype=precision)
    model = _classifier(backbone.input, backbone.output["sequence_output"], config.d_model,
                        precision)
    ids, types, labels = _ids(batch_size, seq_length)
    x = {"input_word_ids": ids, "input_type_ids": types,
         "input_mask": np.zeros(ids.shape, "float32")}  # XLNet's: 1 = padding
    return model, (x, labels), _finetune_compile_args()


def _keras_hub(size, precision, batch_size, seq_length):
    import keras_hub
    import numpy as np

    layers, width, heads = SIZES[size]
    backbone = keras_hub.models.XLNetBackbone(
        vocabulary_size=VOCAB, num_layers=layers, num_heads=heads, hidden_dim=width,
        intermediate_dim=4 * width, dropout=DROPOUT, activation="gelu", dtype=precision)
    model = _classifier(backbone.input, backbone.output, width, precision)
    ids, types, labels = _ids(batch_size, seq_length)
    x = {"token_ids": ids, "segment_ids": types,
         "padding_mask": np.ones(ids.shape, "int32")}  # keras-hub's: 1 = token
    return model, (x, labels), _finetune_compile_args()


def _xlnet_pretrain(size, precision, batch_size, seq_length):
    import numpy as np
    import tensorflow as tf

    from keras_bert_impl.xlnet import XLNetBackbone
    from keras_bert_impl.xlnet import XLNetPretrainer
    from tf_records.xlnet.permutation import permute_record

    config = xlnet_config(size, seq_length, memory=True)
    model = XLNetPretrainer(XLNetBackbone.from_config_object(config, two_stream=True,
                                                             dtype=precision),
                            max_batch_size=batch_size)
    ids, types, _ = _ids(batch_size, seq_length)
    rng = np.random.default_rng(1)
    predictions = num_predict(seq_length)
    features = {k: [] for k in ("perm_mask", "target_mapping", "target", "target_mask")}
    for b in range(NUM_BATCHES):
        for row in range(batch_size):
            masked = np.zeros(seq_length, "int64")  # half in the reused part, as the records
            reuse = seq_length // 2
            masked[rng.choice(reuse, predictions - predictions // 2, replace=False)] = 1
            masked[reuse + rng.choice(reuse, predictions // 2, replace=False)] = 1
            record = {"input": tf.constant(ids[b, row], tf.int64),
                      "target": tf.constant(ids[b, row], tf.int64),
                      "is_masked": tf.constant(masked), "seg_id": tf.constant(types[b, row]),
                      "label": tf.constant([0], tf.int64)}
            out = permute_record(record, reuse, reuse, predictions, sep_id=4, cls_id=3,
                                 seed=tf.constant([b, row], tf.int64))
            for k in features:
                features[k].append(out[k].numpy())
    shape = (NUM_BATCHES, batch_size)
    f = {k: np.stack(v).reshape(shape + v[0].shape) for k, v in features.items()}
    x = {"input_word_ids": ids, "input_type_ids": types, "perm_mask": f["perm_mask"],
         "target_mapping": f["target_mapping"]}
    return model, (x, f["target"], f["target_mask"]), {}  # compile() sets the PLM loss


def _bert_pretrain(size, precision, batch_size, seq_length):
    import numpy as np

    from keras_bert_impl import BertBackbone
    from keras_bert_impl import BertMaskedLMPretrainer

    model = BertMaskedLMPretrainer(BertBackbone.from_bert_config(bert_config(size),
                                                                 dtype=precision))
    ids, types, _ = _ids(batch_size, seq_length)
    rng = np.random.default_rng(1)
    predictions = num_predict(seq_length)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq_length), predictions,
                                             replace=False)
                                  for _ in range(NUM_BATCHES * batch_size)]), axis=-1)
    positions = positions.reshape(NUM_BATCHES, batch_size, predictions).astype("int32")
    x = {"input_word_ids": ids, "input_mask": np.ones(ids.shape, "int32"),
         "input_type_ids": np.minimum(types, 1), "masked_lm_positions": positions}
    y = {"masked_lm": np.take_along_axis(ids, positions, axis=-1)}
    w = {"masked_lm": np.ones(positions.shape, "float32")}
    return model, (x, y, w), {}  # compile() sets the masked-LM loss


BUILDERS = {"ours": _ours, "keras_hub": _keras_hub, "xlnet_pretrain": _xlnet_pretrain,
            "bert_pretrain": _bert_pretrain}


def serve(impl):
    """One model's process: reads one JSON command a line from stdin.

    `{"build": spec}` builds, compiles and warms up that size and precision
    (dropping the previous model), answering `READY`; `{"round": true}`
    times `spec["steps"]` fit steps, answering `TIMES`.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    for line in sys.stdin:
        command = json.loads(line)
        if "build" in command:
            spec = command["build"]
            keras.backend.clear_session()  # frees the previous size's model
            FLAGS.batch_size = spec["batch_size"]  # the FLOP formulas read it
            model, data, compile_args = BUILDERS[impl](
                spec["size"], spec["precision"], spec["batch_size"], spec["seq_length"])
            model.compile(optimizer=adamw_optimizer(impl), jit_compile=spec["jit"][impl],
                          **compile_args)
            dataset = tf.data.Dataset.from_tensor_slices(data).repeat()
            model.fit(dataset, steps_per_epoch=spec["warmup"], epochs=1, verbose=0)
            print("READY " + json.dumps({"params": model.count_params(),
                                         "xla": bool(model.jit_compile)}), flush=True)
        else:
            times, cpu_times = [], []
            model.fit(dataset, steps_per_epoch=spec["steps"], epochs=1, verbose=0,
                      callbacks=[step_timer(times, cpu_times)])
            print("TIMES " + json.dumps({"wall": times, "cpu": cpu_times}), flush=True)


class _ModelProcess:
    """A `serve` child for one model."""

    def __init__(self, impl):
        self.impl = impl
        self.log = tempfile.TemporaryFile("w+")  # TF's stderr; shown if it fails
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--_single=" + impl],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
        )

    def send(self, command):
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def read(self, prefix):
        for line in self.proc.stdout:
            if line.startswith(prefix + " "):
                return json.loads(line[len(prefix) + 1:])
        self.log.seek(0)
        print(self.log.read()[-4000:], file=sys.stderr)
        raise SystemExit(f"benchmark process failed: {self.impl}")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()
        self.log.close()


def time_pair(procs, spec, rounds):
    """Both models' results for one (size, precision): built and warmed up
    side by side (untimed), then alternating rounds, ABBA."""
    for proc in procs.values():
        proc.send({"build": spec})
    results = {impl: proc.read("READY") for impl, proc in procs.items()}
    times = {impl: {"wall": [], "cpu": []} for impl in procs}
    order = list(procs)
    for _ in range(rounds):
        for impl in order:
            procs[impl].send({"round": True})
            for kind, values in procs[impl].read("TIMES").items():
                times[impl][kind].extend(values)
        order.reverse()
    for impl, result in results.items():
        result["step_s"] = _median(times[impl]["wall"])
        result["cpu_s"] = _median(times[impl]["cpu"])
        result["seq_per_s"] = spec["batch_size"] / result["step_s"]
    return results


def _median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main(argv):
    del argv
    if FLAGS._single == "peak":
        print("RESULT " + json.dumps(measure_matmul_peak()))
        return
    if FLAGS._single:
        serve(FLAGS._single)
        return
    for name in FLAGS.sizes:
        if name not in SIZES:
            raise ValueError(f"Unknown size {name!r}. Available: {sorted(SIZES)}.")
    for part in FLAGS.parts:
        if part not in PAIRS:
            raise ValueError(f"Unknown part {part!r}. Available: {sorted(PAIRS)}.")
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"({os.cpu_count()} CPUs)")
    length = FLAGS.seq_length
    print(f"batch {FLAGS.batch_size} x seq {length} ({FLAGS.batch_size * length} tokens/step), "
          f"warmup {FLAGS.warmup} steps, {FLAGS.rounds} rounds x {FLAGS.steps} timed steps per "
          f"model; XLNet pretraining: {num_predict(length)} predictions, memory {length // 2}")
    for name in FLAGS.sizes:
        layers, width, heads = SIZES[name]
        print(f"  {name}: {layers} x {width}, {heads} heads of 64, feed-forward {4 * width}, "
              f"vocab {VOCAB}: GFLOP per train step: fine-tuning "
              f"{finetune_flops_per_sequence(name, length) * FLAGS.batch_size / 1e9:.0f}, XLNet "
              f"pretraining {xlnet_pretrain_flops_per_sequence(name, length) * FLAGS.batch_size / 1e9:.0f}"
              f", BERT pretraining "
              f"{bert_pretrain_flops_per_sequence(name, length) * FLAGS.batch_size / 1e9:.0f}")
    peaks = in_subprocess(os.path.abspath(__file__), "peak")
    print(f"matmul peak: float32 {peaks['float32']:.0f} GFLOP/s, "
          f"bfloat16 {peaks['bfloat16']:.0f} GFLOP/s (4096x1024x1024)\n")
    header = (f"{'part':8s} {'size':6s} {'precision':15s} {'model':14s} {'xla':5s} "
              f"{'params':>10s} {'step ms':>8s} {'seq/s':>7s} {'GFLOP/s':>8s} {'MFU':>6s} "
              f"{'ratio':>7s} {'CPU s':>6s} {'ratio':>7s}")
    print(header)
    print("-" * len(header), flush=True)
    ratios = {}
    for part in FLAGS.parts:
        peer, ours = PAIRS[part]
        procs = {impl: _ModelProcess(impl) for impl in (peer, ours)}
        for name in FLAGS.sizes:
            for precision in FLAGS.precision:
                spec = dict(size=name, precision=precision, batch_size=FLAGS.batch_size,
                            seq_length=length, steps=FLAGS.steps, warmup=FLAGS.warmup,
                            jit={peer: jit_setting(FLAGS.peer_jit),
                                 ours: jit_setting(FLAGS.ours_jit)})
                results = time_pair(procs, spec, FLAGS.rounds)
                ratio = results[ours]["seq_per_s"] / results[peer]["seq_per_s"]
                cpu_ratio = results[peer]["cpu_s"] / results[ours]["cpu_s"]
                ratios[(part, name, precision)] = ratio, cpu_ratio
                peak = peaks["bfloat16" if "bfloat16" in precision else "float32"]
                for impl in (peer, ours):
                    r = results[impl]
                    achieved = r["seq_per_s"] * FLOPS[impl](name, length) / 1e9
                    shown = f"{ratio:.2f}x" if impl == ours else ""
                    shown_cpu = f"{cpu_ratio:.2f}x" if impl == ours else ""
                    print(f"{part:8s} {name:6s} {precision:15s} {impl:14s} {str(r['xla']):5s} "
                          f"{r['params']:10,d} {1000 * r['step_s']:8.0f} {r['seq_per_s']:7.2f} "
                          f"{achieved:8.1f} {100 * achieved / peak:5.1f}% {shown:>7s} "
                          f"{r['cpu_s']:6.2f} {shown_cpu:>7s}", flush=True)
        for proc in procs.values():
            proc.close()
    print("\nratios at equal precision: sequences/s (wall) and CPU seconds per step (the "
          "other's / ours); finetune: ours / keras-hub's XLNetBackbone; pretrain: our XLNet "
          "pretraining step / our BERT masked-LM step (below 1: the two streams' and the "
          "memory's cost):")
    for (part, name, precision), (ratio, cpu_ratio) in ratios.items():
        print(f"  {part:8s} {name:6s} {precision:15s} {ratio:.2f}x wall   {cpu_ratio:.2f}x CPU")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    app.run(main)
