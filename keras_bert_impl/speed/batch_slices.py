"""`BatchSlices`: a training batch run as slices side by side, one per CPU core."""

import keras
import tensorflow as tf


class BatchSlices:
    """Runs a training call as `batch_slices` slices of the batch, side by side.

    A small model's ops do not keep two CPU cores busy: most of a step is
    one op after another, each split over both cores by oneDNN and waiting
    for its slowest half. Sliced, the batch becomes independent branches of
    the step's graph (forward and backward), and TensorFlow's executor
    runs one branch on each core; with one op thread per slice
    (`training.run.distribution.cpu_op_threads`), no op waits on another
    core. The `tiny` main job's training on 2 cores: 1.15x the real tokens
    per second of whole batches (`benchmarks/real_tokens.py`).

    The outputs are the slices' outputs concatenated in order, so losses
    and metrics are computed on the whole batch as before: every row's
    output depends on that row alone (no batch statistics), so the values
    are those of the whole batch up to float rounding, and dropout draws
    the same distribution. Inference and evaluation calls are never
    sliced. Leave it at 1 on GPUs and TPUs, where one op fills the device.

    Set `model.batch_slices = n` (default 1) before `fit`; it is a runtime
    setting, not saved with the model.
    """

    batch_slices = 1

    def call(self, inputs, training=None, mask=None):
        slices = self.batch_slices
        if not training or slices <= 1:
            return super().call(inputs, training=training, mask=mask)
        rows = tf.shape(tf.nest.flatten(inputs)[0])[0]
        # Ceil-sized slices: with fewer rows than slices, the last ones are
        # empty, and every op of the models takes an empty batch.
        size = -(-rows // slices)
        outputs = []
        for i in range(slices):
            part = tf.nest.map_structure(lambda t, i=i: t[i * size:(i + 1) * size], inputs)
            outputs.append(super().call(part, training=training, mask=mask))
        return keras.tree.map_structure(lambda *parts: tf.concat(parts, axis=0), *outputs)
