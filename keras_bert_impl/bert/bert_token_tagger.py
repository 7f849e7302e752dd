"""`BertTokenTagger`: one label per token (NER)."""

import keras

from keras_bert_impl.base.task_defaults import TaggerDefaults
from keras_bert_impl.bert.bert_task_model import BertTaskModel
from keras_bert_impl.bert.bert_task_model import backbone_inputs
from keras_bert_impl.bert.bert_task_model import head_initializer
from keras_bert_impl.speed.fast_dropout import FastDropout

# B=batch, S=sequence, L=labels


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertTokenTagger(TaggerDefaults, BertTaskModel):
    """Dropout + Dense on every token's final vector (paper Sec. 5.3, Fig. 4d).

    The paper labels each word's first WordPiece; the other pieces, the
    special tokens and padding carry sample weight 0 (`training/tasks/conll.py` makes
    them), and the loss is the weighted mean over the labelled pieces.

    Args:
        backbone: `BertBackbone`.
        num_labels: int. Tag set size (L).
        dropout: float. Dropout on the sequence output (the backbone's
            `hidden_dropout_prob` when None).

    Call arguments:
        inputs: dict of int32 `(B, S)` `input_word_ids`, `input_mask`,
            `input_type_ids`.

    Returns:
        float32 logits `(B, S, L)`.
    """

    config_names = ("num_labels", "dropout")

    def __init__(self, backbone, num_labels, dropout=None, **kwargs):
        if num_labels < 2:
            raise ValueError(f"`num_labels` must be >= 2. Received: {num_labels}.")
        if dropout is None:
            dropout = backbone.bert_config.hidden_dropout_prob
        # === Layers ===
        self.backbone = backbone
        self.output_dropout = FastDropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_labels, kernel_initializer=head_initializer(backbone), dtype="float32",
            name="logits")
        # === Functional graph ===
        inputs = backbone_inputs()
        sequence = backbone(inputs)["sequence_output"]  # (B, S, H)
        logits = self.output_dense(self.output_dropout(sequence))  # (B, S, L)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        # === Config ===
        self.num_labels = num_labels
        self.dropout = dropout
