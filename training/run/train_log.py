"""A readable progress line and TensorBoard scalars during `fit`."""

import time

import keras
import tensorflow as tf

from tf_records.command_line.progress import eta_seconds
from tf_records.command_line.progress import format_duration

# Shown first, under short labels; any other logged "...accuracy" follows.
_LABELS = (("loss", "loss", ".4f"), ("masked_lm_accuracy", "mlm acc", ".3f"),
           ("next_sentence_accuracy", "nsp acc", ".3f"))


class TrainingLog(keras.callbacks.Callback):
    """Every `every_steps` batches: prints one line and writes TensorBoard
    scalars (loss, masked-LM / NSP or other accuracy, learning rate,
    sequences/s, tokens/s) under `log_dir` (None: console only, as non-chief
    workers). tokens/s counts `tokens_per_step` (batch x max_seq_length) per
    step: padding included, and slots that length grouping cut away too.

    The line ends with sequences (examples) per second over the last
    interval and the ETA of the run, from the mean rate since the first
    batch (whose tracing it leaves out).

    Loss and accuracies are means over the logging interval: `fit`'s logs
    are running means since the epoch (checkpoint interval) began, which
    restart at every epoch and so fell in stairs at each checkpoint; each is
    turned back into the interval's mean as `(mean_t * n_t - mean_s * n_s) /
    (n_t - n_s)` over the batches `n` of the epoch, an interval that crosses
    an epoch's end adding that epoch's tail. Each batch weighs the same: exact
    for the loss (Keras weighs it by batch size, constant here), close for an
    accuracy Keras weighs by its tokens. The step counts on from the step
    `fit` starts at in each epoch, so one log can follow a run split over
    several `fit` calls (fine-tuning's resume inside an epoch).
    """

    def __init__(self, total_steps, first_step, steps_per_epoch, every_steps, sequences_per_step,
                 tokens_per_step, log_dir=None, print_fn=print, rate_label="seq/s"):
        super().__init__()
        self.total_steps = total_steps
        self.step = first_step
        self.steps_per_epoch = steps_per_epoch
        self._epoch_start = first_step
        self.every_steps = max(1, every_steps)
        self.sequences_per_step = sequences_per_step
        self.tokens_per_step = tokens_per_step
        self.print_fn = print_fn
        self.rate_label = rate_label
        self.writer = tf.summary.create_file_writer(log_dir) if log_dir else None
        self._mark = None
        self._first = None  # (time, step) after the first batch: the ETA's rate from there
        self._seen = {}  # metric -> (running mean, batches of this epoch) at the last log
        self._tail = {}  # metric -> (sum, batches) of the last epoch since its last log
        self._last = ({}, 0)  # the newest logs and their batch count in this epoch

    def on_train_begin(self, logs=None):
        self._mark = (time.perf_counter(), self.step)
        self._first = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = self.step  # `batch` counts from 0 again in every epoch
        # The last epoch's batches since its last log; Keras' means restart now.
        logs, batches = self._last
        for name, mean in logs.items():
            seen_mean, seen = self._seen.get(name, (0.0, 0))
            tail_sum, tail = self._tail.get(name, (0.0, 0))
            self._tail[name] = (tail_sum + mean * batches - seen_mean * seen,
                                tail + batches - seen)
        self._seen, self._last = {}, ({}, 0)

    def _interval_means(self, logs, batches):
        """`logs`' running means (over `batches` of this epoch) as means since
        the last log."""
        means = {}
        for name, mean in logs.items():
            seen_mean, seen = self._seen.get(name, (0.0, 0))
            tail_sum, tail = self._tail.pop(name, (0.0, 0))
            count = batches - seen + tail
            means[name] = (mean * batches - seen_mean * seen + tail_sum) / count if count else mean
            self._seen[name] = (mean, batches)
        return means

    def on_train_batch_end(self, batch, logs=None):
        # `batch` is the last step of the execution (steps_per_execution).
        previous, self.step = self.step, self._epoch_start + batch + 1
        now = time.perf_counter()
        if self._first is None:
            self._first = (now, self.step)
        metrics = {name: float(value) for name, value in (logs or {}).items()
                   if name == "loss" or name.endswith(("accuracy", "_loss"))}
        self._last = (metrics, batch + 1)
        if self.step // self.every_steps == previous // self.every_steps and (
                self.step != self.total_steps):
            return
        elapsed = max(now - self._mark[0], 1e-9)
        rate = (self.step - self._mark[1]) / elapsed
        self._mark = (now, self.step)
        mean_rate = rate if self.step <= self._first[1] else (
            (self.step - self._first[1]) / max(now - self._first[0], 1e-9))
        eta = format_duration(eta_seconds(self.step, self.total_steps, mean_rate))
        logs = {**(logs or {}), **self._interval_means(metrics, batch + 1)}
        learning_rate = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        known = {name for name, _, _ in _LABELS}
        labels = _LABELS + tuple((name, name.replace("_", " "), ".3f") for name in sorted(logs)
                                 if name.endswith("accuracy") and name not in known)
        scalars = {name: logs.get(name) for name, _, _ in labels}
        scalars.update({
            "learning_rate": learning_rate,
            "sequences_per_second": rate * self.sequences_per_step,
            "tokens_per_second": rate * self.tokens_per_step,
        })
        parts = [f"step {self.step}/{self.total_steps}"]
        for name, label, fmt in labels + (("learning_rate", "lr", ".2e"),
                                          ("sequences_per_second", self.rate_label, ".1f")):
            if scalars[name] is not None:
                parts.append(f"{label} {float(scalars[name]):{fmt}}")
        parts.append(f"ETA {eta}")
        self.print_fn("  ".join(parts), flush=True)
        if self.writer is not None:
            with self.writer.as_default(step=self.step):
                for name, value in scalars.items():
                    if value is not None:
                        tf.summary.scalar(name, float(value))
            self.writer.flush()
