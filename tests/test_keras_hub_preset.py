"""keras-hub presets both ways, against keras-hub itself: BERT backbone,
BERT masked LM, XLNet backbone, the vocabulary, and the bad inputs.

keras-hub is imported inside the fixture and tests, not at the top: it
takes seconds, which every worker would pay while collecting the suite.
"""

import json
import os
import shutil

import numpy as np
import pytest

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertMaskedLMPretrainer
from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint
from keras_bert_impl.bert.keras_hub_preset import keras_hub_preset_vocab
from keras_bert_impl.bert.keras_hub_preset import load_keras_hub_preset
from keras_bert_impl.bert.keras_hub_preset import save_keras_hub_preset
from keras_bert_impl.xlnet import XLNetBackbone
from keras_bert_impl.xlnet import load_keras_hub_xlnet_preset
from keras_bert_impl.xlnet import save_keras_hub_xlnet_preset

TOL = 1e-5
# Odd sizes (FFN 48, not 4H; three segment types) so that swapped axes or a
# dropped setting fail loudly.
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
          "play", "##ing", "##s", ".", ","] + [f"w{i}" for i in range(102)])  # 117 tokens
BERT = dict(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=32,
            intermediate_dim=48, max_sequence_length=24, num_segments=3)
XLNET = dict(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=32,
             intermediate_dim=48, dropout=0.0)


def randomize(model, seed):
    """Every weight random (LayerNorm scales around 1): a mapping that
    swaps two tensors, or leaves one at its initial value, shows. Scale
    0.2 keeps logits below ~5, where float32 round-off is ~2e-6."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        value = rng.normal(0.0, 0.2, w.shape).astype("float32")
        w.assign(value + 1.0 if w.path.endswith("gamma") else value)
    return model


def bert_inputs():
    """Row 0 padded at the end; segments 0, 1 and 2."""
    rng = np.random.default_rng(7)
    ids = rng.integers(5, len(VOCAB), (3, 11)).astype("int32")
    segments = np.zeros_like(ids)
    segments[:, 6:] = 1
    segments[2, 9:] = 2
    mask = np.ones_like(ids)
    mask[0, 8:] = 0
    ours = {"input_word_ids": ids, "input_type_ids": segments, "input_mask": mask}
    hub = {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}
    return ours, hub


def max_diff(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """Random keras-hub models and the presets keras-hub writes of them."""
    import keras_hub

    root = tmp_path_factory.mktemp("keras_hub")
    vocab_file = str(root / "vocab.txt")
    with open(vocab_file, "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=True)
    bert = keras_hub.models.BertBackbone(**BERT, dtype="float32")
    masked_lm = keras_hub.models.BertMaskedLM(bert, preprocessor=keras_hub.models.
                                              BertMaskedLMPreprocessor(tokenizer))
    randomize(masked_lm, seed=1)  # the backbone and the head
    bert.save_to_preset(str(root / "bert"))
    tokenizer.save_to_preset(str(root / "bert"))
    masked_lm.save_to_preset(str(root / "masked_lm"))
    keras_hub.models.BertTextClassifier(bert, num_classes=3, preprocessor=None).save_to_preset(
        str(root / "classifier"))
    xlnet = randomize(keras_hub.models.XLNetBackbone(**XLNET, dtype="float32"), seed=2)
    xlnet.save_to_preset(str(root / "xlnet"))
    return dict(root=root, vocab_file=vocab_file, tokenizer=tokenizer, bert=bert,
                masked_lm=masked_lm, xlnet=xlnet)


@pytest.mark.parametrize("preset", ["bert", "classifier"])
def test_bert_preset_to_ours_equals_keras_hub(presets, preset):
    # A BertTextClassifier task preset gives its backbone.
    ours = load_keras_hub_preset(str(presets["root"] / preset))
    assert type(ours) is BertBackbone
    config = ours.bert_config
    assert (config.vocab_size, config.num_hidden_layers, config.hidden_size,
            config.intermediate_size, config.max_position_embeddings,
            config.type_vocab_size) == (117, 2, 32, 48, 24, 3)
    assert (config.hidden_act, config.layer_norm_eps) == ("gelu_tanh", 1e-12)
    x, hub_x = bert_inputs()
    out, want = ours(x), presets["bert"](hub_x)
    for name in ("sequence_output", "pooled_output"):
        diff = max_diff(out[name], want[name])
        print(f"keras-hub {preset} -> ours, {name}: max abs difference {diff:.1e}")
        assert diff <= TOL, (name, diff)


def test_ours_to_bert_preset_equals_ours(presets, tmp_path):
    import keras_hub

    ours = randomize(BertBackbone(vocab_size=117, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=48,
                                  hidden_act="gelu_tanh", max_position_embeddings=24,
                                  type_vocab_size=3), seed=3)
    folder = str(tmp_path / "preset")
    save_keras_hub_preset(ours, folder, presets["vocab_file"], do_lower_case=True)
    assert sorted(os.listdir(folder)) == ["assets", "config.json", "metadata.json",
                                          "model.weights.h5", "tokenizer.json"]
    assert os.listdir(tmp_path) == ["preset"]  # no temporary folder left beside it
    hub = keras_hub.models.BertBackbone.from_preset(folder)
    x, hub_x = bert_inputs()
    out, got = ours(x), hub(hub_x)
    for name in ("sequence_output", "pooled_output"):
        diff = max_diff(got[name], out[name])
        print(f"ours -> keras-hub, {name}: max abs difference {diff:.1e}")
        assert diff <= TOL, (name, diff)
    tokenizer = keras_hub.models.BertTokenizer.from_preset(folder)
    assert np.asarray(tokenizer("The Cats sat playing.")).tolist() == [5, 6, 12, 7, 10, 11, 13]
    # Written again over itself: the old preset is replaced, nothing left over.
    save_keras_hub_preset(ours, folder, None)
    assert sorted(os.listdir(folder)) == ["config.json", "metadata.json", "model.weights.h5"]
    assert os.listdir(tmp_path) == ["preset"]


def test_masked_lm_preset_gives_pretrainer_with_equal_logits(presets, tmp_path):
    ours = load_keras_hub_preset(str(presets["root"] / "masked_lm"))
    assert type(ours) is BertMaskedLMPretrainer
    # keras-hub's head: exact GELU and epsilon 1e-5, unlike its encoder.
    assert (ours.masked_lm_head.hidden_act, ours.masked_lm_head.layer_norm_eps) == ("gelu", 1e-5)
    x, hub_x = bert_inputs()
    positions = np.array([[1, 3, 7], [0, 5, 10], [4, 4, 9]], "int32")
    logits = ours({**x, "masked_lm_positions": positions})["masked_lm"]
    want = presets["masked_lm"]({**hub_x, "mask_positions": positions})
    diff = max_diff(logits, want)
    print(f"keras-hub -> ours, masked-LM logits: max abs difference {diff:.1e}")
    assert diff <= TOL, diff
    # The original formats have no field for the head's own settings.
    with pytest.raises(ValueError, match="hidden_act='gelu'.*backbone hidden_act='gelu_tanh'"):
        save_hf_checkpoint(ours, str(tmp_path / "hf"))


def _xlnet_rows(ours_out, hub, x):
    """Our batch against keras-hub one row at a time: keras-hub 0.32's
    XLNetBackbone mixes the rows of a batch (its attention mask and
    positions are reshaped where a transpose is meant), so only its
    batch-1 outputs are XLNet's."""
    worst = 0.0
    for i in range(len(x["input_word_ids"])):
        want = hub({"token_ids": x["input_word_ids"][i:i + 1],
                    "segment_ids": x["input_type_ids"][i:i + 1],
                    "padding_mask": 1 - x["input_mask"][i:i + 1].astype("int32")})
        worst = max(worst, max_diff(ours_out["sequence_output"][i:i + 1], want))
    return worst


def _xlnet_inputs():
    x, _ = bert_inputs()
    return {"input_word_ids": x["input_word_ids"], "input_type_ids": np.minimum(
        x["input_type_ids"], 1), "input_mask": (1 - x["input_mask"]).astype("float32")}


def test_xlnet_preset_to_ours_equals_keras_hub(presets):
    ours = load_keras_hub_xlnet_preset(str(presets["root"] / "xlnet"))
    assert type(ours) is XLNetBackbone
    config = ours.xlnet_config
    assert (config.d_model, config.n_layer, config.n_head, config.d_head, config.d_inner,
            config.ff_activation, config.untie_r) == (32, 2, 2, 16, 48, "gelu", True)
    x = _xlnet_inputs()
    diff = _xlnet_rows(ours(x), presets["xlnet"], x)
    print(f"keras-hub -> ours, XLNet sequence_output: max abs difference {diff:.1e}")
    assert diff <= TOL, diff


def test_ours_to_xlnet_preset_equals_ours(tmp_path):
    import keras_hub

    # untie_r=False: the one shared set of biases goes to every keras-hub layer.
    ours = randomize(XLNetBackbone(vocab_size=117, d_model=32, n_layer=2, n_head=2, d_head=16,
                                   d_inner=48, ff_activation="relu", untie_r=False,
                                   dropout=0.0), seed=4)
    folder = str(tmp_path / "xlnet")
    save_keras_hub_xlnet_preset(ours, folder)
    hub = keras_hub.models.XLNetBackbone.from_preset(folder)
    assert hub.activation == "relu"
    x = _xlnet_inputs()
    diff = _xlnet_rows(ours(x), hub, x)
    print(f"ours -> keras-hub, XLNet sequence_output: max abs difference {diff:.1e}")
    assert diff <= TOL, diff


def test_vocabulary_tokenizes_as_keras_hub(presets):
    vocab = keras_hub_preset_vocab(str(presets["root"] / "bert"))
    assert vocab.vocab_file == str(presets["root"] / "bert" / "assets" / "tokenizer" /
                                   "vocabulary.txt")
    assert (vocab.lowercase, vocab.strip_accents) == (True, False)
    ours = BertTokenizer(vocab.vocab_file, do_lower_case=vocab.lowercase)
    text = "The cats, on the mat. Playing w7 w100 zebra"
    want = np.asarray(presets["tokenizer"](text)).tolist()
    assert ours.convert_tokens_to_ids(ours.tokenize(text)) == want
    assert 1 in want  # [UNK] for "zebra": the same unknown-word handling


def test_not_a_preset_is_refused_naming_what_it_holds(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=f"{folder} is not a keras-hub preset: it has no "
                                         "config.json \\(it holds notes.txt\\)"):
        load_keras_hub_preset(str(folder))
    with pytest.raises(ValueError, match="does not exist"):
        load_keras_hub_preset(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="no tokenizer.json.*notes.txt"):
        keras_hub_preset_vocab(str(folder))
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 9}))
    with pytest.raises(ValueError, match="Hugging Face model folder.*load_hf_checkpoint"):
        load_keras_hub_preset(str(folder))


def test_preset_of_another_architecture_is_refused(presets):
    xlnet, bert = str(presets["root"] / "xlnet"), str(presets["root"] / "bert")
    with pytest.raises(ValueError, match=f"{xlnet} holds a keras-hub keras_hub>XLNetBackbone "
                                         "preset.*not keras_hub>BertBackbone.*"
                                         "load_keras_hub_xlnet_preset"):
        load_keras_hub_preset(xlnet)
    with pytest.raises(ValueError, match=f"{bert} holds a keras-hub keras_hub>BertBackbone "
                                         "preset.*load_keras_hub_preset"):
        load_keras_hub_xlnet_preset(bert)


def test_setting_ours_cannot_represent_is_named(presets, tmp_path):
    folder = tmp_path / "bert"
    shutil.copytree(presets["root"] / "bert", folder)
    config = json.loads((folder / "config.json").read_text())
    config["config"]["layer_norm_epsilon"] = 1e-6  # a setting keras-hub 0.32 has not
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="BertBackbone settings ours cannot represent: "
                                         "\\['layer_norm_epsilon'\\]"):
        load_keras_hub_preset(str(folder))


def test_save_refuses_target_that_is_not_a_preset(tmp_path):
    backbone = BertBackbone(vocab_size=117, hidden_size=32, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=48, hidden_act="gelu_tanh")
    target = tmp_path / "data"
    target.mkdir()
    (target / "data.csv").write_text("1,2\n")
    with pytest.raises(ValueError, match=f"{target} exists and is not a keras-hub preset "
                                         "\\(it holds data.csv\\)"):
        save_keras_hub_preset(backbone, str(target), None)
    assert os.listdir(target) == ["data.csv"] and sorted(os.listdir(tmp_path)) == ["data"]
    # A preset with a file of the user's in it is not replaced either.
    preset = tmp_path / "preset"
    save_keras_hub_preset(backbone, str(preset), None)
    (preset / "my_notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="also holds my_notes.txt"):
        save_keras_hub_preset(backbone, str(preset), None)
    assert (preset / "my_notes.txt").read_text() == "keep"


def test_save_refuses_settings_keras_hub_cannot_represent(tmp_path):
    exact = BertBackbone(vocab_size=117, hidden_size=32, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=48, hidden_act="gelu")
    with pytest.raises(ValueError, match="hidden_act='gelu'.*allow_gelu_approximation=True"):
        save_keras_hub_preset(exact, str(tmp_path / "p"), None)
    eps = BertBackbone(vocab_size=117, hidden_size=32, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=48, hidden_act="gelu_tanh",
                       layer_norm_eps=1e-6)
    with pytest.raises(ValueError, match="layer_norm_eps=1e-06"):
        save_keras_hub_preset(eps, str(tmp_path / "p"), None)
    uni = XLNetBackbone(vocab_size=117, d_model=32, n_layer=1, n_head=2, d_head=16,
                        d_inner=48, attn_type="uni")
    with pytest.raises(ValueError, match="attn_type='uni'"):
        save_keras_hub_xlnet_preset(uni, str(tmp_path / "p"))
    with pytest.raises(ValueError, match="Received: XLNetBackbone.*save_keras_hub_xlnet_preset"):
        save_keras_hub_preset(uni, str(tmp_path / "p"), None)
    assert os.listdir(tmp_path) == []  # nothing written


def test_load_backbone_and_finetune_read_a_preset_folder(presets):
    """`load_backbone` (and so `training.finetune --init_checkpoint`) takes
    a keras-hub preset folder as it takes the other formats, its
    vocabulary found inside."""
    from keras_bert_impl.bert.load_backbone import find_vocab_file
    from keras_bert_impl.bert.load_backbone import load_backbone

    folder = str(presets["root"] / "masked_lm")
    backbone = load_backbone(folder)
    assert type(backbone) is BertBackbone
    x, _ = bert_inputs()
    direct = load_keras_hub_preset(folder).backbone(x)["sequence_output"]
    assert max_diff(backbone(x)["sequence_output"], direct) == 0.0
    assert find_vocab_file(folder) == os.path.join(folder, "assets", "tokenizer",
                                                   "vocabulary.txt")


def test_continued_pretraining_from_a_preset(presets, tmp_path):
    """`training.pretrain --init_checkpoint=<keras-hub preset>`: its
    encoder and masked-LM head, vocabulary and casing; the export adds a
    preset keras-hub loads."""
    from training.pretrain import PretrainConfig
    from training.pretrain import make_recipe
    from training.pretraining.continued import save_like_init
    from training.pretraining.continued import with_init_checkpoint

    folder = str(presets["root"] / "masked_lm")
    cfg, init = with_init_checkpoint(PretrainConfig(init_checkpoint=folder, max_seq_length=16,
                                                    ablation="no_nsp"), explicit=set())
    assert cfg.vocab_file == keras_hub_preset_vocab(folder).vocab_file
    model, _ = make_recipe(cfg, init).build_model(117)
    source = load_keras_hub_preset(folder)
    for a, b in zip(model.get_weights(), source.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert save_like_init(init, model, cfg.vocab_file, str(tmp_path)).startswith(
        "keras-hub preset (backbone)")
    x, _ = bert_inputs()
    again = load_keras_hub_preset(str(tmp_path / "keras_hub"))
    assert max_diff(again(x)["sequence_output"], model.backbone(x)["sequence_output"]) <= TOL
