"""`BertBiLstmBackbone`: a BERT backbone with a BiLSTM on its sequence output."""

import keras

from keras_bert_impl.base.backbone import keep_config
from keras_bert_impl.base.backbone import sequence_inputs
from keras_bert_impl.base.backbone import with_backbone
from keras_bert_impl.base.backbone import wrapper_config
from keras_bert_impl.bert.bert_backbone import INPUT_NAMES
from keras_bert_impl.bert.bert_backbone import BertBackbone
from keras_bert_impl.bert.bert_backbone import pooled_rows

# B=batch, S=sequence, H=hidden


def even_hidden_size(backbone):
    """`backbone`'s hidden size H, which a BiLSTM on it splits between its
    two directions (H/2 units each): `ValueError` when odd."""
    hidden_size = backbone.bert_config.hidden_size
    if hidden_size % 2:
        raise ValueError(
            "The BiLSTM splits `hidden_size` between its two directions, so it must be "
            f"even. Received: hidden_size={hidden_size}.")
    return hidden_size


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertBiLstmBackbone(BertBackbone):
    """A `BertBackbone` whose sequence output goes through a bidirectional LSTM.

    The paper's "+ BiLSTM" row of Table 5 (Devlin et al. 2018, Sec. 5.1): a
    randomly initialized `Bidirectional(LSTM)` on top of the LTR model,
    added for fine-tuning only, to give the left-to-right encoder some
    right-hand context back. Each direction has H/2 units, so the
    concatenated output keeps the width H and every task head fits
    unchanged. Padding is masked: the backward LSTM starts at the last real
    token.

    It is a `BertBackbone` to every caller (task models, `load_backbone`,
    SavedModel export): the same three inputs, the same outputs and the
    wrapped backbone's `bert_config` and `causal` attributes.
    `pooled_output` is recomputed from the new sequence output with the
    wrapped backbone's own pooler, at the same position ([CLS], or the last
    non-padding token when the backbone is causal); `encoder_outputs` are
    the wrapped backbone's, unchanged. Pretrainers and
    `BertFeatureExtractor` read the encoder's layers directly, not this
    model: they take the wrapped `backbone`.

    Args:
        backbone: `BertBackbone`. The encoder (usually causal, with
            pretrained weights); its dtype policy is used for the LSTM too.

    Call arguments:
        inputs: dict of int32 `(B, S)` tensors `input_word_ids`,
            `input_mask`, `input_type_ids`.

    Returns:
        dict: `sequence_output` `(B, S, H)` (the BiLSTM's), `pooled_output`
        `(B, H)`, `encoder_outputs` list of L `(B, S, H)` (the backbone's).

    Example:
    >>> encoder = BertBackbone.from_bert_config(preset("tiny"), causal=True)
    >>> backbone = BertBiLstmBackbone(encoder)
    >>> classifier = BertClassifier(backbone, 2)
    """

    def __init__(self, backbone, **kwargs):
        if not isinstance(backbone, BertBackbone) or isinstance(backbone, BertBiLstmBackbone):
            raise ValueError(
                "`backbone` must be a BertBackbone without a BiLSTM already. "
                f"Received: {type(backbone).__name__}.")
        hidden_size = even_hidden_size(backbone)
        policy = backbone.dtype_policy

        # === Layers ===
        self.backbone = backbone
        self.bilstm = keras.layers.Bidirectional(
            keras.layers.LSTM(hidden_size // 2, return_sequences=True, dtype=policy,
                              name="lstm"),
            merge_mode="concat",  # H/2 + H/2 = H: the task heads keep their width
            dtype=policy,
            name="bilstm",
        )

        # === Functional graph ===
        inputs = sequence_inputs(INPUT_NAMES)
        encoded = backbone(inputs)
        real = keras.ops.cast(inputs["input_mask"], "bool")  # (B, S)
        x = self.bilstm(encoded["sequence_output"], mask=real)  # (B, S, H)
        # Zeros at padding; an op, not a layer, so no Keras mask rides on the
        # output into the task heads' losses (BertBackbone's outputs carry none).
        x = keras.ops.where(real[:, :, None], x, keras.ops.zeros_like(x))  # (B, S, H)
        # The same position as the backbone's pooled output.
        rows = pooled_rows(x, inputs["input_mask"], backbone.causal)
        outputs = {
            "sequence_output": x,
            "pooled_output": backbone.pooler(rows),  # (B, H)
            "encoder_outputs": encoded["encoder_outputs"],
        }
        # BertBackbone.__init__ builds an encoder; this one wraps a built one,
        # so the functional model is initialized past it.
        super(BertBackbone, self).__init__(inputs=inputs, outputs=outputs, **kwargs)
        keep_config(self, policy, "bert_config", backbone.bert_config,
                    {"causal": backbone.causal, **backbone.bert_config.to_dict()})

    @classmethod
    def from_bert_config(cls, config, **kwargs):
        """A new random encoder of this shape (`causal` etc. in kwargs), with a BiLSTM."""
        return cls(BertBackbone.from_bert_config(config, **kwargs))

    def get_config(self):
        return wrapper_config(self)

    @classmethod
    def from_config(cls, config):
        return cls(**with_backbone(config))
