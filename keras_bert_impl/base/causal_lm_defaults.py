"""`CausalLMDefaults`: what every family's left-to-right language model shares.

A mixin placed before the model's base (`GptCausalLM`, BERT's
`BertCausalLMPretrainer`), as `ClassifierDefaults` is for the classifiers:
one output, `lm`, trained with the next-token cross-entropy averaged over
the real targets (`MaskedLMLoss` with the sample weights), with accuracy.
"""

from keras_bert_impl.losses import MaskedLMLoss
from keras_bert_impl.metrics import SparseAccuracy


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
