"""bilm-tf checkpoints: `options.json` + the `dump_weights` HDF5 file.

The HDF5 layout is bilm-tf's `bilm.training.dump_weights` (the files of
the published ELMo models and of bilm-tf's test fixture):

- `char_embed` `(261, E)`: the training table. Inference puts a zero row
  for the padding id 0 in front (bilm-tf's `_pretrained_initializer`), so
  our table is `(262, E)`; row 0 is not written back.
- `CNN/W_cnn_{i}` `(1, width, E, n)`, `CNN/b_cnn_{i}` `(n,)`: our `Conv2D`
  kernels, as they are.
- `CNN_high_{i}/{W,b}_{carry,transform}`: the `Highway` layers' `carry`
  and `transform` `Dense` layers.
- `CNN_proj/{W,b}_proj`, when the filters' total F differs from P.
- `RNN_{d}/RNN/MultiRNNCell/Cell{i}/LSTMCell/{W_0, B, W_P_0}`, d = 0
  forward, 1 backward: TF1 `LSTMCell` weights (gates i, j, f, o; forget
  bias 1.0 added at run time; `W_P_0` only when P < U), which is
  `LstmProjectionCell`'s own layout, so they are copied unchanged.

No softmax (bilm-tf does not dump it). Loading is strict: a missing,
unexpected or misshaped dataset is a `ValueError` naming it and the file.
"""

import os
import tempfile

import h5py
import keras
import numpy as np

from keras_bert_impl.elmo.elmo_backbone import ElmoBackbone
from keras_bert_impl.elmo.elmo_config import ElmoConfig
from keras_bert_impl.file_modes import as_if_created

# V=262 characters, E=char embedding, F=filters, P=projection, U=LSTM units,
# G=4U gates

CHAR_TABLE = "char_embed"


def elmo_hdf5_variables(backbone):
    """`{bilm-tf HDF5 name: Keras variable}` of every weight of an `ElmoBackbone`.

    `char_embed` maps to the full `(262, E)` table; the file holds rows 1...
    The stateful mode's state variables are not weights of the file.
    """
    encoder = backbone.character_encoder
    variables = {CHAR_TABLE: encoder.char_embedding.embeddings}  # (V, E)
    for i, conv in enumerate(encoder.convolutions):
        variables[f"CNN/W_cnn_{i}"] = conv.kernel  # (1, width, E, n)
        variables[f"CNN/b_cnn_{i}"] = conv.bias  # (n,)
    for i, highway in enumerate(encoder.highways):
        for part, dense in (("carry", highway.carry), ("transform", highway.transform)):
            variables[f"CNN_high_{i}/W_{part}"] = dense.kernel  # (F, F)
            variables[f"CNN_high_{i}/b_{part}"] = dense.bias  # (F,)
    if encoder.projection is not None:
        variables["CNN_proj/W_proj"] = encoder.projection.kernel  # (F, P)
        variables["CNN_proj/b_proj"] = encoder.projection.bias  # (P,)
    for d, stack in enumerate((backbone.forward_lstm, backbone.backward_lstm)):
        for i, lstm in enumerate(stack.lstms):
            root = f"RNN_{d}/RNN/MultiRNNCell/Cell{i}/LSTMCell/"
            cell = lstm.cell
            variables[root + "W_0"] = cell.kernel  # (P + H, G), gates i, j, f, o
            variables[root + "B"] = cell.bias  # (G,)
            if cell.projection_kernel is not None:
                variables[root + "W_P_0"] = cell.projection_kernel  # (U, P)
    return variables


def _file_shape(name, variable):
    shape = tuple(variable.shape)
    return (shape[0] - 1, *shape[1:]) if name == CHAR_TABLE else shape


def read_elmo_hdf5(path):
    """`{dataset name: float32 array}` of every dataset in a bilm-tf HDF5 file."""
    if not os.path.isfile(path):
        raise ValueError(f"ELMo weight file {path} does not exist.")
    tensors = {}
    try:
        with h5py.File(path, "r") as f:
            def visit(name, item):
                if isinstance(item, h5py.Dataset):
                    tensors[name] = np.asarray(item[...], np.float32)
            f.visititems(visit)
    except OSError as e:
        raise ValueError(f"{path} is not a readable HDF5 file: {e}") from e
    return tensors


def load_elmo_checkpoint(options_file, weight_file, max_batch_size=None, dtype=None):
    """Builds the `ElmoBackbone` a bilm-tf `options.json` + weight file hold.

    Args:
        options_file: str. bilm-tf's `options.json` (`n_characters` 262).
        weight_file: str. The `dump_weights` HDF5 file.
        max_batch_size: int or None. Stateful rows (see `ElmoBackbone`).
        dtype: optional dtype policy for the built model.

    Returns:
        `ElmoBackbone` with the file's weights.

    Example:
    >>> backbone = load_elmo_checkpoint("options.json", "lm_weights.hdf5")
    """
    config = ElmoConfig.from_options_file(options_file)
    tensors = read_elmo_hdf5(weight_file)
    backbone = ElmoBackbone.from_config_object(config, max_batch_size=max_batch_size, dtype=dtype)
    variables = elmo_hdf5_variables(backbone)
    unexpected = sorted(set(tensors) - set(variables))
    if unexpected:
        raise ValueError(
            f"{weight_file} holds unexpected dataset {unexpected[0]!r} ({len(unexpected)} in "
            f"all: {unexpected[:5]}): the model {options_file} describes has no place for it.")
    missing = [name for name in variables if name not in tensors]
    if missing:
        raise ValueError(
            f"{weight_file} lacks dataset {missing[0]!r} ({len(missing)} missing in all: "
            f"{missing[:5]}{' ...' if len(missing) > 5 else ''}).")
    for name, variable in variables.items():
        expected = _file_shape(name, variable)
        if tensors[name].shape != expected:
            raise ValueError(
                f"{weight_file}: dataset {name!r} has shape {tensors[name].shape}, but the model "
                f"{options_file} describes needs {expected}.")
    for name, variable in variables.items():
        value = tensors[name]
        if name == CHAR_TABLE:  # the padding id 0 gets a zero row, as bilm-tf
            value = np.concatenate([np.zeros((1, value.shape[1]), np.float32), value])
        variable.assign(value)
    return backbone


def save_elmo_checkpoint(backbone, options_file, weight_file, n_tokens_vocab=None):
    """Writes an `ElmoBackbone` as bilm-tf's `options.json` + HDF5 weights.

    Each file is written to a temp file beside it and renamed into place,
    so a crash never leaves a torn file. Row 0 of the character table (the
    padding id) is not written, as bilm-tf's files have no place for it.

    Args:
        backbone: `ElmoBackbone`.
        options_file: str. Path of the `options.json` to write.
        weight_file: str. Path of the HDF5 file to write.
        n_tokens_vocab: int or None. Written into `options.json` for an
            LM head's softmax.

    Example:
    >>> save_elmo_checkpoint(backbone, "/tmp/elmo/options.json", "/tmp/elmo/weights.hdf5")
    """
    config = backbone.elmo_config.replace(n_tokens_vocab=n_tokens_vocab)
    directory = os.path.dirname(os.path.abspath(weight_file))
    os.makedirs(directory, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(options_file)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".hdf5")
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            for name, variable in elmo_hdf5_variables(backbone).items():
                value = np.asarray(keras.ops.convert_to_numpy(variable), np.float32)
                if name == CHAR_TABLE:
                    value = value[1:]
                f.create_dataset(name, data=value)
        as_if_created(tmp)
        os.replace(tmp, weight_file)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    config.to_options_file(options_file)
