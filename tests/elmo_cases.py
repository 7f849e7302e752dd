"""The ELMo tests' shared cases: bilm-tf's vendored test model (its
options and weights, `needs_fixture`), the `odd_config` fixture, random
weights and character ids."""

import os

import numpy as np
import pytest

from keras_bert_impl.elmo import ElmoConfig

# bilm-tf's tests/fixtures/model: a trained biLM (LSTM 64 / projection 16)
# and the embeddings bilm-tf computes for it (see the fixture's README).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "data", "bilm_tf")  # vendored: see its README.md
OPTIONS = os.path.join(FIXTURE, "options.json")
WEIGHTS = os.path.join(FIXTURE, "lm_weights.hdf5")


@pytest.fixture
def bilm_fixture():
    """bilm-tf's test data, vendored in tests/data/bilm_tf."""
    assert os.path.isfile(os.path.join(FIXTURE, "lm_weights.hdf5")), FIXTURE
    return FIXTURE


needs_fixture = pytest.mark.usefixtures("bilm_fixture")


@pytest.fixture(name="odd_config")
def odd_elmo_config():
    """Odd sizes so that swapped axes fail loudly: F=15 filters, P=6,
    U=11, E=5, C=9."""
    return ElmoConfig(filters=((1, 3), (2, 5), (3, 7)), n_highway=1, projection_dim=6,
                      lstm_dim=11, n_layers=2, char_embedding_dim=5,
                      max_characters_per_token=9, cell_clip=3.0, proj_clip=3.0,
                      use_skip_connections=True, dropout=0.1)


def randomize(model, seed=0, stddev=0.3):
    """Every trainable weight N(0, stddev)."""
    rng = np.random.default_rng(seed)
    for w in model.trainable_weights:
        w.assign(rng.normal(0.0, stddev, w.shape).astype("float32"))
    return model


def random_char_ids(batch, tokens, chars, seed=0, lengths=None):
    """Random ids 1..261 with whole padding tokens after each row's length."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 262, (batch, tokens, chars)).astype("int32")
    for row, n in enumerate(lengths or []):
        ids[row, n:] = 0
    return ids
