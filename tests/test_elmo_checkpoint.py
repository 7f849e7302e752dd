"""ELMo's configuration and bilm-tf's checkpoint files: parameter counts,
the options file's round trip and refusals, the weights file's round trip
and the strict loader."""

import json
import os

import h5py
import keras
import numpy as np
import pytest
from elmo_cases import OPTIONS
from elmo_cases import WEIGHTS
from elmo_cases import bilm_fixture  # noqa: F401 (fixture)
from elmo_cases import needs_fixture
from elmo_cases import odd_elmo_config  # noqa: F401 (the `odd_config` fixture)
from elmo_cases import random_char_ids
from elmo_cases import randomize

from keras_bert_impl.elmo import ElmoBackbone
from keras_bert_impl.elmo import ElmoConfig
from keras_bert_impl.elmo import batch_char_ids
from keras_bert_impl.elmo import elmo_num_parameters
from keras_bert_impl.elmo import elmo_preset
from keras_bert_impl.elmo import load_elmo_checkpoint
from keras_bert_impl.elmo import save_elmo_checkpoint
from keras_bert_impl.elmo.elmo_checkpoint import elmo_hdf5_variables


def test_published_parameter_counts():
    assert elmo_num_parameters(elmo_preset("elmo_small")) == 13_593_312
    assert elmo_num_parameters(elmo_preset("elmo_medium")) == 28_027_744
    assert elmo_num_parameters(elmo_preset("elmo_original")) == 93_600_864


@pytest.mark.parametrize("changes", [
    {},
    {"n_highway": 0, "use_skip_connections": False},
    {"projection_dim": 11},  # P == U: no LSTM projection
    {"filters": ((1, 2), (3, 4)), "lstm_dim": 6},  # F == P: no CNN projection
])


def test_parameter_count_matches_model(odd_config, changes):
    config = odd_config.replace(**changes)
    backbone = ElmoBackbone.from_config_object(config)
    assert backbone.count_params() == elmo_num_parameters(config)


def test_parameter_count_matches_elmo_small():
    backbone = ElmoBackbone.from_config_object(elmo_preset("elmo_small"))
    assert backbone.count_params() == 13_593_312
    assert elmo_num_parameters(elmo_preset("elmo_tiny")) == ElmoBackbone.from_config_object(
        elmo_preset("elmo_tiny")).count_params()


@needs_fixture
def test_options_round_trip(tmp_path):
    config = ElmoConfig.from_options_file(OPTIONS)
    assert config.filters == ((1, 4), (2, 8), (3, 16), (4, 32), (5, 64))
    assert (config.lstm_dim, config.projection_dim, config.n_highway) == (64, 16, 2)
    assert config.use_skip_connections is False and config.cell_clip == 3.0
    with open(OPTIONS) as f:
        original = json.load(f)
    options = config.to_options()
    assert options["char_cnn"] == original["char_cnn"]
    assert options["lstm"] == original["lstm"]
    config.replace(n_tokens_vocab=793471).to_options_file(str(tmp_path / "options.json"))
    again = ElmoConfig.from_options_file(str(tmp_path / "options.json"))
    assert again == config.replace(n_tokens_vocab=793471)
    # bilm-tf's training options load too (training-only keys dropped).
    training = dict(original, batch_size=128, unroll_steps=20, bidirectional=True,
                    n_negative_samples_batch=8192, n_tokens_vocab=99, dropout=0.1)
    assert ElmoConfig.from_options(training).n_tokens_vocab == 99


@pytest.mark.parametrize("edit, message", [
    (lambda o: o.update(softmax=1), "Unknown ELMo option keys.*softmax"),
    (lambda o: o["lstm"].update(peepholes=True), "Unknown `lstm` keys.*peepholes"),
    (lambda o: o["char_cnn"].update(n_characters=261), "n_characters=261"),
    (lambda o: o["char_cnn"].update(activation="gelu"), "activation='gelu'"),
    (lambda o: o["char_cnn"].update(max_characters_per_token=4), "widest filter"),
    (lambda o: o["lstm"].update(dim=32), r"`projection_dim` \(64\) must be <= `lstm_dim` \(32\)"),
    (lambda o: o["lstm"].update(projection_dim=300, dim=300), "256 filters are fewer"),
    (lambda o: o["lstm"].update(cell_clip=-1), "cell_clip=-1"),
    (lambda o: o.pop("char_cnn"), "no `char_cnn`"),
])


def test_options_errors(edit, message):
    options = elmo_preset("elmo_tiny").to_options()
    edit(options)
    with pytest.raises(ValueError, match=message):
        ElmoConfig.from_options(options)


@needs_fixture
def test_checkpoint_round_trip(tmp_path):
    backbone = load_elmo_checkpoint(OPTIONS, WEIGHTS)
    assert not np.any(np.asarray(backbone.character_encoder.char_embedding.embeddings)[0])
    options, weights = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    save_elmo_checkpoint(backbone, options, weights)
    with h5py.File(WEIGHTS, "r") as a, h5py.File(weights, "r") as b:
        names = []
        a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        assert set(names) == set(elmo_hdf5_variables(backbone))
        for name in names:
            np.testing.assert_array_equal(a[name][...], b[name][...])
    reloaded = load_elmo_checkpoint(options, weights)
    ids = batch_char_ids([["A", "short", "one", "."], ["Two", "."]])
    for x, y in zip(keras.tree.flatten(backbone(ids)), keras.tree.flatten(reloaded(ids))):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert sorted(os.listdir(tmp_path)) == ["options.json", "weights.hdf5"]  # no temp files


def test_checkpoint_round_trip_without_projections(odd_config, tmp_path):
    """P == U (no W_P_0) and F == P (no CNN_proj): nothing expected, nothing written."""
    config = odd_config.replace(filters=((1, 2), (3, 4)), lstm_dim=6, n_highway=0)
    backbone = randomize(ElmoBackbone.from_config_object(config))
    options, weights = str(tmp_path / "options.json"), str(tmp_path / "weights.hdf5")
    save_elmo_checkpoint(backbone, options, weights, n_tokens_vocab=99)
    with h5py.File(weights, "r") as f:
        assert "CNN_proj" not in f and "W_P_0" not in f["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell"]
    assert ElmoConfig.from_options_file(options).n_tokens_vocab == 99
    reloaded = load_elmo_checkpoint(options, weights)
    ids = random_char_ids(3, 7, 9, lengths=[3])
    np.testing.assert_array_equal(np.asarray(backbone(ids)["lstm_outputs"][-1]),
                                  np.asarray(reloaded(ids)["lstm_outputs"][-1]))


def _copy_weights(tmp_path, edit):
    path = str(tmp_path / "broken.hdf5")
    with h5py.File(WEIGHTS, "r") as src, h5py.File(path, "w") as dst:
        def copy(name, item):  # returns None: visititems stops at any other value
            if isinstance(item, h5py.Dataset):
                dst.create_dataset(name, data=item[...])
        src.visititems(copy)
        edit(dst)
    return path


@needs_fixture
@pytest.mark.parametrize("edit, message", [
    (lambda f: f.__delitem__("CNN_high_1/b_carry"), "lacks dataset 'CNN_high_1/b_carry'"),
    (lambda f: (f.__delitem__("RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"),
                f.create_dataset("RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_0",
                                 data=np.zeros((33, 256), "float32"))),
     r"'RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' has shape \(33, 256\).*\(32, 256\)"),
    (lambda f: (f.__delitem__("char_embed"),
                f.create_dataset("char_embed", data=np.zeros((262, 4), "float32"))),
     r"'char_embed' has shape \(262, 4\).*\(261, 4\)"),
    (lambda f: f.create_dataset("softmax/W", data=np.zeros((3, 16), "float32")),
     "unexpected dataset 'softmax/W'"),
])


def test_checkpoint_strict(tmp_path, edit, message):
    path = _copy_weights(tmp_path, edit)
    with pytest.raises(ValueError, match=message) as error:
        load_elmo_checkpoint(OPTIONS, path)
    assert "broken.hdf5" in str(error.value)
    with pytest.raises(ValueError, match="does not exist"):
        load_elmo_checkpoint(OPTIONS, str(tmp_path / "missing.hdf5"))
