"""XLNet's Hugging Face checkpoint files (`xlnet_checkpoint`): parity with
transformers on its golden, the round trip of what it writes, and every
file it refuses, by name."""

import json
import os
import shutil

import keras
import numpy as np
import pytest
import safetensors.numpy
from xlnet_cases import ODD
from xlnet_cases import outputs_of
from xlnet_cases import randomize
from xlnet_cases import xlnet_inputs

from keras_bert_impl.xlnet import XLNetBackbone
from keras_bert_impl.xlnet import load_xlnet_checkpoint
from keras_bert_impl.xlnet import load_xlnet_pretrainer
from keras_bert_impl.xlnet import save_xlnet_checkpoint
from keras_bert_impl.xlnet import xlnet_num_parameters

# A random transformers XLNetLMHeadModel and its outputs, made by
# tests/goldens/make_xlnet_parity.py (vocab 99, d_model 12, 3 heads of 4,
# d_inner 37, 2 layers, untie_r, mem_len 5).
GOLDEN = os.path.join(os.path.dirname(__file__), "goldens", "xlnet_parity")
OUTPUTS = os.path.join(GOLDEN, "outputs.npz")
LM = "transformer."  # XLNetLMHeadModel's prefix, as the golden folder spells keys


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
