"""`KerasStrategyFixes`: Keras 3.15 problems in building and under distribution strategies, worked around.

Shared by the pretrainers and the fine-tuning models (a mixin placed before
`keras.Model`). Each model says what its targets look like in
`_symbolic_batch`.
"""

import keras


def _multi_worker():
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    in_multi_worker_mode = getattr(strategy.extended, "_in_multi_worker_mode", None)
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and bool(
        in_multi_worker_mode and in_multi_worker_mode())


class KerasStrategyFixes:
    """Builds from input specs, not a consumed batch, before the step is
    traced; multi-worker logs shaped (1,)."""

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        """Builds from the known input structure instead of a real batch.

        Under a distribution strategy Keras 3.15's TF trainer builds the
        model by taking one batch from the training iterator (that batch is
        then never trained on, which would break exact resume and drops a
        batch of every fine-tuning run) and averages it over replicas
        (turning int ids into floats, which our input check rejects). Our
        inputs and targets are fixed, so symbolic specs do.
        """
        if data_batch is None:
            data_batch = self._symbolic_batch()
        if self._distribute_strategy is None:
            # Without a strategy Keras defers building to the first trace of
            # the step function: the optimizer's slots and the loss trackers
            # are then created inside that trace, and `tf.function` traces a
            # function that created variables a second time. Built here, the
            # step is traced once (a first `fit` ~40% sooner).
            self._symbolic_build(data_batch=data_batch)
            return
        super()._maybe_symbolic_build(iterator=None, data_batch=data_batch)

    def train_step(self, data):
        logs = super().train_step(data)
        if _multi_worker():
            # Keras 3.15 reduces a multi-worker step's logs with
            # `strategy.reduce("MEAN", v, axis=0)`, which fails on scalars;
            # shape (1,) reduces to the same scalar.
            import tensorflow as tf

            logs = {k: tf.reshape(v, [1]) for k, v in logs.items()}
        return logs

    def _symbolic_batch(self):
        """`(x, y, sample_weight)` specs: int32 inputs as the model's, and
        int32 targets shaped like each output without its last axis."""
        import tensorflow as tf

        x = keras.tree.map_structure(lambda t: tf.TensorSpec(t.shape, tf.int32), self.input)
        y = keras.tree.map_structure(
            lambda t: tf.TensorSpec(t.shape[:-1], tf.int32), self.output)
        return x, y, None
