"""`NamedConfig`: a Keras layer's `get_config` from the names of its
constructor's arguments, which it keeps as attributes of the same names."""


class NamedConfig:
    """Mixin before `keras.layers.Layer`: `get_config` is the base layer's
    config updated with the attributes `config_names`, in that order."""

    config_names = ()

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in self.config_names})
        return config
