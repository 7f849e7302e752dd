"""The equivalences of section 4 of the comparison guide, on the XLNet
backbone and its layers: the relative shift and positions, the
permutation's two streams, the memory recurrence, left padding, and the
attention's head-bias gradient."""

import numpy as np
import pytest
from xlnet_cases import ODD
from xlnet_cases import outputs_of
from xlnet_cases import permutation_mask
from xlnet_cases import randomize
from xlnet_cases import xlnet_inputs

from keras_bert_impl.xlnet import XLNetBackbone
from keras_bert_impl.xlnet import rel_shift
from keras_bert_impl.xlnet import relative_position_sequence
from keras_bert_impl.xlnet.relative_positions import RelativePositionEncoding


@pytest.mark.parametrize("qlen, klen, rlen", [(5, 8, 13), (5, 8, 9), (4, 4, 8)])
def test_rel_shift_gather_identity(qlen, klen, rlen):
    """out[i, j] = raw[i, qlen - i + j] ("bi": R = K + L; "uni": R = K + 1,
    where only the keys j <= M + i, the visible ones, are defined)."""
    raw = np.random.default_rng(0).normal(size=(2, 3, qlen, rlen)).astype("float32")
    out = np.asarray(rel_shift(raw, klen))
    assert out.shape == (2, 3, qlen, klen)
    for i in range(qlen):
        for j in range(klen):
            if qlen - i + j < rlen:
                np.testing.assert_array_equal(out[..., i, j], raw[..., i, qlen - i + j])


def test_relative_positions_and_bi_data_negation():
    np.testing.assert_array_equal(relative_position_sequence(3, 5, "bi"), np.arange(5, -3, -1))
    np.testing.assert_array_equal(relative_position_sequence(3, 5, "uni"), np.arange(5, -1, -1))
    np.testing.assert_array_equal(relative_position_sequence(3, 5, "bi", clamp_len=2),
                                  np.clip(np.arange(5, -3, -1), -2, 2))
    encoding = np.asarray(RelativePositionEncoding(12, "bi", bi_data=True)(np.zeros((4, 3, 12)),
                                                                          np.zeros((4, 2, 12))))
    positions = np.arange(5, -3, -1.0)
    inv_freq = 1.0 / 10000 ** (np.arange(0, 12, 2) / 12.0)  # (6,)
    for stream, sign in ((0, 1.0), (1, -1.0)):  # the backward stream: exact negations
        angles = sign * positions[:, None] * inv_freq
        np.testing.assert_allclose(encoding[stream], np.concatenate(
            [np.sin(angles), np.cos(angles)], -1), atol=2e-6)
    np.testing.assert_array_equal(encoding[1, :, 6:], encoding[0, :, 6:])  # cos is even
    np.testing.assert_array_equal(encoding[1, :, :6], -encoding[0, :, :6])  # sin is odd


def test_identity_permutation_equals_causal_attention():
    """The content stream with "bi" positions and the identity permutation's
    mask (every position a target) is causal Transformer-XL ("uni")."""
    two = randomize(XLNetBackbone.from_config_object(ODD, two_stream=True))
    uni = XLNetBackbone.from_config_object(ODD.replace(attn_type="uni"))
    uni.set_weights(two.get_weights())
    perm = permutation_mask(np.arange(7))[None].repeat(3, 0)
    x = xlnet_inputs(perm=perm)
    x["target_mapping"] = np.eye(7, dtype="float32")[None].repeat(3, 0)
    ours = outputs_of(two, x)["sequence_output"]
    causal = outputs_of(uni, {k: x[k] for k in ("input_word_ids", "input_type_ids",
                                                "input_mask")})["sequence_output"]
    np.testing.assert_allclose(ours, causal, atol=1e-5, rtol=0)
    x["perm_mask"] = np.zeros_like(perm)  # bidirectional: now differs
    assert np.abs(outputs_of(two, x)["sequence_output"] - causal).max() > 1e-2


@pytest.mark.parametrize("seed", [0, 1])
def test_query_stream_sees_only_earlier_factorisation_steps(seed):
    """For the identity (seed 0) and a random order: g at z_t is unchanged
    when the tokens at z_t, z_t+1, ... change, and changes with the token at
    z_t-1; h at z_t sees its own token too. t = 0 is left out (its query row
    is fully masked; see the guide's section 0)."""
    rng = np.random.default_rng(seed)
    model = randomize(XLNetBackbone.from_config_object(ODD, two_stream=True), seed=seed)
    length = 7
    orders = [np.arange(length) if seed == 0 else rng.permutation(length) for _ in range(3)]
    x = xlnet_inputs(perm=np.stack([permutation_mask(z) for z in orders]), seed=seed)
    x["target_mapping"] = np.eye(length, dtype="float32")[None].repeat(3, 0)
    # Row blocks of one batch: the base, then per t the later tokens changed,
    # then per t the token at z_t-1 changed (rows are independent).
    variants = [x["input_word_ids"]]
    for t in range(1, length):
        later, previous = x["input_word_ids"].copy(), x["input_word_ids"].copy()
        for b, z in enumerate(orders):
            later[b, z[t:]] = (later[b, z[t:]] + 1 + np.arange(length - t)) % 99
            previous[b, z[t - 1]] = (previous[b, z[t - 1]] + 1) % 99
        variants += [later, previous]
    copies = len(variants)
    out = outputs_of(model, {**{k: np.concatenate([v] * copies) for k, v in x.items()},
                             "input_word_ids": np.concatenate(variants)})
    g, h = (out[k].reshape((copies, 3) + out[k].shape[1:]) for k in ("query_output",
                                                                     "sequence_output"))
    for t in range(1, length):
        after, moved = 2 * t - 1, 2 * t  # the variants' blocks
        for b, z in enumerate(orders):
            np.testing.assert_allclose(g[after, b, z[1:t + 1]], g[0, b, z[1:t + 1]], atol=1e-5,
                                       rtol=0)
            np.testing.assert_allclose(h[after, b, z[:t]], h[0, b, z[:t]], atol=1e-5, rtol=0)
            assert np.abs(g[moved, b, z[t]] - g[0, b, z[t]]).max() > 1e-3
            assert np.abs(h[after, b, z[t]] - h[0, b, z[t]]).max() > 1e-3


def test_query_stream_at_chosen_positions_equals_all_positions():
    """target_mapping picking positions [5, 1, 3] (and an unused row) gives
    the rows of the all-positions query stream; the content stream is
    unchanged by it."""
    model = randomize(XLNetBackbone.from_config_object(ODD, two_stream=True))
    x = xlnet_inputs(predict=7)
    x["target_mapping"] = np.eye(7, dtype="float32")[None].repeat(3, 0)
    full = outputs_of(model, x)
    picked = np.zeros((3, 4, 7), "float32")
    picked[:, [0, 1, 2], [5, 1, 3]] = 1.0
    some = outputs_of(model, {**x, "target_mapping": picked})
    np.testing.assert_allclose(some["query_output"][:, :3], full["query_output"][:, [5, 1, 3]],
                               atol=1e-5, rtol=0)
    np.testing.assert_array_equal(some["sequence_output"], full["sequence_output"])


def test_memory_recurrence_equals_one_long_segment():
    """Under "uni" with mem_len >= |A|: f(B | mems(A)) == f([A; B]) on B."""
    base = ODD.replace(attn_type="uni")
    with_memory = randomize(XLNetBackbone.from_config_object(base.replace(mem_len=4)))
    plain = XLNetBackbone.from_config_object(base)
    plain.set_weights(with_memory.get_weights())
    whole = xlnet_inputs(length=7)
    whole["input_type_ids"][:] = 0  # memory counts as segment 0
    part = {k: v[:, :4] for k, v in whole.items()}
    first = outputs_of(with_memory, {**part, "mems": np.zeros((3, 2, 0, 12), "float32")})
    assert first["new_mems"].shape == (3, 2, 4, 12)
    second = outputs_of(with_memory, {**{k: v[:, 4:] for k, v in whole.items()},
                                      "mems": first["new_mems"]})
    expected = outputs_of(plain, whole)["sequence_output"]
    np.testing.assert_allclose(first["sequence_output"], expected[:, :4], atol=1e-5, rtol=0)
    np.testing.assert_allclose(second["sequence_output"], expected[:, 4:], atol=1e-5, rtol=0)
    fresh = outputs_of(with_memory, {**{k: v[:, 4:] for k, v in whole.items()},
                                     "mems": np.zeros((3, 2, 0, 12), "float32")})
    assert np.abs(fresh["sequence_output"] - expected[:, 4:]).max() > 1e-2  # memory matters


def test_memory_keeps_the_last_mem_len_of_the_reused_states():
    """new_mems = concat(mems, h_in[:reuse_len])[-mem_len:], per layer,
    from each layer's INPUT (layer 0: the embeddings)."""
    model = randomize(XLNetBackbone.from_config_object(ODD.replace(mem_len=5, reuse_len=4)))
    old = np.random.default_rng(3).normal(size=(3, 2, 5, 12)).astype("float32")
    x = xlnet_inputs(mems=old)
    out = model(x)
    embeddings = np.asarray(model.word_embedding(x["input_word_ids"]))
    layer_inputs = [embeddings, np.asarray(out["encoder_outputs"][0])]
    for i, h in enumerate(layer_inputs):
        expected = np.concatenate([old[:, i], h[:, :4]], axis=1)[:, -5:]
        np.testing.assert_allclose(np.asarray(out["new_mems"])[:, i], expected, atol=1e-6)


def test_left_padding_changes_nothing_at_real_positions():
    """Fine-tuning pads on the left (input_mask 1 = padding, segment 4):
    relative positions make the real tokens' outputs independent of it."""
    model = randomize(XLNetBackbone.from_config_object(ODD))
    x = xlnet_inputs(length=5)
    padded = {
        "input_word_ids": np.concatenate([np.full((3, 3), 5, "int32"), x["input_word_ids"]], 1),
        "input_type_ids": np.concatenate([np.full((3, 3), 4, "int32"), x["input_type_ids"]], 1),
        "input_mask": np.concatenate([np.ones((3, 3), "float32"), x["input_mask"]], 1),
    }
    np.testing.assert_allclose(outputs_of(model, padded)["sequence_output"][:, 3:],
                               outputs_of(model, x)["sequence_output"], atol=1e-5, rtol=0)
    padded["input_mask"][:] = 0.0  # padding that is not masked does change them
    assert np.abs(outputs_of(model, padded)["sequence_output"][:, 3:]
                  - outputs_of(model, x)["sequence_output"]).max() > 1e-2


def test_head_bias_gradient_equals_autodiff():
    """`r_w`/`r_r` added to the queries with a two-stage bias gradient: the
    same values and gradients as TensorFlow's broadcast add, eagerly and traced."""
    import tensorflow as tf

    from keras_bert_impl.xlnet.relative_attention import _plus_head_bias

    rng = np.random.default_rng(0)
    queries = tf.constant(rng.normal(size=(3, 4, 5, 6)), "float32")
    bias = tf.constant(rng.normal(size=(4, 1, 6)), "float32")
    dy = tf.constant(rng.normal(size=(3, 4, 5, 6)), "float32")

    def run(add):
        def step(q, b):
            with tf.GradientTape() as tape:
                tape.watch([q, b])
                y = add(q, b)
                loss = tf.reduce_sum(y * dy)
            return [y, *tape.gradient(loss, [q, b])]

        return step(queries, bias), tf.function(step)(queries, bias)

    for got, expected in zip(run(_plus_head_bias), run(lambda q, b: q + b)):
        assert got[2].shape == (4, 1, 6)
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-5)
