"""Compile defaults every family's token taggers, span (question
answering), multiple-choice and left-to-right language models share:
mixins placed before the family's task-model base, as `ClassifierDefaults`
is for the classifiers."""

import keras

from keras_bert_impl.losses import MaskedLMLoss
from keras_bert_impl.metrics import SparseAccuracy

SPAN_OUTPUTS = ("start_logits", "end_logits")


class TaggerDefaults:
    """A token tagger's loss and metric: the weighted-mean cross-entropy
    over the labelled positions, and their accuracy."""

    default_optimizer = "adamw"

    def compile(self, optimizer=None, loss=None, weighted_metrics=None, **kwargs):
        """Weighted-mean cross-entropy over labelled positions + their accuracy."""
        loss = loss or keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight")
        weighted_metrics = weighted_metrics or [SparseAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer or self.default_optimizer, loss=loss,
                        weighted_metrics=weighted_metrics, **kwargs)


class SpanDefaults:
    """A span model's loss and metrics: `(start cross-entropy + end
    cross-entropy) / 2`, as the original BERT's, and each one's accuracy."""

    def compile(self, optimizer="adamw", loss=None, loss_weights=None, metrics=None, **kwargs):
        """(start cross-entropy + end cross-entropy) / 2 by default."""
        if loss is None:
            loss = {name: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                    for name in SPAN_OUTPUTS}
            loss_weights = loss_weights or {"start_logits": 0.5, "end_logits": 0.5}
        if metrics is None:
            metrics = {name: [SparseAccuracy(name="accuracy")] for name in SPAN_OUTPUTS}
        super().compile(optimizer=optimizer, loss=loss, loss_weights=loss_weights,
                        metrics=metrics, **kwargs)


class ChoiceDefaults:
    """Compile defaults for a model whose logits score the choices, `(B, C)`."""

    def compile(self, optimizer="adamw", loss=None, metrics=None, **kwargs):
        """Cross-entropy over the choices + accuracy by default."""
        super().compile(
            optimizer=optimizer,
            loss=loss or keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=metrics or [SparseAccuracy(name="accuracy")],
            **kwargs)


class CausalLMDefaults:
    """Compile defaults for a model whose one output, `lm`, predicts each next token."""

    def compile(self, optimizer="adamw", loss=None, weighted_metrics=None, **kwargs):
        """Compiles with the next-token loss and accuracy by default."""
        super().compile(
            optimizer=optimizer,
            loss=loss or {"lm": MaskedLMLoss(name="lm_loss")},
            weighted_metrics=weighted_metrics
            # One output: Keras would not prefix the name, so name it fully.
            or {"lm": [SparseAccuracy(name="lm_accuracy")]},
            **kwargs,
        )
