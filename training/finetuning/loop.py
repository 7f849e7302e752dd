"""Fine-tuning's fit loop: resumable after a crash, with progress and curves.

Every epoch's batches are a pure function of (seed, epoch): the rows are
shuffled with a seed made of both (`epoch_seed`), so a rerun can make the
batches of any epoch again and skip the ones already trained. Checkpoints
(`training.run.checkpointing.TrainingCheckpoint`: model, optimizer, dropout
seeds, batches trained) are written every `--checkpoint_every_steps` and at
every epoch end, after the epoch's dev scores, whose history is kept beside
them (`history.json`). The same command run again after a kill restores the
newest checkpoint and trains on from the next batch: the weights at the end
are those of an uninterrupted run. A run that already finished, or that
early stopping ended (`training.finetuning.early_stopping`, read off the
same history), trains no further.

`fit` runs once per resume point: a resume inside an epoch first fits that
epoch's remaining batches, then the epochs after it. Keras' `fit` logs are
running means since the epoch (or the resumed part of it) began.
"""

import json
import math
import numbers
import os

import keras
import tensorflow as tf

from training.finetuning.early_stopping import BEST_WEIGHTS
from training.finetuning.early_stopping import KeepBest
from training.run.checkpointing import TrainingCheckpoint

# Changing these between a run and its resume would silently change the run.
_NOT_RUN_KEYS = ("output_dir", "strategy", "tpu", "export", "export_formats", "quantize",
                 "log_every_steps", "checkpoint_every_steps")


def say(message):
    print(message, flush=True)


def epoch_seed(seed, epoch):
    """The shuffle seed of `epoch`'s batches: each epoch its own order, the
    same in every run."""
    return seed * 1000 + epoch


def shuffled_batches(x, y, sample_weight, batch_size, seed):
    """One epoch of in-memory rows, shuffled by `seed`, in batches of
    `batch_size` (the last may be smaller): what `fit(x, y, shuffle=True)`
    gives, with an order that does not depend on what ran before."""
    rows = len(next(iter(keras.tree.flatten(x))))
    data = (x, y) if sample_weight is None else (x, y, sample_weight)
    return (tf.data.Dataset.from_tensor_slices(data).shuffle(rows, seed=seed)
            .batch(batch_size).prefetch(tf.data.AUTOTUNE))


class EvaluateEachEpoch(keras.callbacks.Callback):
    """Scores every dev split with the task's metric after each epoch; the
    scores join the epoch's logs (so `history` and summary.json hold them)
    and, with `log_dir`, TensorBoard's `<log_dir>/<name>/` at the step
    trained so far (where `training.run.curves` reads them).

    `names`: {split: the name its scores carry} (None: each split its own
    name); `--validation_data_dir`'s task scores its first dev split as
    "validation"."""

    def __init__(self, task, log_dir=None, names=None):
        super().__init__()
        self.task = task
        self.log_dir = log_dir
        self.names = names or {split: split for split in task.eval_splits}

    def on_epoch_end(self, epoch, logs=None):
        for split, name in self.names.items():
            metrics, _ = self.task.evaluate(self.model, split)
            shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
            say(f"epoch {epoch + 1} {name}: {shown}")
            if logs is not None:
                logs.update({f"{name}_{k}": v for k, v in metrics.items()
                             if isinstance(v, (int, float))})
            if self.log_dir:
                step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
                writer = tf.summary.create_file_writer(os.path.join(self.log_dir, name))
                with writer.as_default(step=step):
                    for key, value in metrics.items():
                        # Scores only: not counts, nor SQuAD v2's null-score threshold.
                        if isinstance(value, float) and "threshold" not in key:
                            tf.summary.scalar(key, value)
                writer.close()


class SaveEverySteps(keras.callbacks.Callback):
    """Checkpoints every `every_steps` batches and at every epoch end.

    At an epoch end it runs after the dev scoring (put it after
    `EvaluateEachEpoch`): it adds the epoch's logs to `history.json`, then
    saves, so a checkpoint at an epoch end always has its scores. The
    epoch's last batch is therefore not saved by the step rule. A
    non-finite loss stops training with no checkpoint written after it.
    """

    def __init__(self, checkpoint, every_steps, steps_per_epoch, batches, history, history_path):
        super().__init__()
        self.checkpoint = checkpoint
        self.every_steps = max(1, every_steps)
        self.steps_per_epoch = steps_per_epoch
        self.batches = batches  # trained so far: fine-tuning runs one batch per step
        self.history = history  # one dict of logs per finished epoch
        self.history_path = history_path
        self.bad_loss = None

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.bad_loss = (self.batches, float(loss))
            self.model.stop_training = True
        elif self.batches % self.every_steps == 0 and self.batches % self.steps_per_epoch:
            self.checkpoint.save(self.batches)

    def on_epoch_end(self, epoch, logs=None):
        if self.bad_loss is not None:
            return
        self.history.append({k: float(v) for k, v in (logs or {}).items()
                             if isinstance(v, numbers.Real)})
        if self.checkpoint.is_chief:
            write_json(self.history_path, self.history)
        self.checkpoint.save(self.batches)


def fit_resumable(model, epoch_batches, epochs, steps_per_epoch, output_dir, every_steps,
                  callbacks, log, strategy, run_config, early_stopping=None):
    """Fits `epochs` epochs of `epoch_batches(epoch)`, resuming from the
    checkpoints in `<output_dir>/checkpoints` if there are any.

    Args:
        model: the compiled task model (built under `strategy`).
        epoch_batches: callable, epoch -> a `tf.data.Dataset` of exactly
            `steps_per_epoch` batches, the same for an epoch in every run.
        epochs, steps_per_epoch: ints.
        output_dir: the run folder.
        every_steps: int. Checkpoint interval in steps (epoch ends too).
        callbacks: list run before the checkpointing one (dev scoring).
        log: a `training.run.train_log.TrainingLog` (progress lines, TensorBoard),
            told the step the run starts at.
        strategy: the `tf.distribute` strategy the model was built under.
        run_config: dict of the run's settings; a resume with others stops.
        early_stopping: None, or `(split, patience)`: `KeepBest` on the
            scores named `split`, its weights in `<output_dir>/checkpoints/
            best.weights.h5` (`BEST_WEIGHTS`); a run it stopped trains no
            further when run again.

    Returns:
        `{metric: [one value per epoch]}`, as `fit`'s `History.history`,
        over every epoch of the run (those before a resume too).
    """
    directory = os.path.join(output_dir, "checkpoints")
    _check_run_config({k: v for k, v in run_config.items() if k not in _NOT_RUN_KEYS},
                      os.path.join(directory, "run_config.json"), output_dir)
    checkpoint, start, history = _restore(model, strategy, directory, steps_per_epoch)
    saver = SaveEverySteps(checkpoint, every_steps, steps_per_epoch, start, history,
                           os.path.join(directory, "history.json"))
    keeper = []
    if early_stopping is not None:
        keeper = [KeepBest(os.path.join(directory, BEST_WEIGHTS), *early_stopping, history,
                           checkpoint.is_chief)]
    total = epochs * steps_per_epoch
    if start >= total or (keeper and keeper[0].stopped):
        stopped = f"stopped early after epoch {len(history)}, " if start < total else ""
        say(f"Fine-tuning already done ({stopped}{start} of {total} steps in {directory}): "
            "not training again.")
    else:
        if start:
            say(f"Resuming fine-tuning at step {start} of {total} from {directory}")
        log.step = start
        _fit_from(model, epoch_batches, start, epochs, steps_per_epoch,
                  [*callbacks, *keeper, log, saver],
                  lambda: saver.bad_loss is not None or (keeper and keeper[0].stopped))
    if saver.bad_loss is not None:
        raise SystemExit(f"The loss became {saver.bad_loss[1]} by step {saver.bad_loss[0]}: "
                         f"stopped; the last good checkpoint is kept in {directory}.")
    return {name: [logs.get(name, float("nan")) for logs in history]
            for name in dict.fromkeys(k for logs in history for k in logs)}


def _restore(model, strategy, directory, steps_per_epoch):
    """(the `TrainingCheckpoint` in `directory`, the step restored (0: none),
    the history of the epochs finished before it)."""
    with strategy.scope():
        # One checkpoint kept: a save completes before the older one goes.
        checkpoint = TrainingCheckpoint(model, directory, max_to_keep=1, strategy=strategy)
        start = checkpoint.restore_latest()
    history_path = os.path.join(directory, "history.json")
    history = []
    if start and os.path.exists(history_path):  # none before the first epoch end
        with open(history_path, encoding="utf-8") as f:
            history = json.load(f)[:start // steps_per_epoch]  # epochs finished and saved
    return checkpoint, start, history


def _fit_from(model, epoch_batches, start, epochs, steps_per_epoch, callbacks, stop):
    """`fit` from step `start` to the end: the rest of the epoch it falls in,
    then the epochs after it (none once `stop()` says so: a non-finite loss,
    or early stopping)."""
    epoch, offset = divmod(start, steps_per_epoch)
    if offset:  # the rest of the epoch the run stopped in
        model.fit(epoch_batches(epoch).skip(offset), initial_epoch=epoch, epochs=epoch + 1,
                  steps_per_epoch=steps_per_epoch - offset, callbacks=callbacks, verbose=0,
                  shuffle=False)  # the batches are shuffled, by (seed, epoch)
        epoch += 1
    if epoch < epochs and not stop():
        data = epoch_batches(epoch)
        for later in range(epoch + 1, epochs):
            data = data.concatenate(epoch_batches(later))
        model.fit(data, initial_epoch=epoch, epochs=epochs, steps_per_epoch=steps_per_epoch,
                  callbacks=callbacks, verbose=0,
                  shuffle=False)  # the batches are shuffled, by (seed, epoch)


def _check_run_config(settings, path, output_dir):
    """Refuses to resume a run with other settings; records them on the first start."""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        for key, value in settings.items():
            if key in saved and saved[key] != value:
                raise SystemExit(
                    f"{output_dir} holds a fine-tuning run with --{key}={saved[key]!r}; this "
                    f"command says {value!r}. Use the same settings to resume it, or another "
                    "--output_dir.")
        return
    write_json(path, settings)


def write_json(path, value):
    """`value` as indented JSON at `path`, written whole or not at all."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, default=float)
    os.replace(path + ".tmp", path)
