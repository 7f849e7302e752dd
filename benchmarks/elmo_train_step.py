"""Times ELMo's biLM train step: ours vs the same network from stock Keras layers.

Ours is `ElmoLanguageModel` on a stateful `ElmoBackbone` (our
`LstmProjectionCell` in `keras.layers.RNN`: TF1's LSTMP, h projected to P
inside the recurrence, cell and projection clipped). Stock is the same
biLM from `keras.layers.LSTM(U, stateful=True)` followed by
`keras.layers.Dense(P, use_bias=False)` per layer (no clipping; Keras'
LSTM cannot project its recurrent state, so its recurrence reads the U-wide
h: more weights and FLOPs per step than LSTMP, which the parameter counts
show), the same character encoder (ours: it is not what differs), dropout
on every layer's input and the top outputs, the skip connections, and one
softmax `Dense(V)` shared by both directions; loss 0.5 * (CE_forward +
CE_backward) with the full softmax. Same size (`--preset`), the same
synthetic windows (forward and reverse streams), the same Adagrad as
bilm-tf (0.2, accumulators from 1.0, global-norm clipping at 10), both by
plain `model.fit`.

Each model runs in its own process; both build and warm up side by side
(untimed), then take turns: in each round one process times `--steps` fit
steps while the other waits on its pipe, so a shared machine's drift hits
both alike. Medians of the per-step wall and process CPU seconds give
tokens/s (B x T per step, each read by both directions) and the ratio ours
/ stock. Then the character encoder alone, in each process in turn (the
same layer in both: the two numbers show the noise): tokens/s of a forward
pass (inference) over one window.

Measured (2 CPU cores shared with other jobs, load ~3.5; elmo_tiny, B 32,
T 20, V 8000; three runs): ours 1.03-1.39x stock's tokens/s (wall),
1.19-1.43x in CPU seconds per step. Stock does 1.23x the FLOPs (16.3 vs
13.3 GFLOP a step: LSTMP's recurrence reads the P-wide projected h, Keras'
LSTM the U-wide h); per FLOP the two run alike (35-42 GFLOP/s each), the
custom cell costing nothing over Keras' own in the same `RNN` loop. Keras'
`unroll=True` made ours slower (and doubled its tracing time), so the
recurrence stays a loop. About half the FLOPs are the char CNN, run at the
matmul rate already (a `Conv2D` per filter beat an im2col matmul 3x).

    python benchmarks/elmo_train_step.py                         # elmo_tiny, B 32, T 20
    python benchmarks/elmo_train_step.py --preset=elmo_small --batch_size=16 --rounds=2

Both run with Keras' default `jit_compile="auto"` (XLA off on CPU-only
hosts); `--jit` overrides it for both.
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

# benchmarks/ is on sys.path when a script in it runs.
from train_step_timing import jit_setting
from train_step_timing import step_timer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "elmo_tiny", "ELMo size (keras_bert_impl.elmo.ELMO_PRESETS).")
flags.DEFINE_integer("batch_size", 32, "Streams per step (B).")
flags.DEFINE_integer("unroll_steps", 20, "Tokens per window (T).")
flags.DEFINE_integer("vocab_size", 8000, "Softmax rows (V; full softmax).")
flags.DEFINE_integer("rounds", 4, "Alternating rounds of timed steps.")
flags.DEFINE_integer("steps", 3, "Timed steps per model per round.")
flags.DEFINE_integer("warmup", 2, "Untimed steps first (tracing).")
flags.DEFINE_enum("jit", "auto", ["auto", "true", "false"], "XLA for both.")
flags.DEFINE_string("_single", None, "Internal: 'ours' or 'stock' (a model's process).")

NUM_BATCHES = 4  # distinct synthetic batches, cycled
DIRECTIONS = {"forward": "char_ids", "backward": "char_ids_reverse"}


def train_flops_per_step(config, spec, impl):
    """Matmul FLOPs of one train step (both directions, forward + backward pass).

    Per token and direction: the char CNN (each filter of width w and n
    outputs over C - w + 1 positions: w E n multiply-adds each), the
    highway layers (2 F^2 each), the projection F P; per LSTM layer the
    gates [x; h] W, (P + H) 4U, with H = P for ours (h projected inside
    the recurrence) and H = U for stock's LSTM, plus the U P projection;
    the softmax P V. Two FLOPs a multiply-add, times 3 for the backward
    pass. The char CNN is counted for both streams (each direction embeds
    its own window).
    """
    c, e, f, p, u = (config.max_characters_per_token, config.char_embedding_dim,
                     config.num_filters, config.projection_dim, config.lstm_dim)
    cnn = sum((c - w + 1) * w * e * n for w, n in config.filters)
    cnn += config.n_highway * 2 * f * f + (f * p if config.uses_cnn_projection else 0)
    h = p if impl == "ours" else u
    lstm = config.n_layers * ((p + h) * 4 * u + u * p)
    per_token = cnn + lstm + p * spec["vocab_size"]
    return 3 * 2 * 2 * per_token * spec["batch_size"] * spec["unroll_steps"]


def _optimizer():
    import keras

    return keras.optimizers.Adagrad(0.2, initial_accumulator_value=1.0, global_clipnorm=10.0)


def _batches(config, spec):
    """Random character ids of both streams and random targets."""
    import numpy as np

    rng = np.random.default_rng(0)
    shape = (NUM_BATCHES, spec["batch_size"], spec["unroll_steps"])
    x = {name: rng.integers(1, 262, (*shape, config.max_characters_per_token)).astype("int32")
         for name in DIRECTIONS.values()}
    y = {d: rng.integers(0, spec["vocab_size"], shape).astype("int32") for d in DIRECTIONS}
    return x, y


def _ours(config, spec):
    from keras_bert_impl.elmo import ElmoBackbone
    from keras_bert_impl.elmo.elmo_language_model import ElmoLanguageModel

    backbone = ElmoBackbone.from_config_object(config, max_batch_size=spec["batch_size"])
    model = ElmoLanguageModel(backbone, spec["vocab_size"])
    model.compile(optimizer=_optimizer(), jit_compile=spec["jit"])  # its own loss
    return model, backbone.character_encoder


def _stock(config, spec):
    import keras

    from keras_bert_impl.elmo import CharacterEncoder

    b, t, c = spec["batch_size"], spec["unroll_steps"], config.max_characters_per_token
    encoder = CharacterEncoder(config.filters, config.n_highway, config.projection_dim,
                               char_embedding_dim=config.char_embedding_dim,
                               activation=config.activation, name="character_encoder")
    softmax = keras.layers.Dense(spec["vocab_size"], name="softmax")  # shared
    inputs = {name: keras.Input(batch_shape=(b, t, c), dtype="int32", name=name)
              for name in DIRECTIONS.values()}
    outputs = {}
    for direction, name in DIRECTIONS.items():
        h = encoder(inputs[name])  # (B, T, P)
        for i in range(config.n_layers):
            layer_input = keras.layers.Dropout(config.dropout)(h)
            y = keras.layers.LSTM(config.lstm_dim, return_sequences=True, stateful=True,
                                  name=f"{direction}_lstm_{i}")(layer_input)  # (B, T, U)
            y = keras.layers.Dense(config.projection_dim, use_bias=False,
                                   name=f"{direction}_projection_{i}")(y)  # (B, T, P)
            h = y + layer_input if config.use_skip_connections and i > 0 else y
        outputs[direction] = softmax(keras.layers.Dropout(config.dropout)(h))  # (B, T, V)
    model = keras.Model(inputs, outputs)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=_optimizer(), loss={d: loss for d in DIRECTIONS},
                  loss_weights={d: 0.5 for d in DIRECTIONS}, jit_compile=spec["jit"])
    return model, encoder


def _encoder_tokens_per_second(encoder, x, repeats=5):
    """Tokens/s of the character encoder's forward pass (inference)."""
    import time

    import tensorflow as tf

    run = tf.function(lambda ids: encoder(ids, training=False))
    ids = tf.constant(x["char_ids"][0])  # (B, T, C)
    run(ids).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(ids).numpy()
        best = min(best, time.perf_counter() - start)
    return ids.shape[0] * ids.shape[1] / best


def serve(impl):
    """One model's process: `{"build": spec}` builds, compiles and warms up
    (answering `READY`), `{"round": true}` times `steps` fit steps (`TIMES`),
    `{"encoder": true}` times the character encoder (`ENCODER`)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_bert_impl.elmo import elmo_preset

    for line in sys.stdin:
        command = json.loads(line)
        if "build" in command:
            spec = command["build"]
            keras.utils.set_random_seed(0)
            config = elmo_preset(spec["preset"])
            x, y = _batches(config, spec)
            model, encoder = {"ours": _ours, "stock": _stock}[impl](config, spec)
            dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
            model.fit(dataset, steps_per_epoch=spec["warmup"], epochs=1, verbose=0)
            trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
            print("READY " + json.dumps({"params": trainable, "xla": bool(model.jit_compile)}),
                  flush=True)
        elif "encoder" in command:
            print("ENCODER " + json.dumps(_encoder_tokens_per_second(encoder, x)), flush=True)
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
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)

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


def _median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main(argv):
    del argv
    if FLAGS._single:
        serve(FLAGS._single)
        return
    from keras_bert_impl.elmo import elmo_preset

    config = elmo_preset(FLAGS.preset)
    spec = dict(preset=FLAGS.preset, batch_size=FLAGS.batch_size,
                unroll_steps=FLAGS.unroll_steps, vocab_size=FLAGS.vocab_size, steps=FLAGS.steps,
                warmup=FLAGS.warmup, jit=jit_setting(FLAGS.jit))
    tokens = FLAGS.batch_size * FLAGS.unroll_steps
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"({os.cpu_count()} CPUs)")
    print(f"{FLAGS.preset}: char CNN {config.num_filters} filters x {config.n_highway} highway, "
          f"{config.n_layers} x LSTM {config.lstm_dim} -> {config.projection_dim} per direction, "
          f"softmax {FLAGS.vocab_size} (full); batch {FLAGS.batch_size} x {FLAGS.unroll_steps} "
          f"({tokens} tokens per direction per step); warmup {FLAGS.warmup}, {FLAGS.rounds} "
          f"rounds x {FLAGS.steps} timed steps per model", flush=True)
    procs = {impl: _ModelProcess(impl) for impl in ("stock", "ours")}
    for proc in procs.values():
        proc.send({"build": spec})
    results = {impl: proc.read("READY") for impl, proc in procs.items()}
    times = {impl: {"wall": [], "cpu": []} for impl in procs}
    order = list(procs)
    for _ in range(FLAGS.rounds):
        for impl in order:
            procs[impl].send({"round": True})
            for kind, values in procs[impl].read("TIMES").items():
                times[impl][kind].extend(values)
        order.reverse()  # ABBA: neither always goes first
    for impl, proc in procs.items():  # one at a time, the other idle
        proc.send({"encoder": True})
        results[impl]["encoder_tokens_per_s"] = proc.read("ENCODER")
        proc.close()
    header = (f"{'model':6s} {'xla':5s} {'trainable':>10s} {'GFLOP':>6s} {'step ms':>8s} "
              f"{'tokens/s':>9s} {'GFLOP/s':>8s} {'CPU s':>6s} {'encoder tokens/s':>17s}")
    print(header)
    print("-" * len(header))
    for impl, r in results.items():
        r["step_s"] = _median(times[impl]["wall"])
        r["cpu_s"] = _median(times[impl]["cpu"])
        flops = train_flops_per_step(config, spec, impl)
        print(f"{impl:6s} {str(r['xla']):5s} {r['params']:10,d} {flops / 1e9:6.1f} "
              f"{1000 * r['step_s']:8.0f} {tokens / r['step_s']:9.0f} "
              f"{flops / r['step_s'] / 1e9:8.1f} {r['cpu_s']:6.2f} "
              f"{r['encoder_tokens_per_s']:17.0f}")
    ratio = results["stock"]["step_s"] / results["ours"]["step_s"]
    cpu_ratio = results["stock"]["cpu_s"] / results["ours"]["cpu_s"]
    print(f"\nours / stock: {ratio:.2f}x tokens/s (wall), {cpu_ratio:.2f}x (CPU seconds per step, "
          "stock's / ours)")
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    app.run(main)
