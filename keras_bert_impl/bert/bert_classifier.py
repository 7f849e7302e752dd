"""`BertClassifier`: sentence(-pair) classification and regression."""

import keras

from keras_bert_impl.base.classifier_defaults import ClassifierDefaults
from keras_bert_impl.bert.bert_task_model import BertTaskModel
from keras_bert_impl.bert.bert_task_model import backbone_inputs
from keras_bert_impl.bert.bert_task_model import head_initializer
from keras_bert_impl.bert.bert_task_model import pooled_output
from keras_bert_impl.speed.fast_dropout import FastDropout

# B=batch, C=classes


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertClassifier(ClassifierDefaults, BertTaskModel):
    """Dropout + Dense on the pooled [CLS] vector (paper Sec. 4.1, Fig. 4a/b).

    As the original `run_classifier.create_model`: the pooled output, dropout
    0.1 while training, then a Dense layer to `num_classes` logits.
    `num_classes=1` makes a regressor (STS-B): one float per example,
    trained with mean squared error.

    Args:
        backbone: `BertBackbone`.
        num_classes: int. Classes, or 1 for regression.
        dropout: float. Dropout on the pooled output (the backbone's
            `hidden_dropout_prob` when None).

    Call arguments:
        inputs: dict of int32 `(B, S)` `input_word_ids`, `input_mask`,
            `input_type_ids`.

    Returns:
        float32 logits `(B, C)`, or scores `(B,)` when `num_classes=1`.

    Example:
    >>> model = BertClassifier(BertBackbone.from_bert_config(preset("tiny")), 3)
    >>> model.compile()  # cross-entropy + accuracy
    """

    config_names = ("num_classes", "dropout")

    def __init__(self, backbone, num_classes, dropout=None, **kwargs):
        if num_classes < 1:
            raise ValueError(f"`num_classes` must be >= 1 (1 = regression). Received: {num_classes}.")
        if dropout is None:
            dropout = backbone.bert_config.hidden_dropout_prob
        # === Layers ===
        self.backbone = backbone
        self.output_dropout = FastDropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=head_initializer(backbone),
            dtype="float32",  # logits in float32 under mixed precision
            name="logits")
        # === Functional graph ===
        inputs = backbone_inputs()
        pooled = pooled_output(backbone, inputs)  # (B, H)
        logits = self.output_dense(self.output_dropout(pooled))  # (B, C)
        if num_classes == 1:
            logits = keras.ops.squeeze(logits, axis=-1)  # (B,)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
