"""What the families' `build_backbone` share: the run's precision and the
backbone held by one of our `.keras` files."""

import keras

from keras_bert_impl.checkpoints.keras_files import check_keras_file


def run_dtype(mixed_precision):
    """The backbone's dtype policy: "mixed_bfloat16" with `--mixed_precision`, else None."""
    return "mixed_bfloat16" if mixed_precision else None


def backbone_in_keras_file(path, backbone_class, what):
    """The `backbone_class` instance a `.keras` file holds: the model itself
    or its `backbone`. `SystemExit` naming `--init_checkpoint` for a file
    that is not one of ours, and the file for one with no such backbone
    (`what`: its name in the message, e.g. "GPT backbone")."""
    try:
        check_keras_file(path)
    except ValueError as e:
        raise SystemExit(f"--init_checkpoint: {e}") from None
    model = keras.saving.load_model(path, compile=False)
    backbone = model if isinstance(model, backbone_class) else getattr(model, "backbone", None)
    if not isinstance(backbone, backbone_class):
        raise SystemExit(f"{path} holds a {type(model).__name__}, which has no {what}.")
    return backbone
