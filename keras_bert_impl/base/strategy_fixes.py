"""`KerasStrategyFixes`: Keras 3.15 problems in building, under distribution strategies and at the end of `fit` and `evaluate`, worked around.

Shared by the pretrainers and the fine-tuning models (a mixin placed before
`keras.Model`). Each model says what its targets look like in
`_symbolic_batch`.
"""

import keras
import tensorflow as tf
from keras.src import backend
from keras.src.models.functional import Functional


def _multi_worker():
    strategy = tf.distribute.get_strategy()
    in_multi_worker_mode = getattr(strategy.extended, "_in_multi_worker_mode", None)
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and bool(
        in_multi_worker_mode and in_multi_worker_mode())


def without_autotune_thread(dataset):
    """`dataset` with tf.data's autotuning off, unless its options say otherwise.

    With Keras 3.15 and TensorFlow 2.21, `fit` and `evaluate` end by
    destroying their iterator, and that waits for the iterator's
    autotuning thread, which sleeps out its optimization period (doubling
    up to 60 s) instead of waking: a `fit` of more than a minute or so
    returned up to a minute late (51 s after 1,000 tiny-BERT steps,
    measured), an `evaluate` of 7 s of batches 3.1-3.3 s late (0.00 s
    without autotuning; `predict` returned 0.08-0.13 s after its last batch
    either way, and iterating the same dataset eagerly does not wait). Without
    autotuning that thread does not exist; `AUTOTUNE` parallelism takes
    TensorFlow's default (the cores) and prefetch buffers grow on demand:
    the same 1,000 steps took 93.0 s vs 93.4 s. Other inputs (arrays,
    distributed datasets) are returned as is.
    """
    if not isinstance(dataset, tf.data.Dataset) or dataset.options().autotune.enabled is not None:
        return dataset
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


class KerasStrategyFixes:
    """Builds from input specs, not a consumed batch, before the step is
    traced; multi-worker logs shaped (1,); `fit` and `evaluate` return when
    they end."""

    def fit(self, x=None, *args, **kwargs):
        return super().fit(without_autotune_thread(x), *args, **kwargs)

    def evaluate(self, x=None, *args, **kwargs):
        return super().evaluate(without_autotune_thread(x), *args, **kwargs)

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

    def _symbolic_build(self, iterator=None, data_batch=None):
        """Builds the compiled loss, metrics and optimizer without tracing the model.

        Keras gets the predictions' specs for them by tracing the whole
        model into a scratch graph (`compute_output_spec(self, x)`), a
        second trace on top of the step's own. Our models know those specs
        without it (`_symbolic_outputs`), so only loss and metrics are
        traced.
        """
        y_pred = None if data_batch is None or not all(
            layer.built for layer in self._flatten_layers()) else self._symbolic_outputs()
        if y_pred is None:
            return super()._symbolic_build(iterator=iterator, data_batch=data_batch)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(keras.tree.map_structure(
            lambda v: None if v is None else keras.KerasTensor(
                v.shape, backend.standardize_dtype(v.dtype)), data_batch))
        if self._compile_metrics is not None and not self._compile_metrics.built:
            backend.compute_output_spec(self.compute_metrics, x, y, y_pred,
                                        sample_weight=sample_weight)
        if self._compile_loss is not None and not self._compile_loss.built:
            backend.compute_output_spec(self._compute_loss, x, y, y_pred,
                                        sample_weight=sample_weight, training=False)
        if self.optimizer is not None and not self.optimizer.built:
            self.optimizer.build(self.trainable_variables)
        self._post_build()

    def train_step(self, data):
        logs = super().train_step(data)
        if _multi_worker():
            # Keras 3.15 reduces a multi-worker step's logs with
            # `strategy.reduce("MEAN", v, axis=0)`, which fails on scalars;
            # shape (1,) reduces to the same scalar.
            logs = {k: tf.reshape(v, [1]) for k, v in logs.items()}
        return logs

    def _symbolic_outputs(self):
        """The predictions' specs (KerasTensors), or None for Keras' way.

        A functional model whose layers are all built (ours are, at
        construction) holds them as its outputs: our models' `call`
        overrides check their inputs and return the functional call's.
        A model that is not functional says what it returns (XLNet's
        pretrainer, ELMo's language model).
        """
        if not isinstance(self, Functional):
            return None
        return keras.tree.map_structure(lambda t: keras.KerasTensor(t.shape, t.dtype), self.output)

    def _symbolic_batch(self):
        """`(x, y, sample_weight)` specs: int32 inputs as the model's, and
        int32 targets shaped like each output without its last axis."""
        x = keras.tree.map_structure(lambda t: tf.TensorSpec(t.shape, tf.int32), self.input)
        y = keras.tree.map_structure(
            lambda t: tf.TensorSpec(t.shape[:-1], tf.int32), self.output)
        return x, y, None
