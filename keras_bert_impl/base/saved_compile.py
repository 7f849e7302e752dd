"""`compile_from_saved_config`: every family's models re-compile a loaded
`.keras` file this way."""

import keras


def compile_from_saved_config(model, config):
    """Re-compiles a loaded `.keras` model with its saved compile arguments.

    Keras' own version declines (with a warning) when `compile` is
    overridden; ours only adds defaults, so replaying the arguments is right.
    """
    model.compile(**keras.saving.deserialize_keras_object(config))
    if model.built:
        model.optimizer.build(model.trainable_variables)
