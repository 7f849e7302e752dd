"""XLNet: Hugging Face parity, checkpoints, the equivalences of the guide's
section 4, memory in `fit`, and the house checks.

Over 400 lines: the XLNet model's own tests (checkpoint files, config, the
equivalences of section 4, the pretrainer's memory), one family's model in one
file as `test_elmo.py` is, sharing `ODD`, `randomize`, `xlnet_inputs` and
`outputs_of`; a forked test imports this module by name (`import test_xlnet`).
"""

import json
import os
import shutil
import textwrap

import keras
import numpy as np
import pytest
import safetensors.numpy
from forked_python import run_python
from helpers import assert_config_round_trip
from helpers import assert_keras_save_load_equal

from keras_bert_impl.xlnet import XLNetBackbone
from keras_bert_impl.xlnet import XLNetConfig
from keras_bert_impl.xlnet import XLNetPretrainer
from keras_bert_impl.xlnet import load_xlnet_checkpoint
from keras_bert_impl.xlnet import load_xlnet_pretrainer
from keras_bert_impl.xlnet import rel_shift
from keras_bert_impl.xlnet import relative_position_sequence
from keras_bert_impl.xlnet import save_xlnet_checkpoint
from keras_bert_impl.xlnet import xlnet_num_parameters
from keras_bert_impl.xlnet import xlnet_preset
from keras_bert_impl.xlnet.relative_positions import RelativePositionEncoding

# A random transformers XLNetLMHeadModel and its outputs, made by
# tests/goldens/make_xlnet_parity.py (vocab 99, d_model 12, 3 heads of 4,
# d_inner 37, 2 layers, untie_r, mem_len 5).
GOLDEN = os.path.join(os.path.dirname(__file__), "goldens", "xlnet_parity")
OUTPUTS = os.path.join(GOLDEN, "outputs.npz")
LM = "transformer."  # XLNetLMHeadModel's prefix, as the golden folder spells keys
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ODD = XLNetConfig(vocab_size=99, d_model=12, n_layer=2, n_head=3, d_head=4, d_inner=37,
                  dropout=0.0)


def randomize(model, seed=0, stddev=0.3):
    """Every weight N(0, stddev): order-one scores, so that any leak of
    information between positions shows far above round-off."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(0.0, stddev, w.shape).astype("float32"))
    return model


def xlnet_inputs(batch=3, length=7, seed=0, predict=None, perm=None, mems=None):
    """Random ids, two segments, no padding; with `predict`, a random
    perm mask and that many one-hot target rows; with `mems`, that memory."""
    rng = np.random.default_rng(seed)
    x = {"input_word_ids": rng.integers(0, 99, (batch, length)).astype("int32"),
         "input_type_ids": (np.arange(length) >= length // 2).astype("int32")[None].repeat(
             batch, 0),
         "input_mask": np.zeros((batch, length), "float32")}
    if predict:
        x["perm_mask"] = (rng.random((batch, length, length)) < 0.5).astype("float32")
        x["target_mapping"] = np.eye(length, dtype="float32")[
            np.stack([rng.choice(length, predict, replace=False) for _ in range(batch)])]
    if perm is not None:
        x["perm_mask"] = perm
    if mems is not None:
        x["mems"] = np.asarray(mems, "float32")
    return x


def outputs_of(model, x):
    return {k: np.asarray(v) for k, v in model(x, training=False).items()
            if k != "encoder_outputs"}


# === Hugging Face parity and checkpoint files ===


def _golden_inputs(goldens, case, mems=None, batch=3):
    x = {k: goldens[f"{case}_{k}"].astype("int32") for k in ("input_word_ids", "input_type_ids")}
    shape = x["input_word_ids"].shape
    x["input_mask"] = goldens.get(f"{case}_input_mask", np.zeros(shape, "float32"))
    if f"{case}_perm_mask" in goldens:
        x["perm_mask"] = goldens[f"{case}_perm_mask"]
        x["target_mapping"] = goldens[f"{case}_target_mapping"]
    x["mems"] = np.zeros((shape[0], 2, 0, 12), "float32") if mems is None else mems
    return x


def test_parity_with_transformers():
    """Every case of the golden (see make_xlnet_parity.py) within 1e-4
    (measured 2.4e-6): a) the content stream with LEFT padding and segment
    ids A, B, <cls>, pad; b) the two streams with a random perm_mask and a
    target_mapping with an unused row, reuse_len 4; c) a second segment over
    a's memory; d) bi_data with clamp_len 2; e) "uni" + same_length over a's
    memory. Logits, last hidden states, every block (a, c, e), new memory."""
    goldens = dict(np.load(OUTPUTS))
    bias = safetensors.numpy.load_file(os.path.join(GOLDEN, "model.safetensors"))["lm_loss.bias"]
    x_a = _golden_inputs(goldens, "a")
    assert x_a["input_mask"][:, :2].tolist() == [[1, 1], [1, 0], [0, 0]]  # left padding
    models = {"a": load_xlnet_checkpoint(GOLDEN)}
    models["c"] = models["a"]
    models["b"] = load_xlnet_checkpoint(GOLDEN, two_stream=True, reuse_len=4)
    models["d"] = load_xlnet_checkpoint(GOLDEN, two_stream=True, bi_data=True, clamp_len=2)
    models["e"] = load_xlnet_checkpoint(GOLDEN, attn_type="uni", same_length=True)
    memory = np.asarray(models["a"](x_a)["new_mems"])  # c and e continue a
    worst, compared = 0.0, 0
    for case, backbone in models.items():
        x = _golden_inputs(goldens, case, memory if case in "ce" else None)
        out = backbone(x)
        top = out["query_output" if "perm_mask" in x else "sequence_output"]
        ours = {"logits": np.asarray(backbone.word_embedding(top, reverse=True)) + bias,
                "sequence_output": out["sequence_output"], "mems": out["new_mems"]}
        ours.update({f"encoder_output_{i}": h for i, h in enumerate(out["encoder_outputs"])})
        for name, value in ours.items():
            if f"{case}_{name}" not in goldens:
                continue  # two streams: transformers' blocks are (h, g) pairs
            golden = goldens[f"{case}_{name}"]
            assert np.abs(golden).max() > 1.0, (case, name)  # the goldens are not near zero
            diff = float(np.abs(np.asarray(value) - golden).max())
            worst, compared = max(worst, diff), compared + 1
            assert diff <= 1e-4, (case, name, diff)
    assert compared == 21
    print(f"max abs difference vs transformers over {compared} outputs: {worst:.2e}")


def test_round_trip_writes_what_transformers_writes(tmp_path):
    pretrainer = load_xlnet_pretrainer(GOLDEN, max_batch_size=3)
    folder = tmp_path / "saved"
    save_xlnet_checkpoint(pretrainer, str(folder))
    assert sorted(os.listdir(folder)) == ["config.json", "model.safetensors"]  # no temp file
    original = safetensors.numpy.load_file(os.path.join(GOLDEN, "model.safetensors"))
    written = safetensors.numpy.load_file(str(folder / "model.safetensors"))
    assert set(written) == set(original)  # same keys, the tied head left out
    for key in original:
        np.testing.assert_array_equal(written[key], original[key], err_msg=key)
    values = json.loads((folder / "config.json").read_text())
    assert values["model_type"] == "xlnet" and values["architectures"] == ["XLNetLMHeadModel"]
    assert values["untie_r"] is True and values["mem_len"] == 5
    reloaded = load_xlnet_pretrainer(str(folder), max_batch_size=3)
    for a, b in zip(pretrainer.weights, reloaded.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # A bare backbone: XLNetModel's keys, no prefix, no head.
    save_xlnet_checkpoint(pretrainer.backbone, str(tmp_path / "bare"))
    bare = safetensors.numpy.load_file(str(tmp_path / "bare" / "model.safetensors"))
    assert set(bare) == {k.removeprefix(LM) for k in original if k != "lm_loss.bias"}
    assert json.loads((tmp_path / "bare" / "config.json").read_text())["architectures"] == [
        "XLNetModel"]
    fresh = load_xlnet_pretrainer(str(tmp_path / "bare"), max_batch_size=3)
    assert not np.asarray(fresh.lm_bias).any()  # a new head starts at zero, as the original
    with pytest.raises(ValueError, match="must be an XLNetPretrainer or an XLNetBackbone"):
        save_xlnet_checkpoint(pretrainer.backbone.blocks[0], str(tmp_path / "x"))


def test_shared_biases_round_trip(tmp_path):
    """untie_r=False: one set of biases, written to every layer (what
    transformers needs), read back only when every layer agrees."""
    config = ODD.replace(untie_r=False)
    backbone = randomize(XLNetBackbone.from_config_object(config))
    assert len(backbone.attention_biases) == 1
    assert backbone.count_params() == xlnet_num_parameters(config)
    save_xlnet_checkpoint(backbone, str(tmp_path / "tied"))
    tensors = safetensors.numpy.load_file(str(tmp_path / "tied" / "model.safetensors"))
    np.testing.assert_array_equal(tensors["layer.0.rel_attn.r_w_bias"],
                                  tensors["layer.1.rel_attn.r_w_bias"])
    loaded = load_xlnet_checkpoint(str(tmp_path / "tied"))
    x = xlnet_inputs()
    np.testing.assert_array_equal(outputs_of(backbone, x)["sequence_output"],
                                  outputs_of(loaded, x)["sequence_output"])
    tensors["layer.1.rel_attn.r_r_bias"] += 1.0
    safetensors.numpy.save_file(tensors, str(tmp_path / "tied" / "model.safetensors"))
    with pytest.raises(ValueError, match="'layer.1.rel_attn.r_r_bias' differs.*untie_r=false"):
        load_xlnet_checkpoint(str(tmp_path / "tied"))
    untied = load_xlnet_checkpoint(str(tmp_path / "tied"), untie_r=True)
    assert len(untied.attention_biases) == 2


def test_loads_mixed_bfloat16():
    goldens = dict(np.load(OUTPUTS))
    pretrainer = load_xlnet_pretrainer(GOLDEN, dtype="mixed_bfloat16", mem_len=None)
    x = _golden_inputs(goldens, "b")
    del x["mems"]
    logits = pretrainer(x)  # mem_len=None: b's memory output is not compared here
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    np.testing.assert_allclose(logits, goldens["b_logits"], atol=0.15)


def _edited_copy(tmp_path, edit, config_edit=None):
    folder = tmp_path / "edited"
    folder.mkdir(parents=True)
    values = json.loads(open(os.path.join(GOLDEN, "config.json")).read())
    if config_edit:
        config_edit(values)
    (folder / "config.json").write_text(json.dumps(values))
    tensors = safetensors.numpy.load_file(os.path.join(GOLDEN, "model.safetensors"))
    edit(tensors)
    safetensors.numpy.save_file(tensors, str(folder / "model.safetensors"))
    return str(folder)


def test_missing_tensor_is_named(tmp_path):
    folder = _edited_copy(tmp_path, lambda t: t.pop(LM + "layer.1.rel_attn.v"))
    with pytest.raises(ValueError, match="lacks tensor 'transformer.layer.1.rel_attn.v'"):
        load_xlnet_checkpoint(folder)
    folder = _edited_copy(tmp_path / "b", lambda t: t.pop("lm_loss.bias"))
    load_xlnet_checkpoint(folder)  # the backbone needs no head
    with pytest.raises(ValueError, match="lacks tensor 'lm_loss.bias'"):
        load_xlnet_pretrainer(folder, max_batch_size=3)


@pytest.mark.parametrize("key", [LM + "layer.2.rel_attn.q",  # a third layer of a 2-layer model
                                 "sequence_summary.summary.weight",  # a classifier's head
                                 "layer.0.rel_attn.q"])  # unprefixed beside prefixed keys
def test_unexpected_tensor_is_named(tmp_path, key):
    def add(t):
        t[key] = np.ones((12, 3, 4), "float32")
    with pytest.raises(ValueError, match=f"unexpected tensor '{key}'"):
        load_xlnet_checkpoint(_edited_copy(tmp_path, add))


def test_misshaped_tensor_is_named_with_both_shapes(tmp_path):
    def edit(t):
        t[LM + "layer.0.ff.layer_1.weight"] = t[LM + "layer.0.ff.layer_1.weight"].T.copy()
    with pytest.raises(ValueError, match=r"'transformer.layer.0.ff.layer_1.weight' has shape "
                                         r"\(12, 37\).*needs \(37, 12\)"):
        load_xlnet_checkpoint(_edited_copy(tmp_path, edit))


def test_tied_head_accepted_untied_rejected(tmp_path):
    expected = load_xlnet_checkpoint(GOLDEN).get_weights()

    def tied(t):
        t["lm_loss.weight"] = t[LM + "word_embedding.weight"].copy()
    loaded = load_xlnet_checkpoint(_edited_copy(tmp_path / "a", tied))
    for a, b in zip(expected, loaded.get_weights()):
        np.testing.assert_array_equal(a, b)

    def untied(t):
        t["lm_loss.weight"] = t[LM + "word_embedding.weight"] + 1.0
    with pytest.raises(ValueError, match="'lm_loss.weight' should be tied"):
        load_xlnet_checkpoint(_edited_copy(tmp_path / "b", untied))
    with pytest.raises(ValueError, match="tie_word_embeddings=false"):
        load_xlnet_checkpoint(_edited_copy(tmp_path / "c", lambda t: None,
                                           lambda v: v.update(tie_word_embeddings=False)))


# === Config and presets ===


def test_config_reads_a_released_config_json(tmp_path):
    """xlnet-base-cased's config.json (its keys as released): xlnet_base."""
    released = {
        "architectures": ["XLNetLMHeadModel"], "attn_type": "bi", "bi_data": False,
        "bos_token_id": 1, "clamp_len": -1, "d_head": 64, "d_inner": 3072, "d_model": 768,
        "dropout": 0.1, "end_n_top": 5, "eos_token_id": 2, "ff_activation": "gelu",
        "initializer_range": 0.02, "layer_norm_eps": 1e-12, "mem_len": None,
        "model_type": "xlnet", "n_head": 12, "n_layer": 12, "pad_token_id": 5,
        "reuse_len": None, "same_length": False, "start_n_top": 5, "summary_activation": "tanh",
        "summary_last_dropout": 0.1, "summary_type": "last", "summary_use_proj": True,
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 250}},
        "untie_r": True, "vocab_size": 32000}
    (tmp_path / "config.json").write_text(json.dumps(released))
    config = XLNetConfig.from_json_file(str(tmp_path / "config.json"))
    assert config == xlnet_preset("xlnet_base")
    config.to_json_file(str(tmp_path / "again.json"))
    assert XLNetConfig.from_json_file(str(tmp_path / "again.json")) == config
    assert XLNetConfig.from_dict({"n_token": 99, "d_model": 12, "n_head": 3}).vocab_size == 99
    assert XLNetConfig(d_model=12, n_head=3).d_head == 4  # transformers' default
    with pytest.raises(ValueError, match=r"Unknown XLNet config keys in c.json: \['n_embd'\]"):
        XLNetConfig.from_dict({"n_embd": 12}, source="c.json")
    with pytest.raises(ValueError, match="describes a 'bert' model"):
        XLNetConfig.from_dict({"model_type": "bert"})


@pytest.mark.parametrize("changes, message", [
    (dict(d_model=13, n_head=1), "`d_model` must be even"),
    (dict(attn_type="causal"), "attn_type='causal'"),
    (dict(ff_activation="swish"), "ff_activation='swish'"),
    (dict(mem_len=-1), "mem_len=-1"),
    (dict(untie_r="yes"), "untie_r='yes'"),
    (dict(dropout=1.0), "dropout=1.0"),
])
def test_config_rejects_bad_values(changes, message):
    with pytest.raises(ValueError, match=message):
        ODD.replace(**changes)


def test_parameter_counts():
    """transformers' XLNetModel counts (measured with transformers 5.23):
    base 116,718,336 (+ the LM bias: 116,750,336), large 360,268,800;
    formula only for those, a built model for the debug size."""
    base = xlnet_preset("xlnet_base")
    assert xlnet_num_parameters(base) == 116_718_336
    assert xlnet_num_parameters(base, lm_head=True) == 116_750_336
    assert xlnet_num_parameters(xlnet_preset("xlnet_large")) == 360_268_800
    debug = xlnet_preset("xlnet_debug")
    assert (debug.n_layer, debug.d_model, debug.n_head, debug.d_head, debug.d_inner,
            debug.ff_activation, debug.dropout) == (6, 32, 4, 8, 32, "relu", 0.0)
    for config in (debug, debug.replace(untie_r=True)):  # transformers: 1,069,152 untied
        backbone = XLNetBackbone.from_config_object(config, two_stream=True)
        assert backbone.count_params() == xlnet_num_parameters(config)
        assert not backbone.non_trainable_weights
    # Without the query stream mask_emb is kept (and counted) but frozen: no gradient reaches it.
    content_only = XLNetBackbone.from_config_object(debug)
    assert content_only.count_params() == xlnet_num_parameters(debug)
    assert [w.path for w in content_only.non_trainable_weights] == ["mask_embedding/mask_emb"]
    assert xlnet_num_parameters(debug.replace(untie_r=True)) == 1_069_152


# === The equivalences of section 4 ===


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


def _permutation_mask(order):
    """All positions targets: i cannot see j when rank(i) <= rank(j)."""
    rank = np.argsort(order)
    return (rank[:, None] <= rank[None, :]).astype("float32")


def test_identity_permutation_equals_causal_attention():
    """The content stream with "bi" positions and the identity permutation's
    mask (every position a target) is causal Transformer-XL ("uni")."""
    two = randomize(XLNetBackbone.from_config_object(ODD, two_stream=True))
    uni = XLNetBackbone.from_config_object(ODD.replace(attn_type="uni"))
    uni.set_weights(two.get_weights())
    perm = _permutation_mask(np.arange(7))[None].repeat(3, 0)
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
    x = xlnet_inputs(perm=np.stack([_permutation_mask(z) for z in orders]), seed=seed)
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


# === The pretrainer and its memory ===


def _pretrainer(mem_len=4, reuse_len=3, batch=3, **changes):
    config = ODD.replace(mem_len=mem_len, reuse_len=reuse_len, **changes)
    backbone = randomize(XLNetBackbone.from_config_object(config, two_stream=True))
    return XLNetPretrainer(backbone, max_batch_size=batch)


def test_second_batch_attends_to_the_first_batchs_memory():
    model = _pretrainer()
    first, second = xlnet_inputs(predict=2, seed=1), xlnet_inputs(predict=2, seed=2)
    for x in (first, second):
        del x["input_mask"]  # the pretrainer's default: no padding
    model(first)
    state = np.asarray(model.mems_state)
    manual = model.backbone({**first, "input_mask": np.zeros((3, 7), "float32"),
                             "mems": np.zeros((3, 2, 4, 12), "float32")})
    np.testing.assert_allclose(state, manual["new_mems"], atol=1e-6)  # zeros at first
    carried = np.asarray(model(second))
    out = model.backbone({**second, "input_mask": np.zeros((3, 7), "float32"), "mems": state})
    expected = np.asarray(model.backbone.word_embedding(out["query_output"], reverse=True)
                          ) + np.asarray(model.lm_bias)
    np.testing.assert_allclose(carried, expected, atol=1e-5, rtol=0)
    model.reset_states()
    assert not np.asarray(model.mems_state).any()
    assert np.abs(np.asarray(model(second)) - carried).max() > 1e-2
    # A smaller batch reads and writes rows [:2] only.
    before = np.asarray(model.mems_state)
    model({k: v[:2] for k, v in first.items()})
    np.testing.assert_array_equal(np.asarray(model.mems_state)[2], before[2])
    with pytest.raises(ValueError, match="max_batch_size=3 rows. Received a batch of 4"):
        model(xlnet_inputs(batch=4, predict=2))


def test_fit_carries_memory_from_batch_to_batch():
    """Two fit steps at learning rate 0: the kept memory is what two
    chained backbone calls give, and the loss is the weighted mean CE."""
    model = _pretrainer()
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    batches = [xlnet_inputs(predict=2, seed=s) for s in (1, 2)]
    x = {k: np.concatenate([b[k] for b in batches]) for k in ("input_word_ids",
                                                                "input_type_ids", "perm_mask",
                                                                "target_mapping")}
    target = np.random.default_rng(0).integers(0, 99, (6, 2)).astype("int32")
    weight = np.array([[1, 1], [1, 0], [1, 1]] * 2, "float32")
    history = model.fit(x, target, sample_weight=weight, batch_size=3, shuffle=False, verbose=0)
    memory = np.zeros((3, 2, 4, 12), "float32")
    losses = []
    for i, b in enumerate(batches):
        out = model.backbone({**b, "mems": memory})
        logits = (np.asarray(model.backbone.word_embedding(out["query_output"], reverse=True))
                  + np.asarray(model.lm_bias)).astype("float64")
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        picked = np.take_along_axis(log_probs, target[3 * i:3 * i + 3, :, None], -1)[..., 0]
        w = weight[3 * i:3 * i + 3]
        losses.append(-(picked * w).sum() / w.sum())
        memory = np.asarray(out["new_mems"])
    np.testing.assert_allclose(np.asarray(model.mems_state), memory, atol=1e-5)
    np.testing.assert_allclose(history.history["loss"][0], np.mean(losses), rtol=1e-5)


@pytest.mark.slow(seconds=40)
def test_memory_is_per_replica_under_mirrored_strategy():
    """MirroredStrategy over 2 logical CPUs, global batch 4: each replica
    carries its own 2 rows of memory through fit."""
    tests = os.path.join(ROOT, "tests")
    script = f"import sys\nsys.path.insert(0, {tests!r})\n" + textwrap.dedent("""
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        import numpy as np
        import test_xlnet as t
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        strategy = tf.distribute.MirroredStrategy(devices)
        with strategy.scope():
            model = t._pretrainer(batch=2)
            model.compile(optimizer=keras.optimizers.SGD(0.0))
        batches = [t.xlnet_inputs(batch=4, predict=2, seed=s) for s in (1, 2)]
        names = ("input_word_ids", "input_type_ids", "perm_mask", "target_mapping")
        x = {k: np.concatenate([b[k] for b in batches]) for k in names}
        data = tf.data.Dataset.from_tensor_slices((x, np.zeros((8, 2), "int32"))).batch(4)
        model.fit(data, verbose=0)
        replicas = strategy.experimental_local_results(model.mems_state._value)
        memory = np.zeros((4, 2, 4, 12), "float32")
        for b in batches:
            memory = np.asarray(model.backbone({**b, "mems": memory})["new_mems"])
        for i, kept in enumerate(replicas):
            np.testing.assert_allclose(kept.numpy(), memory[2 * i:2 * i + 2], atol=1e-5)
        print("replicas", len(replicas), "ok")
    """)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    result = run_python(["-c", script], ROOT, env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "replicas 2 ok" in result.stdout


@pytest.mark.slow(seconds=60)
def test_pretrainer_overfits_two_documents():
    """The debug size (6 layers, d_model 32, relu) on two repeated
    documents with their permutations (seq 16, reuse 8, mem_len 8, 3
    predictions each): the permutation LM loss goes near 0."""
    config = xlnet_preset("xlnet_debug").replace(vocab_size=40, mem_len=8, reuse_len=8)
    model = XLNetPretrainer(XLNetBackbone.from_config_object(config, two_stream=True),
                            max_batch_size=2)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 40, (2, 16)).astype("int32")
    perm = np.stack([_permutation_mask(np.concatenate([rng.permutation(8), 8 + rng.permutation(8)]))
                     for _ in range(2)])
    perm[:, :8, 8:] = 1.0  # the reused half never sees the rest (as the original)
    positions = np.stack([np.sort(rng.choice(16, 3, replace=False)) for _ in range(2)])
    x = {"input_word_ids": ids, "input_type_ids": np.zeros((2, 16), "int32"), "perm_mask": perm,
         "target_mapping": np.eye(16, dtype="float32")[positions]}
    target = np.take_along_axis(ids, positions, 1)
    weight = np.ones((2, 3), "float32")
    start = model.evaluate(x, target, sample_weight=weight, verbose=0)[0]
    history = model.fit(  # 50 steps per epoch: few epoch overheads
        {k: np.concatenate([v] * 50) for k, v in x.items()}, np.concatenate([target] * 50),
        sample_weight=np.concatenate([weight] * 50), batch_size=2, epochs=3, shuffle=False,
        verbose=0)
    print(f"permutation LM loss: {start:.3f} before, {history.history['loss']} per epoch")
    assert start > 3.0  # it starts near log(40)
    assert history.history["loss"][-1] < 0.05, history.history["loss"]


def test_pretrainer_fit_traces_the_model_once(monkeypatch):
    """Keras builds the compiled loss and metrics from a trace of the whole
    model made before the step's own; the pretrainer says what it returns
    instead (`_symbolic_outputs`), so `fit` traces it once, in its step,
    and still has its loss and metric."""
    traced = []
    call = XLNetPretrainer.call
    monkeypatch.setattr(XLNetPretrainer, "call", lambda self, inputs, training=None: (
        traced.append(1) or call(self, inputs, training=training)))
    config = xlnet_preset("xlnet_debug").replace(vocab_size=40, mem_len=8, reuse_len=8)
    model = XLNetPretrainer(XLNetBackbone.from_config_object(config, two_stream=True),
                            max_batch_size=2)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    perm = np.zeros((2, 8, 8), "float32")
    x = {"input_word_ids": np.full((2, 8), 5, "int32"), "input_type_ids": np.zeros((2, 8), "int32"),
         "perm_mask": perm, "target_mapping": np.eye(8, dtype="float32")[[[1, 4], [2, 6]]]}
    history = model.fit(x, np.full((2, 2), 5, "int32"), sample_weight=np.ones((2, 2), "float32"),
                        batch_size=2, verbose=0).history
    assert len(traced) == 1
    assert set(history) == {"loss", "plm_accuracy"} and np.isfinite(history["loss"][0])


# === House checks ===


def test_config_round_trip_and_keras_file(tmp_path):
    backbone = randomize(XLNetBackbone.from_config_object(
        ODD.replace(dropout=0.2, mem_len=3, reuse_len=2, untie_r=False), two_stream=True))
    rebuilt = assert_config_round_trip(backbone)
    assert rebuilt.xlnet_config == backbone.xlnet_config and rebuilt.two_stream
    x = xlnet_inputs(predict=2, mems=np.ones((3, 2, 3, 12)))
    loaded = assert_keras_save_load_equal(backbone, x, tmp_path)
    assert isinstance(loaded, XLNetBackbone)
    model = XLNetPretrainer(backbone, max_batch_size=3)
    x = xlnet_inputs(predict=2)
    del x["input_mask"]
    model(x)  # the memory advanced: it is saved too
    assert np.asarray(model.mems_state).any()
    path = str(tmp_path / "pretrainer.keras")
    model.save(path)
    again = keras.saving.load_model(path)
    np.testing.assert_array_equal(np.asarray(again.mems_state), np.asarray(model.mems_state))
    np.testing.assert_array_equal(np.asarray(again(x)), np.asarray(model(x)))


def test_mixed_bfloat16_keeps_softmax_norms_and_logits_float32():
    backbone = XLNetBackbone.from_config_object(ODD.replace(n_layer=1), two_stream=True,
                                                dtype="mixed_bfloat16")
    model = XLNetPretrainer(backbone)
    x = xlnet_inputs(predict=2)
    out = backbone(x)
    assert keras.backend.standardize_dtype(out["sequence_output"].dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(model(x).dtype) == "float32"
    block = backbone.blocks[0]
    assert block.attention_layer_norm.compute_dtype == "float32"
    assert block.output_layer_norm.compute_dtype == "float32"
    assert backbone.attention_masks.compute_dtype == "float32"
    assert block.rel_attn.compute_dtype == "bfloat16"
    assert all(w.dtype == "float32" for w in model.weights)
    model.compile(optimizer="adam")
    history = model.fit(x, np.ones((3, 2), "int32"), verbose=0)  # one step: gradients flow
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.parametrize("edit, message", [
    (lambda x: x.pop("input_type_ids"), 'Missing data for input "input_type_ids"'),
    (lambda x: x.update(input_mask=2 * np.ones((3, 7), "float32")), "only 0 and 1"),
    (lambda x: x.update(input_word_ids=x["input_word_ids"] + 99), "outside \\[0, 99\\)"),
    (lambda x: x["target_mapping"].__setitem__((0, 0, 1), 1.0), "at most one position"),
    (lambda x: x.update(perm_mask=np.zeros((3, 7, 6), "float32")), "`perm_mask` must have"),
    (lambda x: x.update(mems=np.zeros((3, 3, 2, 12), "float32")),
     r"'mems'.*expected shape=\(None, 2, None, 12\)"),
])
def test_bad_inputs_are_named(edit, message):
    model = XLNetBackbone.from_config_object(ODD.replace(mem_len=2), two_stream=True)
    x = xlnet_inputs(predict=2, mems=np.zeros((3, 2, 2, 12)))
    x["target_mapping"][0, 0] = 0.0
    x["target_mapping"][0, 0, 0] = 1.0
    edit(x)
    with pytest.raises(ValueError, match=message):
        model(x)


def test_bi_data_needs_an_even_batch():
    model = XLNetBackbone.from_config_object(ODD.replace(bi_data=True))
    with pytest.raises(ValueError, match="batch size must be even. Received a batch of 3"):
        model(xlnet_inputs())
    assert model(xlnet_inputs(batch=4))["sequence_output"].shape == (4, 7, 12)


def test_pretrainer_rejects_what_it_cannot_use():
    with pytest.raises(ValueError, match="two_stream=True"):
        XLNetPretrainer(XLNetBackbone.from_config_object(ODD))
    with pytest.raises(ValueError, match="max_batch_size=None"):
        XLNetPretrainer(XLNetBackbone.from_config_object(ODD.replace(mem_len=2), two_stream=True))
    model = XLNetPretrainer(XLNetBackbone.from_config_object(ODD, two_stream=True))
    with pytest.raises(ValueError, match="Received: \\['input_word_ids'\\]"):
        model({"input_word_ids": np.zeros((3, 7), "int32")})


def test_released_folder_layout_is_refused_by_name(tmp_path):
    """A missing file is named (the loader reads the folder strictly)."""
    folder = tmp_path / "empty"
    folder.mkdir()
    shutil.copy(os.path.join(GOLDEN, "config.json"), folder / "config.json")
    with pytest.raises(ValueError, match="No model.safetensors"):
        load_xlnet_checkpoint(str(folder))


def test_bert_loader_points_an_xlnet_folder_to_its_loader():
    from keras_bert_impl.bert.load_backbone import load_backbone

    with pytest.raises(ValueError, match="XLNet checkpoint.*load_xlnet_checkpoint"):
        load_backbone(GOLDEN)


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
