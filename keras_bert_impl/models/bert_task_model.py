"""`BertTaskModel`: what every fine-tuning model shares."""

import keras

from keras_bert_impl.models.bert_backbone import INPUT_NAMES
from keras_bert_impl.models.bert_backbone import check_inputs
from keras_bert_impl.models.keras_strategy_fixes import KerasStrategyFixes


def backbone_inputs():
    """The three int32 `(B, S)` inputs, under the names TF Serving clients send."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}


def head_initializer(backbone):
    """Truncated normal with the backbone's `initializer_range`, as the original heads."""
    return keras.initializers.TruncatedNormal(stddev=backbone.bert_config.initializer_range)


class BertTaskModel(KerasStrategyFixes, keras.Model):
    """A backbone plus a small task layer, as a functional Keras model.

    Subclasses build the graph in `__init__` and keep their constructor
    arguments as attributes of the same names (`get_config` returns them).
    The backbone is a nested model, so its weights load from any checkpoint
    format first (`load_hf_checkpoint`, `load_google_checkpoint`).
    """

    # Constructor arguments besides `backbone`, for `get_config`.
    config_names = ()
    # The SavedModel output name of a single-tensor output.
    output_name = "logits"

    def call(self, inputs, training=None, mask=None):
        check_inputs(inputs, self.backbone.bert_config)
        return super().call(inputs, training=training, mask=mask)

    def compile_from_config(self, config):
        # Keras declines (with a warning) when `compile` is overridden; ours
        # only adds defaults, so replaying the saved arguments is right.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "backbone": keras.layers.serialize(self.backbone),
                **{name: getattr(self, name) for name in self.config_names}}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.layers.deserialize(config["backbone"])
        return cls(**config)
