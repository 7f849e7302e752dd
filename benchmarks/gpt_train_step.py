"""Times the GPT train step: ours vs keras-hub's GPT-2, each in its own process.

Ours is `GptCausalLM` on `GptBackbone` (post-LN blocks, LM head tied to the
token embedding, our fused cross-entropy); keras-hub's is `GPT2CausalLM` on
`GPT2Backbone` (pre-LN blocks and a final LayerNorm, the same tied head:
`token_embedding(x, reverse=True)`), compiled with Keras'
`SparseCategoricalCrossentropy(from_logits=True)`. Same size (layers,
width, heads, feed-forward 4H, vocabulary 8000, tanh GELU, dropout 0.1,
LayerNorm epsilon 1e-5), the same synthetic batches (seq 128, batch 32,
every position predicts the next token), the same AdamW as the BERT
benchmark, both by plain `model.fit`.

Each model runs in its own process (one for ours, one for keras-hub's,
serving every size and precision in turn). For each (size, precision)
both build, compile and warm up side by side, untimed, then take turns:
in each round one process times `--steps` fit steps while the other
waits on its pipe, so a shared machine's drift hits both alike. The
median step time gives sequences/s, achieved GFLOP/s (see
`train_flops_per_sequence`) against the measured matmul peak of that
dtype (MFU) and the ratio ours / keras-hub. The median CPU seconds per
step (the process's, all threads) is printed too: when other jobs share
the cores it moves far less than wall time, so its ratio is the steadier.

    python benchmarks/gpt_train_step.py                       # mini, small; f32, bf16
    python benchmarks/gpt_train_step.py --sizes=mini --precision=float32 --steps=5

Both run with Keras' default `jit_compile="auto"` (XLA off on CPU-only
hosts, on with an accelerator); `--hub_jit` and `--ours_jit` override it.
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
flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("rounds", 4, "Alternating rounds of timed steps.")
flags.DEFINE_integer("steps", 1, "Timed steps per model per round.")
flags.DEFINE_integer("warmup", 1, "Untimed steps first (tracing, compiling).")
flags.DEFINE_enum("hub_jit", "auto", ["auto", "true", "false"], "XLA for keras-hub.")
flags.DEFINE_enum("ours_jit", "auto", ["auto", "true", "false"], "XLA for ours.")
flags.DEFINE_string("_single", None, "Internal: 'ours' or 'keras_hub' (a model's process), or 'peak'.")

NUM_BATCHES = 4  # distinct synthetic batches, cycled


def sizes():
    """The model sizes, as `GptConfig`s: `gpt_mini` and the same at 2x width."""
    from keras_bert_impl.gpt import gpt_preset

    mini = gpt_preset("gpt_mini")  # 4 x 256, 4 heads, feed-forward 1024, vocab 8000
    return {"mini": mini, "small": mini.replace(n_embd=512, n_head=8)}  # 4 x 512, 8 heads


def train_flops_per_sequence(config, seq_length):
    """Matmul FLOPs of one training sequence, for either model.

    Counted per token of the forward pass, for each of the L blocks:
    query, key and value 2 * H * 3H (ours fuses them into one matmul,
    keras-hub runs three; same FLOPs), attention output 2 * H * H, the
    feed-forward 2 * 2 * H * I, and scores plus context 2 * 2 * S * H (the
    whole S x S matrix: both models mask the future with an additive bias
    or a masked softmax after computing every score, so the masked half is
    executed work too); then the tied LM head 2 * H * V at every position.
    The backward pass does two matmuls per forward one (input and weight
    gradients), so a step is 3x the forward: 6N + 12 L S H per token, as
    PaLM's MFU. Pre-LN (GPT-2) or post-LN (GPT) moves LayerNorms, and
    GPT-2's final LayerNorm is elementwise: none of that is a matmul, so
    the count is the same for both; lookups, LayerNorm, softmax, GELU,
    dropout and the loss (about 1% of the matmul FLOPs here) are left out.
    `_matmul_flops_from_weights` checks the count against each model's own
    kernels in its process.
    """
    h, i, v, s = config.n_embd, config.intermediate_size, config.vocab_size, seq_length
    per_token = config.n_layer * (2 * (3 * h * h + h * h + 2 * h * i) + 2 * 2 * s * h) + 2 * h * v
    return 3 * seq_length * per_token


def _matmul_flops_from_weights(model, config, seq_length):
    """The same count from the model's weights: 2 FLOPs per Dense/EinsumDense
    kernel entry per token, the tied table once more as the head (its lookup
    is not a matmul), plus attention's 2 * 2 * S * H per block; times 3."""
    per_token = 0
    for weight in model.trainable_weights:
        if weight.name == "kernel":
            size = 1
            for dim in weight.shape:
                size *= dim
            per_token += 2 * size
    per_token += 2 * config.vocab_size * config.n_embd  # tied LM head
    per_token += config.n_layer * 2 * 2 * seq_length * config.n_embd
    return 3 * seq_length * per_token


def _batches(config, batch_size, seq_length):
    """`NUM_BATCHES` batches of random ids: inputs, next ids, all-ones weights."""
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(0, config.vocab_size, (NUM_BATCHES, batch_size, seq_length + 1))
    ids = ids.astype("int32")
    return dict(
        inputs=ids[..., :-1],
        mask=np.ones((NUM_BATCHES, batch_size, seq_length), "int32"),
        next_ids=ids[..., 1:],
        weights=np.ones((NUM_BATCHES, batch_size, seq_length), "float32"),
    )


def _ours(config, precision, b):
    from keras_bert_impl.gpt import GptBackbone
    from keras_bert_impl.gpt import GptCausalLM

    model = GptCausalLM(GptBackbone.from_config_object(config, dtype=precision))
    data = ({"input_word_ids": b["inputs"], "input_mask": b["mask"]},
            {"lm": b["next_ids"]}, {"lm": b["weights"]})
    return model, data, {}  # compile() sets our loss and next-token accuracy


def _keras_hub(config, precision, b):
    import keras
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.n_layer,
        num_heads=config.n_head,
        hidden_dim=config.n_embd,
        intermediate_dim=config.intermediate_size,
        dropout=config.resid_pdrop,
        max_sequence_length=config.n_positions,
        dtype=precision,
    )
    # Logits (B, S, V) = backbone output @ token_embedding^T.
    model = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
    data = ({"token_ids": b["inputs"], "padding_mask": b["mask"]}, b["next_ids"], b["weights"])
    # Ours' loss and metric: mean cross-entropy over the weighted positions.
    loss = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight")
    return model, data, dict(loss=loss, weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()])


def serve(impl):
    """One model's process: reads one JSON command a line from stdin.

    `{"build": spec}` builds, compiles and warms up that size and precision
    (dropping the previous model), answering `READY`; `{"round": true}`
    times `spec["steps"]` fit steps, answering `TIMES`. One process per
    model serves every size, so TensorFlow is imported once per side.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    build = {"ours": _ours, "keras_hub": _keras_hub}[impl]
    for line in sys.stdin:
        command = json.loads(line)
        if "build" in command:
            spec = command["build"]
            keras.backend.clear_session()  # frees the previous size's model
            config = sizes()[spec["size"]]
            b = _batches(config, spec["batch_size"], spec["seq_length"])
            model, data, compile_args = build(config, spec["precision"], b)
            model.compile(optimizer=adamw_optimizer(impl), jit_compile=spec["jit"][impl],
                          **compile_args)
            dataset = tf.data.Dataset.from_tensor_slices(data).repeat()
            model.fit(dataset, steps_per_epoch=spec["warmup"], epochs=1, verbose=0)
            flops = train_flops_per_sequence(config, spec["seq_length"])
            counted = _matmul_flops_from_weights(model, config, spec["seq_length"])
            if counted != flops:
                raise SystemExit(f"{impl}: FLOPs from its weights {counted} != formula {flops}")
            print("READY " + json.dumps({"params": model.count_params(),
                                         "xla": bool(model.jit_compile)}), flush=True)
        else:
            times, cpu_times = [], []
            model.fit(dataset, steps_per_epoch=spec["steps"], epochs=1, verbose=0,
                      callbacks=[step_timer(times, cpu_times)])
            print("TIMES " + json.dumps({"wall": times, "cpu": cpu_times}), flush=True)


class _ModelProcess:
    """A `serve` child for one model (ours or keras-hub's)."""

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
    """Both models' results for one (size, precision).

    Both build and warm up side by side (untimed); then rounds alternate,
    one process timing while the other waits on its pipe.
    """
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
        order.reverse()  # ABBA: neither always goes first
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
    configs = sizes()
    for name in FLAGS.sizes:
        if name not in configs:
            raise ValueError(f"Unknown size {name!r}. Available: {sorted(configs)}.")
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"({os.cpu_count()} CPUs)")
    print(f"batch {FLAGS.batch_size} x seq {FLAGS.seq_length} "
          f"({FLAGS.batch_size * FLAGS.seq_length} tokens/step), warmup {FLAGS.warmup} steps, "
          f"{FLAGS.rounds} rounds x {FLAGS.steps} timed steps per model")
    for name in FLAGS.sizes:
        c = configs[name]
        flops = train_flops_per_sequence(c, FLAGS.seq_length)
        print(f"  {name}: {c.n_layer} x {c.n_embd}, {c.n_head} heads, feed-forward "
              f"{c.intermediate_size}, vocab {c.vocab_size}: "
              f"{flops * FLAGS.batch_size / 1e9:.0f} GFLOP per train step")
    peaks = in_subprocess(os.path.abspath(__file__), "peak")
    print(f"matmul peak: float32 {peaks['float32']:.0f} GFLOP/s, "
          f"bfloat16 {peaks['bfloat16']:.0f} GFLOP/s (4096x1024x1024)\n")
    header = (f"{'size':6s} {'precision':15s} {'model':9s} {'xla':5s} {'params':>10s} "
              f"{'step ms':>8s} {'seq/s':>7s} {'tokens/s':>8s} {'GFLOP/s':>8s} {'MFU':>6s} "
              f"{'ours/hub':>8s} {'CPU s':>6s} {'ours/hub':>8s}")
    print(header)
    print("-" * len(header), flush=True)
    ratios = {}
    procs = {impl: _ModelProcess(impl) for impl in ("keras_hub", "ours")}
    for name in FLAGS.sizes:
        flops = train_flops_per_sequence(configs[name], FLAGS.seq_length)
        for precision in FLAGS.precision:
            spec = dict(size=name, precision=precision, batch_size=FLAGS.batch_size,
                        seq_length=FLAGS.seq_length, steps=FLAGS.steps, warmup=FLAGS.warmup,
                        jit={"keras_hub": jit_setting(FLAGS.hub_jit),
                             "ours": jit_setting(FLAGS.ours_jit)})
            results = time_pair(procs, spec, FLAGS.rounds)
            ratio = results["ours"]["seq_per_s"] / results["keras_hub"]["seq_per_s"]
            cpu_ratio = results["keras_hub"]["cpu_s"] / results["ours"]["cpu_s"]
            ratios[(name, precision)] = ratio, cpu_ratio
            peak = peaks["bfloat16" if "bfloat16" in precision else "float32"]
            for impl in ("keras_hub", "ours"):
                r = results[impl]
                achieved = r["seq_per_s"] * flops / 1e9
                print(f"{name:6s} {precision:15s} {impl:9s} {str(r['xla']):5s} {r['params']:10,d} "
                      f"{1000 * r['step_s']:8.0f} {r['seq_per_s']:7.2f} "
                      f"{r['seq_per_s'] * FLAGS.seq_length:8.0f} {achieved:8.1f} "
                      f"{100 * achieved / peak:5.1f}% "
                      f"{(f'{ratio:.2f}x' if impl == 'ours' else ''):>8s} {r['cpu_s']:6.2f} "
                      f"{(f'{cpu_ratio:.2f}x' if impl == 'ours' else ''):>8s}", flush=True)
    for proc in procs.values():
        proc.close()
    print("\nratios ours / keras-hub at equal precision: sequences/s (wall), "
          "and CPU seconds per step (keras-hub's / ours):")
    for (name, precision), (ratio, cpu_ratio) in ratios.items():
        print(f"  {name:6s} {precision:15s} {ratio:.2f}x wall   {cpu_ratio:.2f}x CPU")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    app.run(main)
