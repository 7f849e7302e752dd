"""`ChoiceDefaults`: what every family's multiple-choice model shares.

A mixin placed before the family's task-model base (`GptMultipleChoice`,
`XLNetMultipleChoice`), as `ClassifierDefaults` is for the classifiers:
sparse cross-entropy over each example's C choice scores, with accuracy.
"""

import keras

from keras_bert_impl.metrics import SparseAccuracy


class ChoiceDefaults:
    """Compile defaults for a model whose logits score the choices, `(B, C)`."""

    def compile(self, optimizer="adamw", loss=None, metrics=None, **kwargs):
        """Cross-entropy over the choices + accuracy by default."""
        super().compile(
            optimizer=optimizer,
            loss=loss or keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=metrics or [SparseAccuracy(name="accuracy")],
            **kwargs)
