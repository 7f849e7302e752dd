"""ELMo (bilm-tf): golden outputs of bilm-tf's own test model, parameter
counts, character ids, LSTMP and highway equivalences, direction causality,
ScalarMix, checkpoint round trips and Keras serialization.

Over 400 lines: the ELMo model's own tests, from bilm-tf's golden outputs
through its layers and ScalarMix to its checkpoint files, one family's model in
one file as `test_xlnet.py` is; the sections share `odd_config`, `randomize`
and bilm-tf's fixture files.
"""

import json
import os

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import assert_config_round_trip
from helpers import assert_keras_save_load_equal

from keras_bert_impl.elmo import CharacterEncoder
from keras_bert_impl.elmo import ElmoBackbone
from keras_bert_impl.elmo import ElmoConfig
from keras_bert_impl.elmo import ElmoLstmStack
from keras_bert_impl.elmo import Highway
from keras_bert_impl.elmo import LstmProjectionCell
from keras_bert_impl.elmo import batch_char_ids
from keras_bert_impl.elmo import char_ids_from_tokens
from keras_bert_impl.elmo import elmo_num_parameters
from keras_bert_impl.elmo import elmo_preset
from keras_bert_impl.elmo import load_elmo_checkpoint
from keras_bert_impl.elmo import remove_sentence_boundaries
from keras_bert_impl.elmo import save_elmo_checkpoint
from keras_bert_impl.elmo import tf1_lstm_weights_from_keras
from keras_bert_impl.elmo import token_char_ids
from keras_bert_impl.elmo.elmo_checkpoint import elmo_hdf5_variables
from keras_bert_impl.elmo.elmo_lstm_stack import reverse_padded
from keras_bert_impl.layers.scalar_mix import ScalarMix

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

ODD_TOKENS = ["café", "naïve", "漢字", "👍🏽", "", "a" * 120, "é" * 30, "<S>", "</S>", "x",
              "Ünïcödé-wörd", "\t", "日本語のテキスト" * 3]


@pytest.fixture
def odd_config():
    """Odd sizes so that swapped axes fail loudly: F=15 filters, P=6,
    U=11, E=5, C=9."""
    return ElmoConfig(filters=((1, 3), (2, 5), (3, 7)), n_highway=1, projection_dim=6,
                      lstm_dim=11, n_layers=2, char_embedding_dim=5,
                      max_characters_per_token=9, cell_clip=3.0, proj_clip=3.0,
                      use_skip_connections=True, dropout=0.1)


def randomize(model, seed=0, stddev=0.3):
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


# === The golden test: bilm-tf's trained test model ===


@needs_fixture
def test_bilm_tf_golden_embeddings():
    """bilm-tf's tests/test_model.py protocol: row k reads list k's
    sentences in order, states carried from batch to batch, and the top
    layer [forward; backward] without <S>/</S> matches lm_embeddings_k."""
    with open(os.path.join(FIXTURE, "lm_embeddings_sentences.json")) as f:
        sentences = json.load(f)
    # bilm-tf's Batcher reads the vocabulary only to give `<S>` / `</S>`
    # their boundary ids, which `batch_char_ids` always does.
    with open(os.path.join(FIXTURE, "vocab_test.txt"), encoding="utf-8") as f:
        assert {"<S>", "</S>"} <= {line.strip() for line in f}
    backbone = load_elmo_checkpoint(OPTIONS, WEIGHTS, max_batch_size=4)
    worst = 0.0
    for i in range(10):
        batch = [sentences[k][i].strip().split() for k in range(2)]
        out = backbone(batch_char_ids(batch, 50), training=False)
        top, mask = remove_sentence_boundaries(out["lstm_outputs"][-1], out["mask"])
        np.testing.assert_array_equal(np.sum(mask, axis=1), [len(s) for s in batch])
        for k in range(2):
            with h5py.File(os.path.join(FIXTURE, f"lm_embeddings_{k}.hdf5"), "r") as f:
                expected = f[str(i)][...]  # (2, T_i, 16): forward, backward
            expected = np.concatenate([expected[0], expected[1]], axis=-1)
            actual = np.asarray(top)[k, :len(batch[k])]
            assert actual.shape == expected.shape
            worst = max(worst, float(np.abs(actual - expected).max()))
    print(f"bilm-tf golden max abs difference: {worst:.3g}")
    assert worst <= 1e-5
    # A fresh state gives other numbers for sentence 1: the state matters.
    backbone.reset_states()
    batch = [sentences[k][1].strip().split() for k in range(2)]
    out = backbone(batch_char_ids(batch))
    top, _ = remove_sentence_boundaries(out["lstm_outputs"][-1], out["mask"])
    with h5py.File(os.path.join(FIXTURE, "lm_embeddings_0.hdf5"), "r") as f:
        expected = np.concatenate(f["1"][...], axis=-1)
    assert np.abs(np.asarray(top)[0, :len(batch[0])] - expected).max() > 1e-3


def test_stateful_rows_are_independent(odd_config):
    """A call with fewer rows leaves the other rows' states alone; a batch
    larger than max_batch_size is refused; reset_states zeros them."""
    backbone = randomize(ElmoBackbone.from_config_object(odd_config, max_batch_size=3))
    assert len(backbone.non_trainable_weights) == 2 * 2 * odd_config.n_layers
    ids = random_char_ids(3, 5, 9, lengths=[5, 3, 4])
    backbone(ids)
    before = [np.array(v) for v in backbone.non_trainable_weights]
    assert all(np.abs(v).sum() > 0 for v in before)
    backbone(ids[:1])
    after = [np.array(v) for v in backbone.non_trainable_weights]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a[1:], b[1:])
        assert not np.array_equal(a[0], b[0])
    with pytest.raises(ValueError, match="max_batch_size=3"):
        backbone(random_char_ids(4, 5, 9))
    backbone.reset_states()
    assert all(not np.any(np.array(v)) for v in backbone.non_trainable_weights)
    # From zero states, the stateful model equals the stateless one.
    stateless = ElmoBackbone.from_config_object(odd_config)
    for target, source in zip(stateless.weights, backbone.trainable_weights, strict=True):
        target.assign(source)
    np.testing.assert_allclose(np.asarray(backbone(ids)["lstm_outputs"][-1]),
                               np.asarray(stateless(ids)["lstm_outputs"][-1]), atol=1e-6)


# === Configuration and parameter counts ===


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


# === Character ids ===


def test_char_ids_match_bilm_tf_batcher():
    """bilm-tf's tests/test_data.py TestBatcher expectations (ids + 1)."""
    ids = batch_char_ids([["The", "first", "sentence"], ["Second", "."]], 50)
    rows = [
        [[259, 257, 260], [259, 85, 105, 102, 260], [259, 103, 106, 115, 116, 117, 260],
         [259, 116, 102, 111, 117, 102, 111, 100, 102, 260], [259, 258, 260]],
        [[259, 257, 260], [259, 84, 102, 100, 112, 111, 101, 260], [259, 47, 260],
         [259, 258, 260], []],
    ]
    expected = np.zeros((2, 5, 50), np.int32)
    for b, sentence in enumerate(rows):
        for t, token in enumerate(sentence):
            if token:
                expected[b, t] = 261
                expected[b, t, :len(token)] = token
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(ids, expected)


def test_char_ids_truncation_as_bilm_tf():
    """bilm-tf's UnicodeCharsVocabulary(max_word_length=5) expectations
    (without its +1): bytes are truncated, multi-byte characters too."""
    ids = token_char_ids(["th", "thhhhh", chr(256) + "t", "<S>", "</S>"], max_chars=5) - 1
    np.testing.assert_array_equal(ids, [
        [258, 116, 104, 259, 260],
        [258, 116, 104, 104, 259],
        [258, 196, 128, 116, 259],
        [258, 256, 259, 260, 260],
        [258, 257, 259, 260, 260],
    ])


def _assert_graph_ids_equal(batch, max_chars):
    expected = batch_char_ids(batch, max_chars)
    graph = char_ids_from_tokens(tf.ragged.constant(batch, tf.string, ragged_rank=1), max_chars)
    assert graph.dtype == tf.int32
    np.testing.assert_array_equal(graph.numpy(), expected)


def test_char_ids_python_and_graph_agree_on_odd_strings():
    """Accents, CJK, emoji, empty and over-long tokens (cut mid-character),
    literal boundaries, an empty sentence; also in a tf.function with an
    unknown batch and length, as a SavedModel serves it."""
    odd = [ODD_TOKENS, [], ODD_TOKENS[::-1][:5], ["x"]]
    for max_chars in (50, 7):
        _assert_graph_ids_equal(odd, max_chars)
    fn = tf.function(lambda t: char_ids_from_tokens(t, 50), input_signature=[
        tf.RaggedTensorSpec([None, None], tf.string, ragged_rank=1)])
    np.testing.assert_array_equal(
        fn(tf.ragged.constant(odd, tf.string, ragged_rank=1)).numpy(), batch_char_ids(odd))


@needs_fixture
def test_char_ids_python_and_graph_agree_on_fixture():
    with open(os.path.join(FIXTURE, "lm_embeddings_sentences.json")) as f:
        _assert_graph_ids_equal([s.split() for row in json.load(f) for s in row], 50)


def test_char_ids_errors():
    with pytest.raises(ValueError, match="non-empty list"):
        batch_char_ids([])
    with pytest.raises(ValueError, match="not a str"):
        batch_char_ids(["a sentence"])
    with pytest.raises(ValueError, match="max_chars=2"):
        batch_char_ids([["a"]], max_chars=2)
    with pytest.raises(ValueError, match="must be str"):
        token_char_ids([b"bytes"])


# === Layers ===


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


def test_direction_causality(odd_config):
    """Forward output t sees tokens <= t only; backward output t sees
    tokens >= t only (bilm-tf's two LMs)."""
    backbone = randomize(ElmoBackbone.from_config_object(odd_config))
    ids = random_char_ids(3, 8, 9, seed=0)
    t = 4
    base = {k: np.asarray(v) for k, v in backbone(ids).items() if k.endswith("_output")}
    later = ids.copy()
    later[:, t + 1:] = random_char_ids(3, 8, 9, seed=1)[:, t + 1:]
    changed = {k: np.asarray(v) for k, v in backbone(later).items() if k.endswith("_output")}
    np.testing.assert_allclose(changed["forward_output"][:, :t + 1],
                               base["forward_output"][:, :t + 1], atol=1e-6)
    assert np.abs(changed["backward_output"][:, :t + 1]
                  - base["backward_output"][:, :t + 1]).min(axis=-1).max() > 1e-4
    earlier = ids.copy()
    earlier[:, :t] = random_char_ids(3, 8, 9, seed=2)[:, :t]
    changed = {k: np.asarray(v) for k, v in backbone(earlier).items() if k.endswith("_output")}
    np.testing.assert_allclose(changed["backward_output"][:, t:],
                               base["backward_output"][:, t:], atol=1e-6)
    assert np.abs(changed["forward_output"][:, t:]
                  - base["forward_output"][:, t:]).min(axis=-1).max() > 1e-4


def test_padding_never_enters(odd_config):
    """A right-padded row gives the same outputs as the row alone: the
    backward LM starts from the last real token, not from the padding."""
    backbone = randomize(ElmoBackbone.from_config_object(odd_config))
    ids = random_char_ids(2, 7, 9, lengths=[4, 7])
    padded = backbone(ids)
    alone = backbone(ids[:1, :4])
    for name in ("forward_output", "backward_output", "token_embedding"):
        np.testing.assert_allclose(np.asarray(padded[name])[0, :4], np.asarray(alone[name])[0],
                                   atol=1e-6)
        assert not np.any(np.asarray(padded[name])[0, 4:])
    np.testing.assert_array_equal(np.asarray(padded["mask"]), np.any(ids > 0, -1))


def test_backbone_outputs(odd_config):
    backbone = ElmoBackbone.from_config_object(odd_config)
    out = backbone({"char_ids": random_char_ids(3, 7, 9, lengths=[5])})
    x = np.asarray(out["token_embedding"])
    assert x.shape == (3, 7, 6)
    assert len(out["lstm_outputs"]) == 2 and len(out["lm_embeddings"]) == 3
    np.testing.assert_array_equal(np.asarray(out["lm_embeddings"][0]), np.concatenate([x, x], -1))
    top = np.asarray(out["lstm_outputs"][-1])
    np.testing.assert_array_equal(top[..., :6], np.asarray(out["forward_output"]))
    np.testing.assert_array_equal(top[..., 6:], np.asarray(out["backward_output"]))
    with pytest.raises(ValueError, match=r"char_ids.*9"):
        backbone(random_char_ids(3, 7, 8))
    with pytest.raises(ValueError, match=r"\[0, 262\)"):
        backbone(random_char_ids(3, 7, 9) + 300)


def test_backbone_mixed_precision(odd_config):
    """Under mixed_bfloat16 the outputs are bfloat16 but the LSTM recurrence
    and its kept states stay float32."""
    keras.config.set_dtype_policy("mixed_bfloat16")
    backbone = ElmoBackbone.from_config_object(odd_config, max_batch_size=3)
    out = backbone(random_char_ids(3, 7, 9, lengths=[4]))
    assert keras.backend.standardize_dtype(out["forward_output"].dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(out["mask"].dtype) == "bool"
    cell = backbone.forward_lstm.lstms[0].cell
    assert cell.compute_dtype == "float32"
    assert all(v.dtype == "float32" for v in backbone.non_trainable_weights)


def test_backbone_trains(odd_config):
    """Every weight gets a gradient from an LM-style loss on both tops."""
    backbone = ElmoBackbone.from_config_object(odd_config)
    ids = random_char_ids(3, 7, 9, lengths=[5])
    with tf.GradientTape() as tape:
        out = backbone(ids, training=True)
        loss = tf.reduce_sum(out["forward_output"] ** 2) + tf.reduce_sum(
            out["backward_output"] ** 2)
    grads = tape.gradient(loss, backbone.trainable_weights)
    assert all(g is not None for g in grads)


def test_backbone_config_and_keras_round_trip(odd_config, tmp_path):
    backbone = randomize(ElmoBackbone.from_config_object(odd_config))
    assert_config_round_trip(backbone)
    assert_keras_save_load_equal(backbone, random_char_ids(3, 7, 9, lengths=[4]), tmp_path)
    stack = ElmoLstmStack(2, 11, 6, 3.0, 3.0, True, 0.1, go_backwards=True, max_batch_size=5)
    assert_config_round_trip(stack)


# === ScalarMix (bilm-tf's weight_layers) ===


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


# === bilm-tf checkpoint files ===


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
