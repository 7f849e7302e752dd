"""`BertMultipleChoice`: one score per (context, ending) pair, softmax over choices."""

import keras

from keras_bert_impl.base.task_defaults import ChoiceDefaults
from keras_bert_impl.bert.bert_backbone import INPUT_NAMES
from keras_bert_impl.bert.bert_task_model import BertTaskModel
from keras_bert_impl.bert.bert_task_model import head_initializer
from keras_bert_impl.bert.bert_task_model import pooled_output
from keras_bert_impl.layers.choice_rows import FoldRows
from keras_bert_impl.layers.choice_rows import UnfoldScores
from keras_bert_impl.speed.fast_dropout import FastDropout

# B=batch, C=choices, S=sequence, H=hidden


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertMultipleChoice(ChoiceDefaults, BertTaskModel):
    """SWAG-style multiple choice (paper Sec. 4.4).

    Each (context, ending) pair is one BERT input; a vector dotted with its
    pooled [CLS] output (a Dense to 1 unit) scores it; a softmax over the
    choices gives the answer. Any number of choices: the inputs are
    `(B, C, S)` and the logits `(B, C)`.

    Args:
        backbone: `BertBackbone`.
        dropout: float. Dropout on the pooled output (the backbone's
            `hidden_dropout_prob` when None).

    Call arguments:
        inputs: dict of int32 `(B, C, S)` `input_word_ids`, `input_mask`,
            `input_type_ids`.

    Returns:
        float32 logits `(B, C)`.
    """

    config_names = ("dropout",)

    def __init__(self, backbone, dropout=None, **kwargs):
        if dropout is None:
            dropout = backbone.bert_config.hidden_dropout_prob
        # === Layers ===
        self.backbone = backbone
        self.fold = FoldRows(name="fold_choices")
        self.unfold = UnfoldScores(name="unfold_choices")
        self.output_dropout = FastDropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            1, kernel_initializer=head_initializer(backbone), dtype="float32", name="choice_score")
        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None, None), dtype="int32", name=name)
                  for name in INPUT_NAMES}  # (B, C, S)
        pooled = pooled_output(backbone, {name: self.fold(x) for name, x in inputs.items()})
        scores = self.output_dense(self.output_dropout(pooled))  # (B*C, 1)
        logits = self.unfold(scores, inputs["input_word_ids"])  # (B, C)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        # === Config ===
        self.dropout = dropout

    def call(self, inputs, training=None, mask=None):
        if not isinstance(inputs, dict) or sorted(inputs) != sorted(INPUT_NAMES):
            raise ValueError(f"Inputs must be a dict with keys {list(INPUT_NAMES)}, "
                             "each int32 (batch, choices, seq_length).")
        for name in INPUT_NAMES:
            if len(inputs[name].shape) != 3:
                raise ValueError(f"`{name}` must have rank 3, (batch, choices, seq_length). "
                                 f"Received shape={tuple(inputs[name].shape)}.")
        # The backbone checks dtypes, lengths and id ranges on the folded rows.
        return super(BertTaskModel, self).call(inputs, training=training, mask=mask)
