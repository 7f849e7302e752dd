"""Resumable training: step-level checkpoints, a run lock, a NaN guard.

Keras 3's `BackupAndRestore` restores only the epoch; here a
`tf.train.Checkpoint` of the model and optimizer (whose `iterations` is the
step counter the learning-rate schedule reads) is written every
`steps_per_epoch` steps, where `fit`'s "epochs" are checkpoint intervals.
The data position needs no saving: the reader's stream is a pure function
of its seed, so a resumed run asks it for the stream from batch `step`
(`pretraining_dataset(start_batch=...)`). Checkpoints are complete before
`CheckpointManager` points at them, so a kill at any moment leaves the last
good one.
"""

import errno
import fcntl
import math
import os
import shutil

import keras
import tensorflow as tf

from tf_records.input_files import lock_file


class OutputLock:
    """An exclusive lock on an output folder, held while the process lives.

    A second run pointed at the same folder refuses to start. The lock is a
    `flock` on `<dir>/.lock` (`.lock-<role>` for each worker of a multi-worker
    job, which share the folder), so the kernel drops it when the process
    dies (even by SIGKILL) and a rerun after a crash starts normally.

    A folder the lock made is removed again by `release` when the lock file
    is all it holds: a run refused after taking the lock (a checkpoint that
    does not fit the flags, say) leaves no folder behind.
    """

    def __init__(self, output_dir, role=""):
        self._made = not os.path.exists(output_dir)
        os.makedirs(output_dir, exist_ok=True)
        self.output_dir = output_dir
        self.path = os.path.join(output_dir, lock_file(role))
        self._file = open(self.path, "a+")  # noqa: SIM115 (held for the process)
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            self._file.seek(0)
            holder = self._file.read().strip() or "another process"
            self._file.close()
            raise RuntimeError(
                f"{output_dir} is in use by a running job ({holder}); "
                "give this run its own --output_dir.") from None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(f"pid {os.getpid()}")
        self._file.flush()

    def release(self):
        if self._file.closed:
            return
        empty = self._made and os.listdir(self.output_dir) == [os.path.basename(self.path)]
        if empty:  # unlinked while still held: no other run can have taken it
            os.remove(self.path)
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()
        if empty:
            try:
                os.rmdir(self.output_dir)
            except OSError:  # something appeared meanwhile: keep the folder
                pass


class TrainingCheckpoint:
    """Model + optimizer checkpoints in `<dir>`, keeping the last `max_to_keep`.

    Under `MultiWorkerMirroredStrategy` every worker must save (the save is
    collective); the chief writes to `directory`, the others to a scratch
    folder beside it that is removed after each save.
    """

    def __init__(self, model, directory, max_to_keep=3, strategy=None):
        self.model = model
        self.directory = directory
        # Batches trained (fit steps): the data position. The optimizer's own
        # `iterations` (updates, which the learning-rate schedule reads) is
        # saved with the optimizer.
        self.batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="batches")
        # Dropout's random streams (Keras `SeedGenerator` states) are no
        # part of the model's checkpoint; saved here, a resumed run draws
        # the masks the uninterrupted one would have.
        seeds = [v for v in model.variables if v.path.endswith("seed_generator_state")]
        self._checkpoint = tf.train.Checkpoint(
            model=model, optimizer=model.optimizer, batches=self.batches, dropout_seeds=seeds)
        self.is_chief = _is_chief(strategy)
        if self.is_chief:
            remove_stale_temporaries(directory)
        target = directory if self.is_chief else os.path.join(
            directory, f".worker-{strategy.cluster_resolver.task_id}")
        self._manager = tf.train.CheckpointManager(self._checkpoint, target, max_to_keep=max_to_keep)

    def restore_latest(self):
        """Restores the newest checkpoint, if any; returns its batch count (0 if none)."""
        latest = tf.train.latest_checkpoint(self.directory)
        if latest is None:
            return 0
        # Optimizer slots are made lazily; make them so restore fills them now.
        self.model.optimizer.build(self.model.trainable_variables)
        self._checkpoint.restore(latest).assert_existing_objects_matched()
        return int(self.batches.numpy())

    def save(self, batches):
        self.batches.assign(batches)
        path = self._manager.save(checkpoint_number=batches)
        if not self.is_chief:
            tf.io.gfile.rmtree(os.path.dirname(path))
        return path


def remove_stale_temporaries(directory):
    """Removes the temporary folders (`ckpt-N_temp`, where TensorFlow writes a
    checkpoint's shards before merging them) of a run killed while saving;
    they are never finished or cleaned up otherwise. Says so in a line.
    Returns the folders removed."""
    if not os.path.isdir(directory):
        return []
    stale = sorted(name for name in os.listdir(directory)
                   if name.startswith("ckpt-") and name.endswith("_temp")
                   and os.path.isdir(os.path.join(directory, name)))
    for name in stale:
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    if stale:
        print(f"Removed {len(stale)} temporary checkpoint folder(s) of a run stopped while saving: "
              f"{', '.join(os.path.join(directory, name) for name in stale)}", flush=True)
    return stale


def _is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (
        resolver.task_type == "worker" and resolver.task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict())


class CheckpointEveryEpoch(keras.callbacks.Callback):
    """Saves at each epoch end (= every `steps_per_epoch` batches) unless the
    loss went non-finite, in which case training stops and no checkpoint is
    written, so the last good one stays the newest.

    `fit` must run with absolute epochs (`initial_epoch` on resume).
    """

    def __init__(self, checkpoint, steps_per_epoch):
        super().__init__()
        self.checkpoint = checkpoint
        self.steps_per_epoch = steps_per_epoch
        self.bad_loss = None  # (batch, loss) once the loss is NaN or infinite
        self.batches = None  # batches trained at the last save
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.bad_loss = (self._epoch * self.steps_per_epoch + batch + 1, float(loss))
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        if self.bad_loss is None:
            self.batches = (epoch + 1) * self.steps_per_epoch
            self.checkpoint.save(self.batches)
