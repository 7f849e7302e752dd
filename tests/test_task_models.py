"""Fine-tuning models: each equals its head computed by hand on the backbone."""

import keras
import numpy as np
import pytest
from conftest import make_inputs
from helpers import run_task_test

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertClassifier
from keras_bert_impl import BertFeatureExtractor
from keras_bert_impl import BertMultipleChoice
from keras_bert_impl import BertQuestionAnswerer
from keras_bert_impl import BertTokenTagger
from keras_bert_impl.bert.bert_feature_extractor import FEATURES


def _dense(layer, x):
    return np.asarray(x) @ np.asarray(layer.kernel) + np.asarray(layer.bias)


def _xent(logits, labels):
    logits = np.asarray(logits, "float64")
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, labels[..., None], -1)[..., 0]


@pytest.mark.parametrize("num_classes", [3, 1])
def test_classifier_is_dense_on_pooled_output(odd_config, num_classes, tmp_path):
    model = BertClassifier(BertBackbone.from_bert_config(odd_config), num_classes)
    x = make_inputs()
    logits = np.asarray(model(x, training=False))
    expected = _dense(model.output_dense, model.backbone(x)["pooled_output"])
    if num_classes == 1:
        expected = expected[:, 0]
    assert logits.shape == expected.shape and logits.dtype == np.float32
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    model.compile(optimizer=keras.optimizers.AdamW(1e-3))
    y = np.array([0, 2, 1], "int32") if num_classes > 1 else np.array([0.5, 2.0, 4.5], "float32")
    history = model.fit(x, y, epochs=3, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    if num_classes > 1:
        assert "accuracy" in history
    loaded = run_task_test(model, x, expected.shape, tmp_path).loaded
    assert loaded.num_classes == num_classes and loaded.dropout == 0.1


def test_fit_traces_the_model_once(odd_config, monkeypatch):
    """Keras builds the compiled loss and metrics from a trace of the whole
    model made before the step's own; ours take the functional model's
    output specs instead (`KerasStrategyFixes._symbolic_build`): `fit`
    traces the model once, in its step, and still has its loss and metric."""
    from keras_bert_impl.bert import bert_task_model

    traced = []
    check = bert_task_model.check_inputs  # the first thing the classifier's call does
    monkeypatch.setattr(bert_task_model, "check_inputs",
                        lambda *args: traced.append(1) or check(*args))
    model = BertClassifier(BertBackbone.from_bert_config(odd_config), 3)
    model.compile(optimizer=keras.optimizers.AdamW(1e-3))
    history = model.fit(make_inputs(), np.array([0, 2, 1], "int32"), batch_size=3,
                        verbose=0).history
    assert len(traced) == 1
    assert set(history) == {"loss", "accuracy"} and np.isfinite(history["loss"][0])


def test_classifier_rejects_zero_classes(odd_config):
    with pytest.raises(ValueError, match="num_classes"):
        BertClassifier(BertBackbone.from_bert_config(odd_config), 0)


def test_question_answerer_logits_and_loss(odd_config, tmp_path):
    model = BertQuestionAnswerer(BertBackbone.from_bert_config(odd_config))
    x = make_inputs()
    out = model(x, training=False)
    both = _dense(model.span_dense, model.backbone(x)["sequence_output"])  # (B, S, 2)
    np.testing.assert_allclose(out["start_logits"], both[..., 0], atol=1e-5)
    np.testing.assert_allclose(out["end_logits"], both[..., 1], atol=1e-5)
    model.compile()
    y = {"start_logits": np.array([1, 0, 3], "int32"), "end_logits": np.array([2, 0, 6], "int32")}
    result = model.evaluate(x, y, verbose=0, return_dict=True)
    # The original: (mean start cross-entropy + mean end cross-entropy) / 2.
    expected = (_xent(out["start_logits"], y["start_logits"]).mean()
                + _xent(out["end_logits"], y["end_logits"]).mean()) / 2
    np.testing.assert_allclose(result["loss"], expected, rtol=1e-5)
    run_task_test(model, x, {"start_logits": (3, 7), "end_logits": (3, 7)}, tmp_path)


def test_token_tagger_loss_is_mean_over_labelled_pieces(odd_config, tmp_path):
    model = BertTokenTagger(BertBackbone.from_bert_config(odd_config), num_labels=5)
    x = make_inputs()
    logits = np.asarray(model(x, training=False))
    expected = _dense(model.output_dense, model.backbone(x)["sequence_output"])
    assert logits.shape == (3, 7, 5)
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    rng = np.random.default_rng(0)
    y = rng.integers(0, 5, (3, 7)).astype("int32")
    weights = (rng.random((3, 7)) < 0.5).astype("float32")  # first pieces only
    weights[0, 0] = 1
    model.compile()
    result = model.evaluate(x, y, sample_weight=weights, verbose=0, return_dict=True)
    xent = _xent(logits, y)
    np.testing.assert_allclose(result["loss"], (xent * weights).sum() / weights.sum(), rtol=1e-5)
    accuracy = ((logits.argmax(-1) == y) * weights).sum() / weights.sum()
    np.testing.assert_allclose(result["accuracy"], accuracy, rtol=1e-6)
    run_task_test(model, x, (3, 7, 5), tmp_path)


@pytest.mark.parametrize("num_choices", [4, 2])
def test_multiple_choice_scores_each_pair(odd_config, num_choices, tmp_path):
    model = BertMultipleChoice(BertBackbone.from_bert_config(odd_config))
    rows = make_inputs(batch=3 * num_choices, seq=6, pad_last=1)
    x = {k: v.reshape(3, num_choices, 6) for k, v in rows.items()}
    logits = np.asarray(model(x, training=False))
    assert logits.shape == (3, num_choices)
    # Choice c of example b is row b * C + c, scored on its own.
    expected = _dense(model.output_dense, model.backbone(rows)["pooled_output"])
    np.testing.assert_allclose(logits, expected.reshape(3, num_choices), atol=1e-5)
    model.compile(optimizer=keras.optimizers.AdamW(1e-3))
    history = model.fit(x, np.array([0, 1, 1], "int32"), epochs=2, verbose=0).history
    assert np.isfinite(history["loss"]).all() and "accuracy" in history
    run_task_test(model, x, (3, num_choices), tmp_path)
    with pytest.raises(ValueError, match="rank 3"):
        model(rows)


def _weight_paths(path):
    import zipfile

    import h5py

    with zipfile.ZipFile(path) as archive, archive.open("model.weights.h5") as f, h5py.File(f) as h5:
        paths = []
        h5.visititems(lambda name, obj: paths.append(name) if isinstance(obj, h5py.Dataset) else None)
    return sorted(paths)


@pytest.mark.parametrize("task", ["classifier", "multiple_choice"])
def test_cls_row_models_load_files_saved_when_they_called_the_backbone_whole(
        odd_config, task, tmp_path, monkeypatch):
    # Until 2026-11 these models called the backbone whole; now its last
    # block computes only [CLS]'s row. Same outputs, and a file saved either
    # way (weights and optimizer slots) loads in the other.
    from keras_bert_impl.bert import bert_classifier
    from keras_bert_impl.bert import bert_multiple_choice

    def build():
        backbone = BertBackbone.from_bert_config(odd_config)
        if task == "classifier":
            return BertClassifier(backbone, 3), make_inputs(), np.array([0, 2, 1], "int32")
        rows = make_inputs(batch=6, seq=6, pad_last=1)
        return (BertMultipleChoice(backbone), {k: v.reshape(3, 2, 6) for k, v in rows.items()},
                np.array([0, 1, 1], "int32"))

    def whole(backbone, inputs):
        return backbone(inputs)["pooled_output"]

    keras.utils.set_random_seed(1)
    with monkeypatch.context() as patch:
        patch.setattr(bert_classifier, "pooled_output", whole)
        patch.setattr(bert_multiple_choice, "pooled_output", whole)
        old, x, y = build()
        assert "encoder_layer" not in str([layer.name for layer in old._operations])
        old.compile(optimizer=keras.optimizers.AdamW(1e-3))
        old.fit(x, y, epochs=2, verbose=0)
        old.save(tmp_path / "old.keras")
    new = keras.saving.load_model(tmp_path / "old.keras")
    assert new.get_layer("bert_backbone") is new.backbone
    assert len(new._operations) > len(old._operations)  # the backbone's layers, not it whole
    assert [v.path for v in new.weights] == [v.path for v in old.weights]
    np.testing.assert_allclose(new(x, training=False), old(x, training=False), atol=1e-5)
    for a, b in zip(new.optimizer.variables, old.optimizer.variables, strict=True):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    new.save(tmp_path / "new.keras")
    assert _weight_paths(tmp_path / "new.keras") == _weight_paths(tmp_path / "old.keras")
    with monkeypatch.context() as patch:
        patch.setattr(bert_classifier, "pooled_output", whole)
        patch.setattr(bert_multiple_choice, "pooled_output", whole)
        back = keras.saving.load_model(tmp_path / "new.keras")
    np.testing.assert_allclose(back(x, training=False), old(x, training=False), atol=1e-5)


@pytest.fixture
def four_layer_config(odd_config):
    return odd_config.replace(num_hidden_layers=4)


@pytest.mark.parametrize("features", FEATURES)
def test_feature_extractor_features(four_layer_config, features):
    backbone = BertBackbone.from_bert_config(four_layer_config)
    model = BertFeatureExtractor(backbone, features)
    x = make_inputs()
    out = np.asarray(model(x, training=True))  # frozen: no dropout even in training
    layers = [np.asarray(h) for h in backbone(x, training=False)["encoder_outputs"]]
    embeddings = np.asarray(backbone.embeddings(
        backbone.word_embedding(x["input_word_ids"]), x["input_type_ids"], training=False))
    expected = {
        "embeddings": embeddings,
        "second_to_last": layers[-2],
        "last": layers[-1],
        "sum_last_four": sum(layers[-4:]),
        "concat_last_four": np.concatenate(layers[-4:], -1),
        # ScalarMix starts at equal weights and scale 1: the mean of all L + 1.
        "weighted_sum_all": np.mean([embeddings] + layers, axis=0),
    }[features]
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, atol=1e-5)
    expected_trainable = 2 if features == "weighted_sum_all" else 0
    assert len(model.trainable_weights) == expected_trainable


def test_feature_extractor_trains_only_the_mix(four_layer_config, tmp_path):
    backbone = BertBackbone.from_bert_config(four_layer_config)
    extractor = BertFeatureExtractor(backbone, "weighted_sum_all")
    inputs = extractor.input
    logits = keras.layers.Dense(5)(extractor(inputs))  # a task layer on top
    model = keras.Model(inputs, logits)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [np.array(w) for w in backbone.weights]
    mix_before = np.array(extractor.scalar_mix.layer_weights)
    x = make_inputs()
    model.fit(x, np.zeros((3, 7), "int32"), epochs=2, verbose=0)
    for a, b in zip(before, backbone.weights):
        np.testing.assert_array_equal(a, np.asarray(b))
    assert not np.array_equal(mix_before, np.asarray(extractor.scalar_mix.layer_weights))
    run_task_test(extractor, x, (3, 7, 12), tmp_path)


def test_feature_extractor_errors(odd_config):
    backbone = BertBackbone.from_bert_config(odd_config)  # 2 layers
    with pytest.raises(ValueError, match="needs 4 hidden layers"):
        BertFeatureExtractor(backbone, "sum_last_four")
    with pytest.raises(ValueError, match="Unknown `features`"):
        BertFeatureExtractor(backbone, "first")
