"""What every family's SavedModel export shares: the atomic save of a
`tf.Module` holding only its variables, and the class labels of a
classifier's outputs."""

import os
import tempfile

import keras
import tensorflow as tf

from keras_bert_impl.base.classifier_defaults import ClassifierDefaults
from keras_bert_impl.file_modes import as_if_created


def with_labels(module, model, labels):
    """Keeps `labels` in `module` (as `class_labels`) for `label_outputs`; checks
    that `model` is a classifier with one logit per label. None: no labels."""
    if labels is None:
        return
    labels = [str(label) for label in labels]
    classes = getattr(model, "num_classes", None)
    if not isinstance(model, ClassifierDefaults) or classes != len(labels) or classes < 2:
        raise ValueError(
            f"`labels` name the classes of a classifier: {type(model).__name__} has "
            f"num_classes={classes}, received {len(labels)} labels.")
    module.class_labels = tf.Variable(labels, trainable=False, name="class_labels")


def label_outputs(module, outputs):
    """`outputs` plus `probabilities` (softmax of `logits`, float32) and `label`
    (the argmax's string) when `module` holds `class_labels` (`with_labels`)."""
    labels = getattr(module, "class_labels", None)
    if labels is None or "logits" not in outputs:
        return outputs
    logits = tf.cast(outputs["logits"], tf.float32)  # (B, C)
    return {**outputs, "probabilities": tf.nn.softmax(logits, axis=-1),
            "label": tf.gather(labels, tf.argmax(logits, axis=-1))}  # (B,) strings


def saved_object(module):
    """What a SavedModel of `module` keeps: its public attributes, with every
    Keras layer or model among them replaced by its variables.

    The signatures call the Keras objects (they are traced from `module`'s
    methods); the SavedModel needs only the variables they read. Tracked
    as Keras objects, `tf.saved_model.save` walks every attribute of every
    layer (`dir` and `getattr`, properties that walk sublayers included):
    about 1.4 s of a 2-layer XLNet's 3 s save, measured. Tokenizers and
    `class_labels` stay as they are (`loaded.class_labels`).

    The variables are kept as the `tf.Variable`s under Keras' (Keras' own
    `ExportArchive` also saves plain `tf.Variable`s): a Keras 3 variable
    saved itself exports as a second resource beside the one the signatures
    read, and loaders that restore the graph's variables by name (TF
    Serving's C++ loader, or `tf.compat.v1.saved_model.loader.load`) fill
    only that copy, so every request failed with `Could not find variable`.
    """
    saved = tf.Module()
    variables = {}
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if isinstance(value, keras.layers.Layer):
            variables.update((id(v), _tf_variable(v)) for v in value.variables)
        elif isinstance(value, tf.Module | tf.Variable):
            setattr(saved, name, value)
    saved.keras_variables = list(variables.values())
    return saved


def _tf_variable(variable):
    """The `tf.Variable` holding a Keras variable's value."""
    value = variable.value if isinstance(variable, keras.Variable) else variable
    if not isinstance(value, tf.Variable):
        raise TypeError(f"{variable.path}: expected a tf.Variable under the Keras "
                        f"variable; got {type(value).__name__}")
    return value


def save_module_atomic(module, export_dir, signatures):
    """`tf.saved_model.save` of `saved_object(module)` into a folder beside
    `export_dir`, then a rename: an existing export is replaced only once
    the new one is whole."""
    export_dir = os.path.abspath(export_dir)
    parent = os.path.dirname(export_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".tmp-{os.path.basename(export_dir)}-", dir=parent)
    as_if_created(tmp)
    tf.saved_model.save(saved_object(module), tmp, signatures=signatures)
    if os.path.exists(export_dir):
        old = tempfile.mkdtemp(prefix=".old-", dir=parent)
        os.replace(export_dir, os.path.join(old, "export"))
        os.replace(tmp, export_dir)
        tf.io.gfile.rmtree(old)
    else:
        os.replace(tmp, export_dir)
    return export_dir
