"""`ClassifierDefaults`: what every family's sentence(-pair) classifier shares.

A mixin placed before the family's task-model base (`BertClassifier`,
`GptClassifier`, the ELMo classifiers): `num_classes=1` makes a regressor
(STS-B) whose targets are float scores, trained with mean squared error;
otherwise sparse cross-entropy on the logits, with accuracy.
"""

import keras
import tensorflow as tf

from keras_bert_impl.metrics import SparseAccuracy


class ClassifierDefaults:
    """Compile defaults and regression targets for a model with `num_classes`."""

    default_optimizer = "adamw"

    def _symbolic_batch(self):
        x, y, sample_weight = super()._symbolic_batch()
        if self.num_classes == 1:  # regression: float scores shaped like the output
            y = tf.TensorSpec(self.output.shape, tf.float32)
        return x, y, sample_weight

    def compile(self, optimizer=None, loss=None, metrics=None, **kwargs):
        """Cross-entropy + accuracy, or mean squared error for regression."""
        if self.num_classes == 1:
            loss = loss or keras.losses.MeanSquaredError()
        else:
            loss = loss or keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            metrics = metrics or [SparseAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer or self.default_optimizer, loss=loss,
                        metrics=metrics, **kwargs)
