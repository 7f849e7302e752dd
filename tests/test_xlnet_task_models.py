"""XLNet's task models: their heads against transformers' on a left-padded
batch, padding that changes nothing, the summary of the last position,
config and `.keras` round trips, refusals, mixed precision."""

import os

import keras
import numpy as np
import pytest
from helpers import assert_config_round_trip
from helpers import run_task_test
from xlnet_finetune_cases import NAMES
from xlnet_finetune_cases import PARITY
from xlnet_finetune_cases import SPECIAL
from xlnet_finetune_cases import random_rows

from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
from keras_bert_impl.xlnet.xlnet_checkpoint import load_xlnet_checkpoint
from keras_bert_impl.xlnet.xlnet_config import XLNetConfig
from keras_bert_impl.xlnet.xlnet_inputs import multiple_choice_inputs
from keras_bert_impl.xlnet.xlnet_inputs import text_inputs
from keras_bert_impl.xlnet.xlnet_task_models import XLNetClassifier
from keras_bert_impl.xlnet.xlnet_task_models import XLNetMultipleChoice
from keras_bert_impl.xlnet.xlnet_task_models import XLNetQuestionAnswerer
from keras_bert_impl.xlnet.xlnet_task_models import XLNetSequenceSummary
from keras_bert_impl.xlnet.xlnet_task_models import XLNetTokenTagger

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def parity():
    return dict(np.load(os.path.join(PARITY, "heads.npz")))


@pytest.fixture
def backbone():
    return load_xlnet_checkpoint(PARITY)


def _set_summary(model, parity, head):
    summary = model.sequence_summary.summary
    summary.kernel.assign(parity[f"{head}/sequence_summary.summary.weight"].T)
    summary.bias.assign(parity[f"{head}/sequence_summary.summary.bias"])
    model.output_dense.kernel.assign(parity[f"{head}/logits_proj.weight"].T)
    model.output_dense.bias.assign(parity[f"{head}/logits_proj.bias"])


def test_heads_match_transformers(backbone, parity):
    """XLNetFor{SequenceClassification, MultipleChoice, TokenClassification,
    QuestionAnsweringSimple} on a left-padded batch, eval mode."""
    x = {name: parity[name] for name in NAMES}
    choices = {name: parity["choice_" + name] for name in NAMES}
    real = x["input_mask"] == 0
    errors = {}
    model = XLNetClassifier(backbone, 3)
    _set_summary(model, parity, "classifier")
    errors["classifier"] = np.abs(np.asarray(model(x)) - parity["classifier/logits"]).max()
    model = XLNetClassifier(backbone, 1)
    _set_summary(model, parity, "regressor")
    errors["regressor"] = np.abs(np.asarray(model(x)) - parity["regressor/logits"][:, 0]).max()
    model = XLNetMultipleChoice(backbone)
    _set_summary(model, parity, "multiple_choice")
    errors["multiple_choice"] = np.abs(
        np.asarray(model(choices)) - parity["multiple_choice/logits"]).max()
    model = XLNetTokenTagger(backbone, 5)
    model.output_dense.kernel.assign(parity["tagger/classifier.weight"].T)
    model.output_dense.bias.assign(parity["tagger/classifier.bias"])
    errors["tagger"] = np.abs(np.asarray(model(x)) - parity["tagger/logits"])[real].max()
    model = XLNetQuestionAnswerer(backbone)
    model.span_dense.kernel.assign(parity["span/qa_outputs.weight"].T)
    model.span_dense.bias.assign(parity["span/qa_outputs.bias"])
    out = keras.tree.map_structure(np.asarray, model(x))
    for name in ("start_logits", "end_logits"):
        errors[name] = np.abs(out[name] - parity[f"span/{name}"])[real].max()
        assert (out[name][~real] == -1e30).all()  # padding masked out
    print({k: f"{v:.2e}" for k, v in errors.items()})
    assert max(errors.values()) <= TOLERANCE
    # The logits differ from row to row: the comparison reads every row.
    assert np.ptp(parity["classifier/logits"], axis=0).min() > 1e-2


def test_padding_choices_change_nothing_at_real_positions(backbone, parity):
    """transformers pads segments with 3, we with 4, the original pads ids with
    0 where we use <pad>; more left padding shifts every real token: the
    real positions' outputs stay the same (relative attention, masked padding)."""
    x = {name: parity[name] for name in NAMES}
    real = x["input_mask"] == 0
    tagger = XLNetTokenTagger(backbone, 5)
    tagger.output_dense.kernel.assign(parity["tagger/classifier.weight"].T)
    classifier = XLNetClassifier(backbone, 3)
    _set_summary(classifier, parity, "classifier")  # order-one logits
    reference = np.asarray(tagger(x))[real]
    logits = np.asarray(classifier(x))
    other = {"input_word_ids": np.where(real, x["input_word_ids"], 0),
             "input_type_ids": np.where(real, x["input_type_ids"], 3),
             "input_mask": x["input_mask"]}
    np.testing.assert_allclose(np.asarray(tagger(other))[real], reference, atol=1e-5)
    np.testing.assert_allclose(np.asarray(classifier(other)), logits, atol=1e-5)
    wider = {name: np.pad(v, [(0, 0), (4, 0)], constant_values=(5, 4, 1)[i])
             for i, (name, v) in enumerate(x.items())}
    np.testing.assert_allclose(np.asarray(tagger(wider))[:, 4:][real], reference, atol=1e-5)
    np.testing.assert_allclose(np.asarray(classifier(wider)), logits, atol=1e-5)
    # Segment ids at REAL positions do matter (the check above can fail).
    swapped = dict(x, input_type_ids=np.where(real, 1 - np.minimum(x["input_type_ids"], 1), 4))
    assert np.abs(np.asarray(classifier(swapped)) - logits).max() > 1e-2


def test_summary_reads_the_last_position(backbone):
    """The classifier reads `<cls>` (the last state) only: tokens matter
    through it, and its dropout is the summary's (the training path)."""
    model = XLNetClassifier(backbone, 2, dropout=0.5)
    rng = np.random.default_rng(1)
    x = text_inputs(random_rows(rng, 3, 3), random_rows(rng, 3, 3), SPECIAL, 11)
    sequence = np.asarray(backbone({**x, "input_mask": x["input_mask"].astype("float32")},
                                   training=False)["sequence_output"])
    dense, summary = model.output_dense, model.sequence_summary.summary
    pooled = np.tanh(sequence[:, -1] @ np.asarray(summary.kernel) + np.asarray(summary.bias))
    expected = pooled @ np.asarray(dense.kernel) + np.asarray(dense.bias)
    np.testing.assert_allclose(np.asarray(model(x, training=False)), expected, atol=1e-5)
    dropped = np.asarray(model.sequence_summary(np.asarray(sequence), training=True))
    assert (dropped == 0).mean() > 0.2
    layer = XLNetSequenceSummary(10, 0.2, name="s")
    rebuilt = assert_config_round_trip(layer)
    assert (rebuilt.d_model, rebuilt.dropout) == (10, 0.2)


@pytest.mark.parametrize("kind", ["classifier", "regressor", "choice", "span", "tagger"])
def test_config_round_trip_and_keras_file(kind, tmp_path):
    """Each model rebuilds from its config and reloads from `.keras` to the
    same outputs (the e2e tests below fit every kind)."""
    config = XLNetConfig(vocab_size=99, d_model=12, n_layer=1, n_head=3, d_inner=37)
    backbone = XLNetBackbone.from_config_object(config)
    rng = np.random.default_rng(2)
    x = text_inputs(random_rows(rng, 3, 3), random_rows(rng, 3, 3), SPECIAL, 10)
    model = {"classifier": lambda: XLNetClassifier(backbone, 3, dropout=0.2),
             "regressor": lambda: XLNetClassifier(backbone, 1),
             "choice": lambda: XLNetMultipleChoice(backbone, dropout=0.3),
             "span": lambda: XLNetQuestionAnswerer(backbone),
             "tagger": lambda: XLNetTokenTagger(backbone, 4)}[kind]()
    if kind == "choice":
        x = multiple_choice_inputs(random_rows(rng, 3, 3),
                                   [random_rows(rng, 2, 2) for _ in range(3)], SPECIAL, 10)
    shape = {"classifier": (3, 3), "regressor": (3,), "choice": (3, 2), "tagger": (3, 10, 4),
             "span": {"start_logits": (3, 10), "end_logits": (3, 10)}}[kind]
    run_task_test(model, x, shape, tmp_path)  # the same class, equal `config_names`


def test_task_model_errors(backbone):
    memory = XLNetBackbone.from_config_object(backbone.xlnet_config.replace(mem_len=4))
    with pytest.raises(ValueError, match="mem_len=4"):
        XLNetClassifier(memory, 2)
    two_stream = XLNetBackbone.from_config_object(backbone.xlnet_config, two_stream=True)
    with pytest.raises(ValueError, match="two_stream=True"):
        XLNetQuestionAnswerer(two_stream)
    with pytest.raises(ValueError, match="num_classes"):
        XLNetClassifier(backbone, 0)
    with pytest.raises(ValueError, match="num_labels"):
        XLNetTokenTagger(backbone, 1)
    with pytest.raises(ValueError, match="dropout"):
        XLNetMultipleChoice(backbone, dropout=1.5)
    with pytest.raises(ValueError, match="rank 3"):
        XLNetMultipleChoice(backbone)(text_inputs([[10]], None, SPECIAL, 4))
    with pytest.raises(ValueError, match="input_mask"):
        XLNetClassifier(backbone, 2)({"input_word_ids": np.ones((1, 4), "int32")})


def test_mixed_precision_logits_are_float32():
    keras.config.set_dtype_policy("mixed_bfloat16")
    config = XLNetConfig(vocab_size=99, d_model=12, n_layer=1, n_head=3, d_inner=37)
    backbone = XLNetBackbone.from_config_object(config, dtype="mixed_bfloat16")
    x = text_inputs([[10, 11]], [[12]], SPECIAL, 8)
    for model in (XLNetClassifier(backbone, 2), XLNetQuestionAnswerer(backbone)):
        for out in keras.tree.flatten(model(x)):
            assert keras.backend.standardize_dtype(out.dtype) == "float32"
    model = XLNetClassifier(backbone, 2)
    model.compile()
    assert np.isfinite(model.evaluate(x, np.array([1]), verbose=0)).all()
