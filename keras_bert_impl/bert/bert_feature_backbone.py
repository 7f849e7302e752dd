"""`BertFeatureBackbone`: frozen BERT features under a trained BiLSTM (Table 7)."""

import keras

from keras_bert_impl.base.backbone import keep_config
from keras_bert_impl.base.backbone import run_blocks
from keras_bert_impl.base.backbone import sequence_inputs
from keras_bert_impl.base.backbone import with_backbone
from keras_bert_impl.base.backbone import wrapper_config
from keras_bert_impl.bert.bert_backbone import INPUT_NAMES
from keras_bert_impl.bert.bert_backbone import BertBackbone
from keras_bert_impl.bert.bert_bilstm_backbone import even_hidden_size
from keras_bert_impl.bert.bert_pooler import BertPooler

# B=batch, S=sequence, H=hidden, K=hidden states concatenated (at most 4)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertFeatureBackbone(BertBackbone):
    """BERT as fixed features, the paper's feature-based approach (Sec. 5.3).

    The wrapped encoder is frozen and runs without dropout; its last four
    hidden states (the embedding output counts as one, so a 2-layer model
    gives its three) are concatenated, the paper's best features on
    CoNLL-2003 (Table 7: 96.1 F1 against 96.4 fine-tuned), and go through a
    randomly initialized two-layer BiLSTM, the paper's task network. Each
    direction has H/2 units, so the output keeps the width H and every task
    head fits unchanged; only the BiLSTM, the pooler and the head train.

    It is a `BertBackbone` to every caller, as `BertBiLstmBackbone`:
    `sequence_output` `(B, S, H)` is the BiLSTM's (zeros at padding),
    `pooled_output` a new pooler on its first position (whose backward LSTM
    state has read the whole input), `encoder_outputs` the frozen encoder's.

    Args:
        backbone: `BertBackbone`. The pretrained encoder (bidirectional).

    Call arguments and returns: as `BertBackbone`'s.

    Example:
    >>> backbone = BertFeatureBackbone(BertBackbone.from_bert_config(preset("tiny")))
    >>> classifier = BertClassifier(backbone, 2)
    """

    def __init__(self, backbone, **kwargs):
        if not isinstance(backbone, BertBackbone) or isinstance(
                backbone, BertFeatureBackbone):
            raise ValueError("`backbone` must be a BertBackbone that is not feature-based "
                             f"already. Received: {type(backbone).__name__}.")
        hidden_size = even_hidden_size(backbone)
        policy = backbone.dtype_policy
        backbone.trainable = False  # feature-based: BERT's weights stay fixed

        # === Layers ===
        self.backbone = backbone
        self.bilstms = [
            keras.layers.Bidirectional(
                keras.layers.LSTM(hidden_size // 2, return_sequences=True, dtype=policy,
                                  name=f"lstm_{i}"),
                merge_mode="concat", dtype=policy, name=f"bilstm_{i}")
            for i in range(2)  # the paper's two-layer BiLSTM
        ]
        # A pooler of its own: the frozen one was trained on BERT's last layer.
        self.feature_pooler = BertPooler(hidden_size, backbone.bert_config.initializer_range,
                                         dtype=policy, name="feature_pooler")

        # === Functional graph ===
        inputs = sequence_inputs(INPUT_NAMES)
        # The backbone's own layers in order, so the embedding output is
        # reachable.
        x = backbone.embeddings(backbone.word_embedding(inputs["input_word_ids"]),
                                inputs["input_type_ids"])  # (B, S, H)
        hidden = [x, *run_blocks(backbone.encoder_layers, x, inputs["input_mask"])]
        features = keras.ops.concatenate(hidden[-4:], axis=-1)  # (B, S, K*H)
        real = keras.ops.cast(inputs["input_mask"], "bool")  # (B, S)
        x = features
        for bilstm in self.bilstms:
            x = bilstm(x, mask=real)  # (B, S, H)
        x = keras.ops.where(real[:, :, None], x, keras.ops.zeros_like(x))  # (B, S, H)
        outputs = {
            "sequence_output": x,
            "pooled_output": self.feature_pooler(x),  # (B, H): the first position
            "encoder_outputs": hidden[1:],
        }
        super(BertBackbone, self).__init__(inputs=inputs, outputs=outputs, **kwargs)
        keep_config(self, policy, "bert_config", backbone.bert_config,
                    {"causal": backbone.causal, **backbone.bert_config.to_dict()})

    def call(self, inputs, training=None, mask=None):
        # Fixed features, as the paper's: no dropout inside BERT, even when
        # the task model trains (the BiLSTM has none either).
        return super().call(inputs, training=False, mask=mask)

    def get_config(self):
        return wrapper_config(self)

    @classmethod
    def from_config(cls, config):
        return cls(**with_backbone(config))
