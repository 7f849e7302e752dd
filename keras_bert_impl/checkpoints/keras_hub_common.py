"""What every keras-hub preset converter shares (BERT's in `keras_hub_preset`,
XLNet's in `keras_bert_impl.xlnet.xlnet_keras_hub_preset`): the folder's
file names, its `config.json` read and checked, a folder replaced
atomically, and the checks on keras-hub's variables and activations.

A preset is what `keras_hub.models.BertBackbone(...).save_to_preset(folder)`
writes: `config.json` (the serialized backbone), `model.weights.h5`,
`metadata.json`, and with a tokenizer `tokenizer.json` plus
`assets/tokenizer/vocabulary.txt`; a task's `save_to_preset` adds
`task.json` and `task.weights.h5` (its head). keras-hub itself reads and
writes the files (`from_preset`, `save_to_preset`), so the layout is always
its own.
"""

import os
import shutil
import tempfile

import keras
import numpy as np

from keras_bert_impl.base.json_files import read_json_file
from keras_bert_impl.file_modes import as_if_created
from keras_bert_impl.layers.activations import get_activation

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
SHARDED_WEIGHTS_FILE = "model.weights.json"
METADATA_FILE = "metadata.json"
TASK_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = os.path.join("assets", "tokenizer", "vocabulary.txt")

BERT_BACKBONE = "keras_hub>BertBackbone"
XLNET_BACKBONE = "keras_hub>XLNetBackbone"

# Which of our loaders reads a preset of each backbone, for the error that
# names the right one.
LOADERS = {
    BERT_BACKBONE: "keras_bert_impl.checkpoints.load_keras_hub_preset",
    XLNET_BACKBONE: "keras_bert_impl.xlnet.load_keras_hub_xlnet_preset",
}

# The sizes every keras-hub BERT and XLNet backbone config has (no default).
SIZE_KEYS = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim")

# Files and folders `save_to_preset` of a backbone, tokenizer, preprocessor
# or task writes; an existing folder holding anything else is not replaced.
_PRESET_FILES = frozenset((
    CONFIG_FILE, WEIGHTS_FILE, SHARDED_WEIGHTS_FILE, METADATA_FILE, TASK_FILE,
    TASK_WEIGHTS_FILE, TOKENIZER_FILE, "preprocessor.json", "README.md"))


def keras_hub_module():
    """The `keras_hub` package, imported on a converter's first call."""
    import keras_hub  # lazy: seconds to import, and only the preset converters need it

    return keras_hub


def _contents(folder):
    """What a folder holds, for an error: "a, b/, c" (folders end in "/")."""
    names = sorted(os.listdir(folder))
    if not names:
        return "nothing (it is empty)"
    shown = [n + "/" if os.path.isdir(os.path.join(folder, n)) else n for n in names[:8]]
    return ", ".join(shown) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def read_preset_config(folder, expected, known_keys):
    """The parsed `config.json` of a keras-hub preset of class `expected`.

    Raises `ValueError` naming the folder and what it holds for a missing
    folder, a folder without `config.json` or weights, a Hugging Face
    folder, or a preset of another backbone (naming our loader for it);
    and naming the keys when the config has settings outside `known_keys`
    or lacks a size (checked before keras-hub sees them: it would fail on
    them less clearly, or a later keras-hub would build what ours cannot).

    Args:
        folder: str. The preset folder.
        expected: str. keras-hub's registered name, e.g.
            "keras_hub>BertBackbone".
        known_keys: the config keys the converter maps.
    """
    if not os.path.isdir(folder):
        what = "is a file" if os.path.exists(folder) else "does not exist"
        raise ValueError(f"{folder} {what}; expected a keras-hub preset folder "
                         f"({CONFIG_FILE}, {WEIGHTS_FILE}, ...).")
    path = os.path.join(folder, CONFIG_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{folder} is not a keras-hub preset: it has no {CONFIG_FILE} "
                         f"(it holds {_contents(folder)}).")
    values = read_json_file(path)
    if not isinstance(values, dict):
        raise ValueError(f"{path} holds no JSON object, so {folder} is not a keras-hub preset.")
    if "registered_name" not in values:
        if "model_type" in values:
            raise ValueError(
                f"{folder} is a Hugging Face model folder ({CONFIG_FILE} has model_type="
                f"{values['model_type']!r}), not a keras-hub preset; read it with "
                "keras_bert_impl.checkpoints.load_hf_checkpoint (BERT) or "
                "keras_bert_impl.xlnet.load_xlnet_checkpoint (XLNet).")
        raise ValueError(f"{folder} is not a keras-hub preset: its {CONFIG_FILE} has no "
                         "`registered_name` (keras-hub writes the serialized backbone there).")
    name = values["registered_name"]
    if name != expected:
        loader = LOADERS.get(name)
        hint = (f"read it with {loader}" if loader else
                f"only {', '.join(sorted(LOADERS))} presets are read")
        raise ValueError(
            f"{folder} holds a keras-hub {name} preset ({CONFIG_FILE} registered_name="
            f"{name!r}), not {expected}; {hint}.")
    if not isinstance(values.get("config"), dict):
        raise ValueError(f"{path} has no `config` object, so {folder} is not a keras-hub preset.")
    short = name.split(">")[-1]
    unknown = sorted(set(values["config"]) - set(known_keys))
    if unknown:
        raise ValueError(f"{path} has {short} settings ours cannot represent: {unknown}.")
    missing = [key for key in SIZE_KEYS if key not in values["config"]]
    if missing:
        raise ValueError(f"{path} lacks the {short} sizes {missing}.")
    weights = (WEIGHTS_FILE, SHARDED_WEIGHTS_FILE)  # one file, or the index of shards
    if not any(os.path.isfile(os.path.join(folder, f)) for f in weights):
        raise ValueError(f"{folder} has a {CONFIG_FILE} but no {WEIGHTS_FILE} (it holds "
                         f"{_contents(folder)}): a keras-hub preset without its weights.")
    return values


def activation_name(function, where, names=("gelu", "gelu_tanh", "relu")):
    """Which of our activations `function` computes, by its values.

    keras-hub spells activations as functions, strings or its own helpers
    (`gelu_approximate`); comparing values on [-4, 4] names them whatever
    the spelling. Exact GELU and the tanh form differ by up to 1e-3 there,
    far above float32 rounding. `ValueError` names `where` when none fits.
    """
    x = np.linspace(-4.0, 4.0, 33, dtype=np.float32)
    got = keras.ops.convert_to_numpy(function(keras.ops.convert_to_tensor(x)))
    for name in names:
        want = keras.ops.convert_to_numpy(get_activation(name)(keras.ops.convert_to_tensor(x)))
        if np.allclose(got, want, rtol=0, atol=1e-6):
            return name
    raise ValueError(f"{where} computes an activation ours has not (ours: {list(names)}).")


def check_covered(model, variables, source):
    """`ValueError` if `model` has a variable the map leaves out.

    A later keras-hub could add one (a bias, a second table); left out, it
    would keep its random values and the outputs would silently differ.
    """
    mapped = {id(v) for v in variables}
    left = [v.path for v in model.weights if id(v) not in mapped]
    if left:
        raise ValueError(
            f"{source}: keras-hub's {type(model).__name__} holds variable {left[0]!r} "
            f"({len(left)} in all) that has no place in our model; this keras-hub "
            "version's layers differ from the ones this converter maps.")


def assign_checked(variable, value, name, source):
    """`variable.assign(value)` after checking the size (reshaped to fit)."""
    value = np.asarray(value, dtype=np.float32)
    if value.size != int(np.prod(variable.shape)):
        raise ValueError(f"{source}: {name!r} has shape {value.shape}; keras-hub's "
                         f"{variable.path} needs {tuple(variable.shape)}.")
    variable.assign(value.reshape(tuple(variable.shape)))


# === Writing ===


def _preset_parts(folder):
    """Entries of `folder` that are not a keras-hub preset's own files."""
    names = os.listdir(folder)
    extra = []
    for name in names:
        path = os.path.join(folder, name)
        if name == "assets" and os.path.isdir(path):
            # keras-hub writes assets/<x>/ beside <x>.json (tokenizer, ...).
            extra += [f"assets/{sub}" for sub in os.listdir(path)
                      if f"{sub}.json" not in names]
        elif name not in _PRESET_FILES and not (
                name.startswith("model") and name.endswith(".weights.h5")):  # shards
            extra.append(name + ("/" if os.path.isdir(path) else ""))
    return sorted(extra)


def is_keras_hub_preset(path):
    """Whether `path` is a folder whose `config.json` is a serialized
    keras-hub object (any architecture): what `save_to_preset` writes."""
    config = os.path.join(path, CONFIG_FILE)
    if not (os.path.isdir(path) and os.path.isfile(config)):
        return False
    try:
        values = read_json_file(config)
    except (ValueError, OSError):
        return False
    return isinstance(values, dict) and str(values.get("registered_name", "")).startswith(
        "keras_hub>")


def check_replaceable(folder):
    """`ValueError` unless `folder` is absent, empty or a keras-hub preset.

    An existing preset is replaced as a whole; a folder holding anything
    else (another format, a preset plus files of the user's) is refused,
    naming what it holds, so nothing the writer did not write is deleted.
    """
    if not os.path.lexists(folder):
        return
    if not os.path.isdir(folder) or os.path.islink(folder):
        raise ValueError(f"{folder} exists and is not a folder; refusing to replace it with a "
                         "keras-hub preset.")
    if not os.listdir(folder):
        return
    if not is_keras_hub_preset(folder):
        raise ValueError(f"{folder} exists and is not a keras-hub preset (it holds "
                         f"{_contents(folder)}); refusing to replace it. Pick another folder.")
    extra = _preset_parts(folder)
    if extra:
        raise ValueError(f"{folder} is a keras-hub preset but also holds {', '.join(extra)}, "
                         "which a preset does not; refusing to replace it.")


def write_preset_atomic(folder, write):
    """Runs `write(tmp)` into a fresh folder beside `folder`, then swaps it in.

    The new preset appears whole or not at all: a crash while writing
    leaves `folder` as it was (and a `.<name>.tmp-*` folder beside it, this
    function's own). An existing preset is moved aside, the new one renamed
    into place, then the old one deleted (put back if the rename fails).
    `check_replaceable` runs before writing and again just before the swap.
    """
    folder = os.path.abspath(folder)
    check_replaceable(folder)
    parent, name = os.path.split(folder)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{name}.tmp-")
    try:
        write(tmp)
        as_if_created(tmp)  # mkdtemp's 0700 would hide it from other users
        check_replaceable(folder)
        trash = None
        if os.path.lexists(folder):
            # Moved into a fresh folder: a unique name, and one rename.
            trash = tempfile.mkdtemp(dir=parent, prefix=f".{name}.old-")
            os.rename(folder, os.path.join(trash, name))
        try:
            os.rename(tmp, folder)
        except BaseException:
            if trash is not None:
                os.rename(os.path.join(trash, name), folder)
                os.rmdir(trash)
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if trash is not None:
        shutil.rmtree(trash)
