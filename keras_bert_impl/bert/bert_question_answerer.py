"""`BertQuestionAnswerer`: span start/end logits for SQuAD."""

import keras

from keras_bert_impl.base.task_defaults import SpanDefaults
from keras_bert_impl.bert.bert_task_model import BertTaskModel
from keras_bert_impl.bert.bert_task_model import backbone_inputs
from keras_bert_impl.bert.bert_task_model import head_initializer

# B=batch, S=sequence


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertQuestionAnswerer(SpanDefaults, BertTaskModel):
    """A start vector and an end vector over every token (paper Sec. 4.2).

    As the original `run_squad.create_model`: one Dense(2) on the sequence
    output, split into start and end logits; the loss is the mean of the two
    cross-entropies over positions. Position 0 ([CLS]) stands for "no answer"
    (SQuAD v2.0). Decoding (end >= start, max answer length, max-context
    windows) lives with the data, in `training/tasks/squad.py`.

    Args:
        backbone: `BertBackbone`.

    Call arguments:
        inputs: dict of int32 `(B, S)` `input_word_ids`, `input_mask`,
            `input_type_ids`.

    Returns:
        dict of float32 `start_logits` and `end_logits`, each `(B, S)`.
    """

    def __init__(self, backbone, **kwargs):
        # === Layers ===
        self.backbone = backbone
        self.span_dense = keras.layers.Dense(
            2, kernel_initializer=head_initializer(backbone), dtype="float32", name="span_logits")
        # === Functional graph ===
        inputs = backbone_inputs()
        logits = self.span_dense(backbone(inputs)["sequence_output"])  # (B, S, 2)
        outputs = {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}  # (B, S) each
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
