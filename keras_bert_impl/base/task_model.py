"""`TaskModel`: what every family's task models share, in the spirit of
keras-hub's `Task`: the `.keras` round trip (the backbone serialized, then
the model's own `config_names`), re-compiling a loaded file with its saved
arguments, and the fixes of Keras under distribution strategies."""

import keras

from keras_bert_impl.base.backbone import with_backbone
from keras_bert_impl.base.backbone import wrapper_config
from keras_bert_impl.base.saved_compile import compile_from_saved_config
from keras_bert_impl.base.strategy_fixes import KerasStrategyFixes


class TaskModel(KerasStrategyFixes, keras.Model):
    """A functional task model on `self.backbone`; `config_names` are its
    constructor's arguments besides the backbone, kept as attributes."""

    config_names = ()

    def compile_from_config(self, config):
        compile_from_saved_config(self, config)

    def get_config(self):
        return wrapper_config(self, {name: getattr(self, name) for name in self.config_names})

    @classmethod
    def from_config(cls, config):
        return cls(**with_backbone(config))
