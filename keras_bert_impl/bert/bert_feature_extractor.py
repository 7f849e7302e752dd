"""`BertFeatureExtractor`: frozen BERT features (the paper's Table 7)."""

import keras

from keras_bert_impl.bert.bert_task_model import BertTaskModel
from keras_bert_impl.bert.bert_task_model import backbone_inputs
from keras_bert_impl.layers.scalar_mix import ScalarMix

# B=batch, S=sequence, H=hidden, L=layers

# The paper's Table 7 rows (feature-based NER), by name.
FEATURES = (
    "embeddings",  # the embedding output (word + position + type, LayerNorm)
    "second_to_last",  # hidden layer L-1
    "last",  # hidden layer L
    "sum_last_four",  # sum of the last four hidden layers
    "concat_last_four",  # concatenation of the last four, (B, S, 4H)
    "weighted_sum_all",  # learned softmax weights and a scale over all L + 1 (ELMo)
)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertFeatureExtractor(BertTaskModel):
    """Contextual token features from a frozen backbone (paper Sec. 5.3).

    The backbone's weights do not train (`backbone.trainable = False`) and
    its dropout is off; only a `weighted_sum_all` mix has weights of its own
    (a `ScalarMix` over the embedding output and all L blocks, as ELMo mixes
    its layer 0 too). Put any
    task layer on top (the paper used a BiLSTM for NER).

    Args:
        backbone: `BertBackbone`. Frozen by this model.
        features: str. One of `FEATURES`.

    Call arguments:
        inputs: dict of int32 `(B, S)` `input_word_ids`, `input_mask`,
            `input_type_ids`.

    Returns:
        `(B, S, H)` features (`(B, S, 4H)` for "concat_last_four").

    Example:
    >>> extractor = BertFeatureExtractor(backbone, "concat_last_four")
    >>> features = extractor(inputs)  # (B, S, 4H), no gradient to BERT
    """

    config_names = ("features",)
    output_name = "features"

    def __init__(self, backbone, features="concat_last_four", **kwargs):
        if features not in FEATURES:
            raise ValueError(f"Unknown `features` {features!r}. Choose one of {list(FEATURES)}.")
        layers_needed = 4 if "four" in features else 2 if features == "second_to_last" else 1
        if backbone.bert_config.num_hidden_layers < layers_needed:
            raise ValueError(
                f"`features={features!r}` needs {layers_needed} hidden layers; the backbone "
                f"has {backbone.bert_config.num_hidden_layers}.")
        # === Layers ===
        backbone.trainable = False  # feature-based: BERT's weights stay fixed
        self.backbone = backbone
        num_hidden = backbone.bert_config.num_hidden_layers
        self.scalar_mix = (ScalarMix(num_hidden + 1, name="scalar_mix")
                           if features == "weighted_sum_all" else None)
        # === Functional graph ===
        # The backbone's own layers, called in order, so that the embedding
        # output (not a backbone output) is reachable too.
        inputs = backbone_inputs()
        x = backbone.embeddings(
            backbone.word_embedding(inputs["input_word_ids"]), inputs["input_type_ids"]
        )  # (B, S, H)
        hidden = [x]  # L + 1 tensors: embeddings, then every block
        for layer in backbone.encoder_layers:
            x = layer(x, inputs["input_mask"])
            hidden.append(x)
        if features == "embeddings":
            out = hidden[0]
        elif features == "second_to_last":
            out = hidden[-2]
        elif features == "last":
            out = hidden[-1]
        elif features == "sum_last_four":
            out = keras.ops.sum(keras.ops.stack(hidden[-4:], axis=0), axis=0)
        elif features == "concat_last_four":
            out = keras.ops.concatenate(hidden[-4:], axis=-1)  # (B, S, 4H)
        else:
            out = self.scalar_mix(hidden)
        super().__init__(inputs=inputs, outputs=out, **kwargs)
        # === Config ===
        self.features = features

    def call(self, inputs, training=None, mask=None):
        # Fixed features, as the paper's: no dropout inside BERT, even when
        # the model on top trains (Keras passes the outer `training` down).
        return super().call(inputs, training=False, mask=mask)
