"""GPT's task models against their heads computed by hand on the backbone,
the L3 loss (task loss + lm_coef x the per-sequence LM loss), and a
synthetic task the model learns."""

import keras
import numpy as np
import pytest
from gpt_cases import SPECIAL
from gpt_cases import C
from gpt_cases import S
from gpt_cases import grown_backbone  # noqa: F401 (the `backbone` fixture)
from helpers import run_task_test

from keras_bert_impl.gpt import GptBackbone
from keras_bert_impl.gpt import GptConfig
from keras_bert_impl.gpt import grow_vocabulary
from keras_bert_impl.gpt.gpt_inputs import FineTuningIds
from keras_bert_impl.gpt.gpt_inputs import entailment_inputs
from keras_bert_impl.gpt.gpt_inputs import multiple_choice_inputs
from keras_bert_impl.gpt.gpt_inputs import similarity_inputs
from keras_bert_impl.gpt.gpt_inputs import text_inputs
from keras_bert_impl.gpt.gpt_task_models import GptClassifier
from keras_bert_impl.gpt.gpt_task_models import GptMultipleChoice
from keras_bert_impl.gpt.gpt_task_models import GptTokenTagger


def _random_texts(rng, count, low=1, high=6):
    return [rng.integers(1, 99, rng.integers(low, high)).tolist() for _ in range(count)]


def _xent(logits, labels):
    logits = np.asarray(logits, "float64")
    peak = logits.max(-1, keepdims=True)
    logp = logits - peak - np.log(np.exp(logits - peak).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, np.asarray(labels)[..., None], -1)[..., 0]


def _lm_loss(lm_logits, x):
    """The original's L1: next-token xent masked by M[:, 1:], averaged per row, then over rows."""
    ids = x["input_word_ids"].reshape(-1, x["input_word_ids"].shape[-1])
    mask = x["input_mask"].reshape(ids.shape).astype("float64")
    xent = _xent(np.asarray(lm_logits)[:, :-1], ids[:, 1:])  # (N, S-1)
    per_row = (xent * mask[:, 1:]).sum(1) / mask[:, 1:].sum(1)
    per_token = (xent * mask[:, 1:]).sum() / mask[:, 1:].sum()
    return per_row.mean(), per_token


def test_classifier_reads_the_classify_token(backbone):
    model = GptClassifier(backbone, 3, C)
    rng = np.random.default_rng(0)
    x = text_inputs(_random_texts(rng, 3), SPECIAL, 9)
    logits = np.asarray(model(x, training=False))
    assert logits.shape == (3, 3) and logits.dtype == np.float32
    position = x["input_word_ids"].argmax(1)  # the classify token is the largest id
    hidden = np.asarray(backbone(x, training=False)["sequence_output"])[np.arange(3), position]
    dense = model.output_dense
    np.testing.assert_allclose(logits, hidden @ np.asarray(dense.kernel) + np.asarray(dense.bias),
                               atol=1e-5)
    # After `_classify_`: visible tokens (mask 1) there change nothing.
    after = {k: v.copy() for k, v in x.items()}
    after["input_word_ids"][0, position[0] + 1:] = 7
    after["input_mask"][0] = 1
    np.testing.assert_allclose(np.asarray(model(after, training=False)), logits, atol=1e-6)
    # Before it: a changed token changes the logits of its row only.
    before = {k: v.copy() for k, v in x.items()}
    before["input_word_ids"][1, 1] = before["input_word_ids"][1, 1] % 98 + 1
    changed = np.asarray(model(before, training=False))
    assert np.abs(changed[1] - logits[1]).max() > 1e-4
    np.testing.assert_allclose(changed[[0, 2]], logits[[0, 2]], atol=1e-6)
    # Not the last real token: with text after it, the state read is still `_classify_`'s.
    moved = {k: v.copy() for k, v in x.items()}
    moved["input_word_ids"][2] = [S, 5, C, 6, 7, 8, 9, 10, 11]
    moved["input_mask"][2] = 1
    hidden = np.asarray(backbone(moved, training=False)["sequence_output"])[2, 2]
    np.testing.assert_allclose(np.asarray(model(moved, training=False))[2],
                               hidden @ np.asarray(dense.kernel) + np.asarray(dense.bias),
                               atol=1e-5)


def test_similarity_is_symmetric(backbone):
    rng = np.random.default_rng(1)
    a, b = _random_texts(rng, 3), _random_texts(rng, 3)
    model = GptClassifier(backbone, 2, C, similarity=True)
    model.output_dense.kernel.assign(rng.normal(size=(12, 2)))  # N(0, 1): visible differences
    ab = np.asarray(model(similarity_inputs(a, b, SPECIAL, 12), training=False))
    ba = np.asarray(model(similarity_inputs(b, a, SPECIAL, 12), training=False))
    assert ab.shape == (3, 2)
    np.testing.assert_allclose(ab, ba, rtol=1e-6, atol=1e-7)
    # The two orders' `_classify_` states are added before the Dense layer.
    x = similarity_inputs(a, b, SPECIAL, 12)
    rows = {k: v.reshape(6, 12) for k, v in x.items()}
    hidden = np.asarray(backbone(rows, training=False)["sequence_output"])
    states = hidden[np.arange(6), rows["input_word_ids"].argmax(1)].reshape(3, 2, 12).sum(1)
    dense = model.output_dense
    np.testing.assert_allclose(ab, states @ np.asarray(dense.kernel) + np.asarray(dense.bias),
                               atol=1e-5)
    # One order only (entailment) is not symmetric: the check above can fail.
    entail = GptClassifier(backbone, 2, C)
    entail.output_dense.kernel.assign(model.output_dense.kernel)
    one = np.asarray(entail(entailment_inputs(a, b, SPECIAL, 12), training=False))
    other = np.asarray(entail(entailment_inputs(b, a, SPECIAL, 12), training=False))
    assert np.abs(one - other).max() > 1e-3
    with pytest.raises(ValueError, match=r"expected shape=\(None, 2, None\)"):
        model(multiple_choice_inputs(a, [[t, t, t] for t in b], SPECIAL, 12))


def _padded_batch(rng, backbone=None):
    """Rows of very different lengths, so per-row and per-token averages differ
    (more so once the token table is N(0, 1): far from uniform predictions)."""
    if backbone is not None:
        backbone.token_embedding.embeddings.assign(rng.normal(size=(102, 12)))
    texts = [rng.integers(1, 99, 1).tolist(), rng.integers(1, 99, 9).tolist(),
             rng.integers(1, 99, 4).tolist()]
    return text_inputs(texts, SPECIAL, 12)


def test_lm_coef_zero_is_exactly_the_classification_loss(backbone):
    model = GptClassifier(backbone, 3, C, lm_coef=0.0)
    x, y = _padded_batch(np.random.default_rng(2)), np.array([0, 2, 1], "int32")
    model.compile()
    result = model.evaluate(x, y, verbose=0, return_dict=True)
    logits = np.asarray(model(x, training=False))
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, logits)
    assert result["loss"] == float(keras_loss)
    np.testing.assert_allclose(result["loss"], _xent(logits, y).mean(), rtol=1e-6)
    assert "lm_loss" not in result and not model.losses


@pytest.mark.parametrize("num_classes", [3, 1])
def test_lm_coef_adds_the_per_sequence_lm_loss(backbone, num_classes):
    model = GptClassifier(backbone, num_classes, C)  # lm_coef 0.5 by default
    x = _padded_batch(np.random.default_rng(3), backbone)
    y = np.array([0, 2, 1], "int32") if num_classes > 1 else np.array([0.5, 2, -1], "float32")
    model.compile()
    result = model.evaluate(x, y, verbose=0, return_dict=True)
    logits = np.asarray(model(x, training=False))
    task_loss = _xent(logits, y).mean() if num_classes > 1 else ((logits - y) ** 2).mean()
    lm_loss, per_token = _lm_loss(backbone(x, training=False)["lm_logits"], x)
    assert abs(lm_loss - per_token) > 0.1  # the test tells the two averages apart
    np.testing.assert_allclose(result["lm_loss"], lm_loss, rtol=1e-5)
    np.testing.assert_allclose(result["loss"], task_loss + 0.5 * lm_loss, rtol=1e-5)


def test_multiple_choice_scores_each_choice_and_averages_lm_over_rows(backbone, tmp_path):
    model = GptMultipleChoice(backbone, C, lm_coef=0.25)
    rng = np.random.default_rng(4)
    x = multiple_choice_inputs(_random_texts(rng, 3), [_random_texts(rng, 2, 1, 8)
                                                       for _ in range(3)], SPECIAL, 13)
    logits = np.asarray(model(x, training=False))
    assert logits.shape == (3, 2)
    rows = {k: v.reshape(6, 13) for k, v in x.items()}
    hidden = np.asarray(backbone(rows, training=False)["sequence_output"])
    states = hidden[np.arange(6), rows["input_word_ids"].argmax(1)]
    dense = model.output_dense
    expected = states @ np.asarray(dense.kernel) + np.asarray(dense.bias)
    np.testing.assert_allclose(logits, expected.reshape(3, 2), atol=1e-5)
    y = np.array([1, 0, 1], "int32")
    model.compile()
    result = model.evaluate(x, y, verbose=0, return_dict=True)
    lm_loss, _ = _lm_loss(backbone(rows, training=False)["lm_logits"], rows)
    np.testing.assert_allclose(result["loss"], _xent(logits, y).mean() + 0.25 * lm_loss,
                               rtol=1e-5)
    # As the original, one dropout mask per example, shared by its choices.
    same = np.broadcast_to(np.ones((1, 1, 12), "float32"), (3, 2, 12))
    dropped = np.asarray(model.output_dropout(same, training=True))
    np.testing.assert_array_equal(dropped[:, 0], dropped[:, 1])
    assert (dropped == 0).any()
    run_task_test(model, x, (3, 2), tmp_path)


def test_token_tagger(backbone, tmp_path):
    model = GptTokenTagger(backbone, num_labels=5, lm_coef=0.0)
    x = _padded_batch(np.random.default_rng(5))
    logits = np.asarray(model(x, training=False))
    assert logits.shape == (3, 12, 5) and logits.dtype == np.float32
    sequence = np.asarray(backbone(x, training=False)["sequence_output"])
    dense = model.output_dense
    np.testing.assert_allclose(logits, sequence @ np.asarray(dense.kernel)
                               + np.asarray(dense.bias), atol=1e-5)
    y = np.random.default_rng(6).integers(0, 5, (3, 12)).astype("int32")
    weights = x["input_mask"].astype("float32")
    model.compile()
    result = model.evaluate(x, y, sample_weight=weights, verbose=0, return_dict=True)
    expected = (_xent(logits, y) * weights).sum() / weights.sum()
    np.testing.assert_allclose(result["loss"], expected, rtol=1e-5)
    run_task_test(model, x, (3, 12, 5), tmp_path)


@pytest.mark.parametrize("similarity", [False, True])
def test_classifier_config_and_save_load(backbone, similarity, tmp_path):
    model = GptClassifier(backbone, 2, C, similarity=similarity, dropout=0.2, lm_coef=0.3)
    rng = np.random.default_rng(7)
    pack = similarity_inputs if similarity else entailment_inputs
    x = pack(_random_texts(rng, 3), _random_texts(rng, 3), SPECIAL, 11)
    _, rebuilt, loaded = run_task_test(model, x, (3, 2), tmp_path)
    assert (rebuilt.similarity, rebuilt.dropout, rebuilt.lm_coef) == (similarity, 0.2, 0.3)
    assert loaded.classify_id == C and loaded.similarity == similarity


def test_model_errors(backbone):
    with pytest.raises(ValueError, match="classify_id"):
        GptClassifier(backbone, 2, classify_id=102)
    with pytest.raises(ValueError, match="lm_coef"):
        GptClassifier(backbone, 2, C, lm_coef=-0.5)
    with pytest.raises(ValueError, match="num_classes"):
        GptClassifier(backbone, 0, C)
    with pytest.raises(ValueError, match="rank 3"):
        GptMultipleChoice(backbone, C)(text_inputs([[1]], SPECIAL, 4))


def test_mixed_precision_logits_are_float32(backbone):
    keras.config.set_dtype_policy("mixed_bfloat16")
    grown = grow_vocabulary(GptBackbone.from_config_object(
        backbone.gpt_config.replace(vocab_size=99), dtype="mixed_bfloat16"), 3)
    model = GptClassifier(grown, 2, C, similarity=True)
    x = similarity_inputs([[1, 2]], [[3]], SPECIAL, 8)
    assert keras.backend.standardize_dtype(model(x).dtype) == "float32"
    model.compile()
    assert np.isfinite(model.evaluate(x, np.array([1], "int32"), verbose=0)).all()


def test_weight_decay_on_matrices_only(backbone):
    """The original's `l2` decays every matrix (`len(shape) > 1`) and no vector."""
    from training.run.optimization import OptimizerConfig
    from training.run.optimization import create_optimizer

    model = GptClassifier(backbone, 2, C)
    optimizer = create_optimizer(OptimizerConfig(epsilon=1e-8), total_steps=10)
    optimizer.build(model.trainable_variables)
    decayed = {v.path: optimizer._use_weight_decay(v) for v in model.trainable_variables}
    matrices = {v.path: len(v.shape) > 1 for v in model.trainable_variables}
    assert decayed == matrices and sum(matrices.values()) > 5


def test_two_choice_task_reaches_full_training_accuracy():
    """2 layers, d=64, 2 heads, n_ctx 32: the right ending repeats the context's
    first token; 100% training accuracy."""
    config = GptConfig(vocab_size=40, n_positions=32, n_embd=64, n_layer=2, n_head=2)
    backbone = grow_vocabulary(GptBackbone.from_config_object(config), 3)
    special = FineTuningIds.appended_to(40)
    rng = np.random.default_rng(8)
    contexts, choices, labels = [], [], []
    for _ in range(48):
        key, other = rng.choice(np.arange(1, 40), 2, replace=False)
        context = [int(key)] + rng.integers(1, 40, 4).tolist()
        right, wrong = [int(key)] + rng.integers(1, 40, 2).tolist(), [int(other)] + rng.integers(
            1, 40, 2).tolist()
        label = int(rng.integers(0, 2))
        contexts.append(context)
        choices.append([right, wrong] if label == 0 else [wrong, right])
        labels.append(label)
    x = multiple_choice_inputs(contexts, choices, special, 12)
    y = np.array(labels, "int32")
    model = GptMultipleChoice(backbone, special.classify)
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    for rounds in range(1, 9):  # 10 epochs at a time, until every example is right
        history = model.fit(x, y, batch_size=16, epochs=10, verbose=0).history
        accuracy = (np.asarray(model.predict(x, batch_size=48, verbose=0)).argmax(-1) == y).mean()
        print(f"after {10 * rounds} epochs: training accuracy {accuracy:.3f}")
        if accuracy == 1.0:
            break
    assert accuracy == 1.0
    assert history["lm_loss"][-1] < history["lm_loss"][0]  # the auxiliary LM learns too
