"""The ELMo backbone (bilm-tf's biLM): the golden outputs of bilm-tf's own
test model, stateful rows, direction causality, padding, mixed precision,
gradients, config and `.keras` round trips."""

import json
import os

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from elmo_cases import FIXTURE
from elmo_cases import OPTIONS
from elmo_cases import WEIGHTS
from elmo_cases import bilm_fixture  # noqa: F401 (fixture)
from elmo_cases import needs_fixture
from elmo_cases import odd_elmo_config  # noqa: F401 (the `odd_config` fixture)
from elmo_cases import random_char_ids
from elmo_cases import randomize
from helpers import assert_config_round_trip
from helpers import run_backbone_test

from keras_bert_impl.elmo import ElmoBackbone
from keras_bert_impl.elmo import ElmoLstmStack
from keras_bert_impl.elmo import batch_char_ids
from keras_bert_impl.elmo import load_elmo_checkpoint
from keras_bert_impl.elmo import remove_sentence_boundaries


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
    run_backbone_test(backbone, random_char_ids(3, 7, 9, lengths=[4]), {
        "token_embedding": (3, 7, 6), "forward_output": (3, 7, 6),
        "backward_output": (3, 7, 6), "mask": (3, 7)}, tmp_path)
    stack = ElmoLstmStack(2, 11, 6, 3.0, 3.0, True, 0.1, go_backwards=True, max_batch_size=5)
    assert_config_round_trip(stack)
