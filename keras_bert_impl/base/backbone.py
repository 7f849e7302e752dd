"""What every family's backbone shares, in the spirit of keras-hub's
`Backbone`: the dtype policy, the `(B, S)` integer inputs, a stack of
blocks run in order, and the config a functional backbone keeps and saves."""

import keras


def dtype_policy_of(dtype):
    """The `keras.DTypePolicy` of a backbone's `dtype` argument (None: Keras' global one)."""
    return keras.dtype_policies.get(dtype) if dtype else keras.config.dtype_policy()


def sequence_inputs(names):
    """`{name: keras.Input}`: one int32 `(B, S)` input per name."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in names}


def run_blocks(blocks, x, mask):
    """Each block's output `(B, S, H)` in order, every block reading the
    previous one's (the first reads `x`) under `mask`."""
    outputs = []
    for block in blocks:
        x = block(x, mask)  # (B, S, H)
        outputs.append(x)
    return outputs


def keep_config(backbone, policy, config_attribute, config, values):
    """After the functional `Model.__init__` (which drops `dtype`): the
    policy, the config object as `config_attribute` and each of `values`
    (`{argument: value}`) as an attribute of that name."""
    backbone.dtype_policy = policy
    setattr(backbone, config_attribute, config)
    for key, value in values.items():
        setattr(backbone, key, value)


def backbone_config(backbone, values):
    """A backbone's `get_config`: its name, trainable flag and dtype policy's
    name, then `values` (its constructor's arguments)."""
    return {"name": backbone.name, "trainable": backbone.trainable,
            "dtype": backbone.dtype_policy.name, **values}


def wrapper_config(model, values=()):
    """`get_config` of a model built on `model.backbone`: its name, trainable
    flag and serialized backbone, then `values` (`{argument: value}`)."""
    return {"name": model.name, "trainable": model.trainable,
            "backbone": keras.layers.serialize(model.backbone), **dict(values)}


def with_backbone(config):
    """A copy of a `wrapper_config` whose backbone is deserialized again."""
    config = dict(config)
    config["backbone"] = keras.layers.deserialize(config["backbone"])
    return config


def as_backbone(backbone):
    """`backbone`, or the layer it serializes (a `keras.layers.serialize` dict)."""
    return keras.layers.deserialize(backbone) if isinstance(backbone, dict) else backbone
