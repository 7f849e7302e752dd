"""A readable progress line and TensorBoard scalars during `fit`."""

import time

import keras
import tensorflow as tf


class TrainingLog(keras.callbacks.Callback):
    """Every `every_steps` batches: prints one line and writes TensorBoard
    scalars (loss, masked-LM / NSP accuracy, learning rate, sequences/s,
    tokens/s) under `log_dir` (None: console only, as non-chief workers).
    tokens/s counts `tokens_per_step` (batch x max_seq_length) per step:
    padding included, and slots that length grouping cut away too.

    `fit`'s logs are running means since the epoch (checkpoint interval)
    began; they are shown as such.
    """

    def __init__(self, total_steps, first_step, steps_per_epoch, every_steps, sequences_per_step,
                 tokens_per_step, log_dir=None, print_fn=print):
        super().__init__()
        self.total_steps = total_steps
        self.step = first_step
        self.steps_per_epoch = steps_per_epoch
        self._epoch = 0
        self.every_steps = max(1, every_steps)
        self.sequences_per_step = sequences_per_step
        self.tokens_per_step = tokens_per_step
        self.print_fn = print_fn
        self.writer = tf.summary.create_file_writer(log_dir) if log_dir else None
        self._mark = None

    def on_train_begin(self, logs=None):
        self._mark = (time.perf_counter(), self.step)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch  # absolute: fit runs with initial_epoch on resume

    def on_train_batch_end(self, batch, logs=None):
        # `batch` is the last step of the execution (steps_per_execution).
        previous, self.step = self.step, self._epoch * self.steps_per_epoch + batch + 1
        if self.step // self.every_steps == previous // self.every_steps and (
                self.step != self.total_steps):
            return
        now = time.perf_counter()
        elapsed = max(now - self._mark[0], 1e-9)
        rate = (self.step - self._mark[1]) / elapsed
        self._mark = (now, self.step)
        logs = dict(logs or {})
        learning_rate = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        scalars = {
            "loss": logs.get("loss"),
            "masked_lm_accuracy": logs.get("masked_lm_accuracy"),
            "next_sentence_accuracy": logs.get("next_sentence_accuracy"),
            "learning_rate": learning_rate,
            "sequences_per_second": rate * self.sequences_per_step,
            "tokens_per_second": rate * self.tokens_per_step,
        }
        parts = [f"step {self.step}/{self.total_steps}"]
        for name, label, fmt in (("loss", "loss", ".4f"), ("masked_lm_accuracy", "mlm acc", ".3f"),
                                 ("next_sentence_accuracy", "nsp acc", ".3f"),
                                 ("learning_rate", "lr", ".2e"),
                                 ("sequences_per_second", "seq/s", ".1f")):
            if scalars[name] is not None:
                parts.append(f"{label} {float(scalars[name]):{fmt}}")
        self.print_fn("  ".join(parts), flush=True)
        if self.writer is not None:
            with self.writer.as_default(step=self.step):
                for name, value in scalars.items():
                    if value is not None:
                        tf.summary.scalar(name, float(value))
            self.writer.flush()
