"""The XLNet backbone: its config and presets, parameter counts, and the
house checks (config and `.keras` round trips, mixed precision, inputs it
refuses)."""

import json

import keras
import numpy as np
import pytest
from helpers import run_backbone_test
from xlnet_cases import ODD
from xlnet_cases import randomize
from xlnet_cases import xlnet_inputs

from keras_bert_impl.xlnet import XLNetBackbone
from keras_bert_impl.xlnet import XLNetConfig
from keras_bert_impl.xlnet import XLNetPretrainer
from keras_bert_impl.xlnet import xlnet_num_parameters
from keras_bert_impl.xlnet import xlnet_preset


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


def test_config_round_trip_and_keras_file(tmp_path):
    backbone = randomize(XLNetBackbone.from_config_object(
        ODD.replace(dropout=0.2, mem_len=3, reuse_len=2, untie_r=False), two_stream=True))
    x = xlnet_inputs(predict=2, mems=np.ones((3, 2, 3, 12)))
    _, rebuilt, loaded = run_backbone_test(backbone, x, {
        "sequence_output": (3, 7, 12), "query_output": (3, 2, 12), "new_mems": (3, 2, 3, 12)},
        tmp_path)
    assert rebuilt.xlnet_config == backbone.xlnet_config and rebuilt.two_stream
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
