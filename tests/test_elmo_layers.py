"""ELMo's layers against references: the LSTM with projection (TF1's
LSTMCell), highway, the character encoder, padded reversal, and ScalarMix
(bilm-tf's weight_layers)."""

import keras
import numpy as np
import pytest
from elmo_cases import random_char_ids
from elmo_cases import randomize
from helpers import assert_config_round_trip

from keras_bert_impl.elmo import CharacterEncoder
from keras_bert_impl.elmo import Highway
from keras_bert_impl.elmo import LstmProjectionCell
from keras_bert_impl.elmo import tf1_lstm_weights_from_keras
from keras_bert_impl.elmo.elmo_lstm_stack import reverse_padded
from keras_bert_impl.layers.scalar_mix import ScalarMix


def test_lstmp_without_projection_equals_keras_lstm():
    """No projection, no clipping: LstmProjectionCell == keras.layers.LSTM
    after tf1_lstm_weights_from_keras (gate order, fused kernel, forget bias)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7, 5)).astype("float32")
    reference = keras.layers.LSTM(11, return_sequences=True)
    reference.build(x.shape)
    randomize(reference, seed=1, stddev=0.5)  # nonzero biases, forget gate included
    expected = np.asarray(reference(x))
    ours = keras.layers.RNN(LstmProjectionCell(11), return_sequences=True)
    ours.build(x.shape)
    kernel, bias = tf1_lstm_weights_from_keras(*[np.asarray(w) for w in reference.weights])
    ours.cell.kernel.assign(kernel)
    ours.cell.bias.assign(bias)
    np.testing.assert_allclose(np.asarray(ours(x)), expected, atol=1e-5)


def test_lstmp_projection_and_clipping():
    """One step against a numpy reference of TF1's LSTMCell(num_proj, clips)."""
    cell = LstmProjectionCell(11, 6, cell_clip=0.5, proj_clip=0.25)
    cell.build((3, 5))
    randomize(cell, seed=2, stddev=1.0)
    rng = np.random.default_rng(3)
    x, h, c = (rng.normal(size=s).astype("float32") for s in ((3, 5), (3, 6), (3, 11)))
    out, (new_h, new_c) = cell(x, [h, c])
    z = np.concatenate([x, h], 1) @ np.asarray(cell.kernel) + np.asarray(cell.bias)
    i, j, f, o = np.split(z, 4, axis=1)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    want_c = np.clip(sig(f + 1.0) * c + sig(i) * np.tanh(j), -0.5, 0.5)
    want_h = np.clip((sig(o) * np.tanh(want_c)) @ np.asarray(cell.projection_kernel), -0.25, 0.25)
    np.testing.assert_allclose(np.asarray(new_c), want_c, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), want_h, atol=1e-5)
    assert np.abs(np.asarray(out)).max() <= 0.25 and np.abs(np.asarray(new_c)).max() <= 0.5
    assert_config_round_trip(cell)


def test_highway_with_closed_gate_is_identity():
    layer = Highway(12, carry_bias_initializer=-1e9)
    x = np.random.default_rng(0).normal(size=(3, 7, 12)).astype("float32")
    np.testing.assert_array_equal(np.asarray(layer(x)), x)
    layer = Highway(12)
    layer.build((None, 12))
    assert np.allclose(np.asarray(layer.carry.bias), -2.0)  # bilm-tf's init
    assert_config_round_trip(layer)


def test_character_encoder_shapes_and_config():
    encoder = CharacterEncoder([(1, 3), (2, 5), (3, 7)], 1, 6, char_embedding_dim=5)
    ids = random_char_ids(3, 7, 9)
    assert tuple(encoder(ids).shape) == (3, 7, 6)
    assert tuple(encoder.convolutions[2].kernel.shape) == (1, 3, 5, 7)  # bilm-tf's W_cnn
    assert_config_round_trip(encoder)
    with pytest.raises(ValueError, match="widest filter"):
        CharacterEncoder([(4, 3)], 0, 3)(random_char_ids(1, 2, 3))


def test_reverse_padded():
    x = np.arange(2 * 5, dtype="float32").reshape(2, 5, 1)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    out = np.asarray(reverse_padded(x, mask))[..., 0]
    np.testing.assert_array_equal(out, [[2, 1, 0, 3, 4], [9, 8, 7, 6, 5]])


def test_scalar_mix_at_init_is_the_mean_and_gamma_scales():
    rng = np.random.default_rng(0)
    layers = [rng.normal(size=(3, 7, 12)).astype("float32") for _ in range(3)]
    mix = ScalarMix(3)
    np.testing.assert_allclose(np.asarray(mix(layers)), np.mean(layers, 0), atol=1e-6)
    mix.gamma.assign(2.0)
    np.testing.assert_allclose(np.asarray(mix(layers)), 2 * np.mean(layers, 0), atol=1e-5)
    assert not mix.losses


def test_scalar_mix_layer_norm_ignores_masked_positions():
    rng = np.random.default_rng(0)
    layers = [rng.normal(2.0, 3.0, size=(3, 7, 12)).astype("float32") for _ in range(3)]
    mask = np.ones((3, 7), bool)
    mask[0, 5:] = mask[2, 3:] = False
    mix = ScalarMix(3, do_layer_norm=True)
    out = np.asarray(mix(layers, mask=mask))
    changed = [x.copy() for x in layers]
    for x in changed:
        x[~mask] = 1e3
    np.testing.assert_allclose(np.asarray(mix(changed, mask=mask))[mask], out[mask], atol=1e-5)
    # ONE mean and variance over the whole masked tensor, not per token.
    normed = [(x - x[mask].mean()) / x[mask].std() for x in layers]
    np.testing.assert_allclose(out[mask], np.mean(normed, 0)[mask], atol=1e-4)


def test_scalar_mix_l2_penalty_and_config():
    mix = ScalarMix(3, l2_coef=0.01)
    layers = [np.ones((2, 5, 4), "float32")] * 3
    mix(layers)
    mix.layer_weights.assign([0.5, -1.0, 2.0])
    assert len(mix.losses) == 1
    np.testing.assert_allclose(float(mix.losses[0]), 0.01 * (0.25 + 1.0 + 4.0), rtol=1e-6)
    rebuilt = assert_config_round_trip(mix)
    assert rebuilt.l2_coef == 0.01 and rebuilt.do_layer_norm is False
