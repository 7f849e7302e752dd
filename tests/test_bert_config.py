import json

import pytest
from helpers import skip_random_init

from keras_bert_impl import PRESETS
from keras_bert_impl import BertBackbone
from keras_bert_impl import BertConfig
from keras_bert_impl import num_parameters
from keras_bert_impl import preset


def test_paper_parameter_counts():
    # The paper: BERT-BASE 110M, BERT-LARGE 340M (two significant figures).
    base, large = num_parameters(preset("base")), num_parameters(preset("large"))
    assert base == 109_482_240
    assert large == 335_141_888
    assert round(base, -7) == 110_000_000
    assert round(large, -7) == 340_000_000


@pytest.mark.parametrize("name", ["tiny", "mini", "small", "medium", "base"])
def test_built_model_count_equals_formula(name, monkeypatch):
    skip_random_init(monkeypatch)  # the count does not depend on the values
    backbone = BertBackbone.from_bert_config(preset(name))
    assert backbone.count_params() == num_parameters(preset(name))


def test_built_large_count_equals_formula(monkeypatch):
    skip_random_init(monkeypatch)
    backbone = BertBackbone.from_bert_config(preset("large"))
    assert backbone.count_params() == num_parameters(preset("large"))


def test_presets_shapes():
    expected = {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8),
                "medium": (8, 512, 8), "base": (12, 768, 12), "large": (24, 1024, 16)}
    assert set(PRESETS) == set(expected)
    for name, (layers, hidden, heads) in expected.items():
        config = preset(name)
        assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (
            layers, hidden, heads)
        assert config.intermediate_size == 4 * hidden


def test_google_bert_config_json_loads(tmp_path):
    # The file google-research/bert released with BERT-Base, Uncased.
    google = {
        "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
        "intermediate_size": 3072, "max_position_embeddings": 512,
        "num_attention_heads": 12, "num_hidden_layers": 12, "type_vocab_size": 2,
        "vocab_size": 30522,
    }
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(google))
    config = BertConfig.from_json_file(path)
    assert config == preset("base")
    config.to_json_file(tmp_path / "out.json")
    assert BertConfig.from_json_file(tmp_path / "out.json") == config


def test_unknown_key_is_named(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({"hidden_sise": 768}))
    with pytest.raises(ValueError, match="hidden_sise"):
        BertConfig.from_json_file(path)


def test_heads_must_divide_hidden():
    with pytest.raises(ValueError, match="hidden_size=100.*num_attention_heads=12"):
        BertConfig(hidden_size=100, num_attention_heads=12)


@pytest.mark.parametrize("field,value", [("vocab_size", 0), ("num_hidden_layers", 2.5),
                                         ("hidden_act", "swish"), ("hidden_dropout_prob", 1.0)])
def test_bad_values_are_named(field, value):
    with pytest.raises(ValueError, match=field):
        BertConfig(**{field: value})


def test_hf_activation_names():
    config = BertConfig.from_hf_dict({"hidden_act": "gelu_new", "model_type": "bert"})
    assert config.hidden_act == "gelu_tanh"
    assert BertConfig.from_hf_dict(config.to_hf_dict()) == config
