"""Pieces the train-step benchmarks share: optimizer, matmul peak, timers.

`pretrain_step.py` (BERT) and `gpt_train_step.py` (GPT) time ours against
keras-hub the same way: the same AdamW, the same per-step timer around
`fit`, achieved GFLOP/s against the same measured matmul peak, each
measurement in a fresh Python process that prints one `RESULT {json}` line.
"""

import json
import resource
import subprocess
import sys
import time


def jit_setting(value):
    """A `--*_jit` flag value ("auto", "true", "false") as `compile()` takes it."""
    return {"auto": "auto", "true": True, "false": False}[value]


def adamw_optimizer(impl="keras_hub"):
    """AdamW as BERT pretrains: weight decay 0.01 (none on biases and
    LayerNorm), epsilon 1e-6 and global-norm clipping 1.0, learning rate
    1e-4. keras-hub's side: `keras.optimizers.AdamW`, what keras-hub
    trains with; ours: `training.run.optimization.FusedAdamW`, what our
    commands train with (the same update, `tests/test_optimization.py`, in
    fused kernels)."""
    import keras

    cls = keras.optimizers.AdamW
    if impl == "ours":
        from training.run.optimization import FusedAdamW as cls
    optimizer = cls(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta", "LayerNorm", "layer_norm"])
    return optimizer


def measure_matmul_peak():
    """GFLOP/s of a large float32 and bfloat16 matmul on this machine."""
    import tensorflow as tf

    peaks = {}
    for dtype in ("float32", "bfloat16"):
        a = tf.cast(tf.random.normal((4096, 1024)), dtype)
        b = tf.cast(tf.random.normal((1024, 1024)), dtype)
        matmul = tf.function(tf.matmul)
        for _ in range(3):
            matmul(a, b).numpy()
        best = float("inf")
        for _ in range(10):
            start = time.perf_counter()
            matmul(a, b).numpy()
            best = min(best, time.perf_counter() - start)
        peaks[dtype] = 2 * 4096 * 1024 * 1024 / best / 1e9
    return peaks


def process_cpu_seconds():
    """User + system CPU seconds of this process, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def step_timer(times, cpu_times=None):
    """A `fit` callback appending each train step's wall time to `times`
    (and, given `cpu_times`, the process's CPU seconds in the step: less
    swayed than wall time by other jobs sharing the cores)."""
    import keras

    class StepTimer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()
            if cpu_times is not None:
                self.cpu_start = process_cpu_seconds()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)
            if cpu_times is not None:
                cpu_times.append(process_cpu_seconds() - self.cpu_start)

    return StepTimer()


def in_subprocess(script, single):
    """Runs `script --_single=SINGLE` in a fresh Python; its `RESULT` JSON."""
    proc = subprocess.run(
        [sys.executable, script, "--_single=" + single],
        capture_output=True, text=True,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"benchmark run failed: {single}")
    return json.loads(lines[-1][len("RESULT "):])


def alternate_fits(spec, builders, batch, records_dataset=None):
    """Both models of one (size, precision) in this process, timed by `fit`
    in alternating rounds (so drift in a shared machine's speed hits both
    alike); each side's sequences/s from its median step.

    Args:
        spec: dict: `preset`, `precision`, `batch_size`, `steps`, `warmup`,
            `rounds`, `jit` (`{impl: compile's jit_compile}`), optional `only`.
        builders: `(impl, build)` pairs; `build(preset, precision, batch)`
            returns `(model, (x, y[, sample_weight]), compile_args or None)`.
        batch: what the builders take.
        records_dataset: optional `impl -> tf.data.Dataset`: then each round
            is whole `fit` epochs read from it (input work counts), the
            first epoch (filling the shuffle buffer) not counted.
    """
    import keras
    import numpy as np
    import tensorflow as tf

    runs = {}
    for impl, build in builders:
        if spec.get("only") not in (None, impl):
            continue
        model, data, compile_args = build(spec["preset"], spec["precision"], batch)
        model.compile(optimizer=adamw_optimizer(impl), jit_compile=spec["jit"][impl], **(compile_args or {}))
        if records_dataset:
            dataset = records_dataset(impl)
        else:
            dataset = tf.data.Dataset.from_tensors(data).repeat()
        model.fit(dataset, steps_per_epoch=spec["warmup"], epochs=1, verbose=0)
        runs[impl] = (model, dataset, [])

    class EpochTimes(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.times = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.times.append(time.perf_counter() - self.start)

    for _ in range(spec["rounds"]):
        for model, dataset, times in runs.values():
            if records_dataset:
                # Whole fit epochs, input pipeline included, in one fit call
                # (Keras keeps the iterator across epochs with
                # steps_per_epoch, as in a real run); the first epoch, which
                # fills the shuffle buffer, is not counted.
                epochs = EpochTimes()
                model.fit(dataset, steps_per_epoch=spec["steps"], epochs=3, verbose=0,
                          callbacks=[epochs])
                times.extend(t / spec["steps"] for t in epochs.times[1:])
            else:
                model.fit(dataset, steps_per_epoch=spec["steps"], epochs=1, verbose=0,
                          callbacks=[step_timer(times)])
    return {impl: {"seq_per_s": spec["batch_size"] / float(np.median(times)),
                   "params": model.count_params(), "xla": bool(model.jit_compile)}
            for impl, (model, _, times) in runs.items()}
