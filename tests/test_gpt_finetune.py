"""GPT fine-tuning: input transformations, task models, the L3 loss, the entry point.

Over 400 lines: GPT's side of fine-tuning, in one file as each family's is
(`test_elmo_finetune.py`, `test_xlnet_finetune.py`): the input transformations,
the task models and the L3 loss (on the `backbone` fixture), and the entry
point (`training/gpt/finetune.py`).
"""

import csv
import json
import os

import keras
import numpy as np
import pytest
from helpers import assert_config_round_trip
from helpers import assert_keras_save_load_equal

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

DATA = os.path.join(os.path.dirname(__file__), "data")
SPECIAL = FineTuningIds.appended_to(99)  # start 99, delimiter 100, classify 101
S, D, C = SPECIAL.start, SPECIAL.delimiter, SPECIAL.classify


@pytest.fixture
def backbone():
    """Odd sizes: vocab 99 (+3 fine-tuning tokens), hidden 12, 3 heads, 2 layers."""
    config = GptConfig(vocab_size=99, n_positions=16, n_embd=12, n_layer=2, n_head=3)
    return grow_vocabulary(GptBackbone.from_config_object(config), 3)


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


# --- Input transformations -------------------------------------------------------------


def test_layouts_are_the_papers():
    x = text_inputs([[5, 6], [7]], SPECIAL, 5)
    np.testing.assert_array_equal(x["input_word_ids"], [[S, 5, 6, C, 0], [S, 7, C, 0, 0]])
    np.testing.assert_array_equal(x["input_mask"], [[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
    assert {a.dtype for a in x.values()} == {np.dtype("int32")}

    x = entailment_inputs([[5, 6]], [[7]], SPECIAL, 7)
    np.testing.assert_array_equal(x["input_word_ids"], [[S, 5, 6, D, 7, C, 0]])
    np.testing.assert_array_equal(x["input_mask"], [[1, 1, 1, 1, 1, 1, 0]])

    x = similarity_inputs([[5, 6], [8]], [[7], [9, 10]], SPECIAL, 6)
    assert x["input_word_ids"].shape == (2, 2, 6) == x["input_mask"].shape
    np.testing.assert_array_equal(x["input_word_ids"], [
        [[S, 5, 6, D, 7, C], [S, 7, D, 5, 6, C]],
        [[S, 8, D, 9, 10, C], [S, 9, 10, D, 8, C]]])
    np.testing.assert_array_equal(x["input_mask"], np.ones((2, 2, 6)))

    x = multiple_choice_inputs([[5], [6, 7]], [[[8], [9, 10], [11]], [[12], [13], [14]]],
                               SPECIAL, 7)
    assert x["input_word_ids"].shape == (2, 3, 7)
    np.testing.assert_array_equal(x["input_word_ids"][0], [
        [S, 5, D, 8, C, 0, 0], [S, 5, D, 9, 10, C, 0], [S, 5, D, 11, C, 0, 0]])
    np.testing.assert_array_equal(x["input_word_ids"][1, 2], [S, 6, 7, D, 14, C, 0])
    np.testing.assert_array_equal(x["input_mask"][0, 1], [1, 1, 1, 1, 1, 1, 0])


def test_truncation_cuts_the_longer_part_and_keeps_the_classify_token():
    x = text_inputs([list(range(1, 20))], SPECIAL, 6)
    np.testing.assert_array_equal(x["input_word_ids"], [[S, 1, 2, 3, 4, C]])
    a, b = list(range(1, 11)), [50, 51]
    # Room for 5 of 12: the long part is cut from its end down to 3, the short kept.
    x = entailment_inputs([a], [b], SPECIAL, 8)
    np.testing.assert_array_equal(x["input_word_ids"], [[S, 1, 2, 3, D, 50, 51, C]])
    x = entailment_inputs([b], [a], SPECIAL, 8)
    np.testing.assert_array_equal(x["input_word_ids"], [[S, 50, 51, D, 1, 2, 3, C]])
    x = similarity_inputs([a], [a[::-1]], SPECIAL, 7)  # both long: 2 each
    np.testing.assert_array_equal(x["input_word_ids"][0], [[S, 1, 2, D, 10, 9, C],
                                                           [S, 10, 9, D, 1, 2, C]])
    x = multiple_choice_inputs([a], [[[50], b]], SPECIAL, 8)
    np.testing.assert_array_equal(x["input_word_ids"][0], [[S, 1, 2, 3, 4, D, 50, C],
                                                           [S, 1, 2, 3, D, 50, 51, C]])


def test_input_errors():
    with pytest.raises(ValueError, match="max_seq_length"):
        entailment_inputs([[1]], [[2]], SPECIAL, 2)
    with pytest.raises(ValueError, match="one entry per example"):
        similarity_inputs([[1]], [[2], [3]], SPECIAL, 8)
    with pytest.raises(ValueError, match="same number"):
        multiple_choice_inputs([[1], [2]], [[[3], [4]], [[5]]], SPECIAL, 8)
    with pytest.raises(ValueError, match="integer token ids"):
        text_inputs([["a", "b"]], SPECIAL, 8)
    with pytest.raises(ValueError, match="three different"):
        FineTuningIds(5, 5, 6)


# --- Task models ---------------------------------------------------------------------


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
    assert_keras_save_load_equal(model, x, tmp_path)


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
    assert_keras_save_load_equal(model, x, tmp_path)


@pytest.mark.parametrize("similarity", [False, True])
def test_classifier_config_and_save_load(backbone, similarity, tmp_path):
    model = GptClassifier(backbone, 2, C, similarity=similarity, dropout=0.2, lm_coef=0.3)
    rebuilt = assert_config_round_trip(model)
    assert (rebuilt.similarity, rebuilt.dropout, rebuilt.lm_coef) == (similarity, 0.2, 0.3)
    rng = np.random.default_rng(7)
    pack = similarity_inputs if similarity else entailment_inputs
    x = pack(_random_texts(rng, 3), _random_texts(rng, 3), SPECIAL, 11)
    loaded = assert_keras_save_load_equal(model, x, tmp_path)
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


# --- Synthetic task: the model can learn ---------------------------------------------


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


# --- The entry point ------------------------------------------------------------------


def _mrpc_folder(tmp_path, rows=40):
    """An MRPC-layout folder: paraphrase pairs (label 1) and unrelated pairs (label 0)."""
    rng = np.random.default_rng(9)
    words = ("the cat dog sat ran on a mat park big small red blue quickly slowly man woman "
             "saw ate bread apple house car tree").split()
    folder = tmp_path / "MRPC"
    folder.mkdir()
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    for split, count in (("train", rows), ("dev", 12)):
        lines = [header]
        for i in range(count):
            first = " ".join(rng.choice(words, rng.integers(4, 9)))
            label = i % 2
            second = first if label else " ".join(rng.choice(words, rng.integers(4, 9)))
            lines.append(f"{label}\t{i}\t{i + 1000}\t{first} .\t{second} .\n")
        (folder / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
    (folder / "test.tsv").write_text(
        "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\tthe cat sat .\ta cat sat .\n"
        "1\t3\t4\tthe big car .\tthe man ran .\n", encoding="utf-8")
    return folder


def _bpe_folder(tmp_path, data_dir):
    from keras_bert_impl.gpt.bpe_learner import learn_bpe
    from keras_bert_impl.gpt.bpe_learner import write_bpe_files

    lines = [line for split in ("train", "dev")
             for line in (data_dir / f"{split}.tsv").read_text(encoding="utf-8").splitlines()]
    vocab, merges = learn_bpe(lines, vocab_size=120)
    return write_bpe_files(vocab, merges, str(tmp_path / "bpe"))


def test_finetune_gpt_end_to_end(tmp_path):
    from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
    from training.finetune import FinetuneConfig
    from training.finetune import run

    data_dir = _mrpc_folder(tmp_path)
    vocab_file, merges_file = _bpe_folder(tmp_path, data_dir)
    out = tmp_path / "out"
    summary = run(FinetuneConfig(model="gpt", task="glue/mrpc", data_dir=str(data_dir),
                                 output_dir=str(out), preset="gpt_tiny", vocab_file=vocab_file,
                                 max_seq_length=40, epochs=1, batch_size=8))
    config = summary["config"]
    assert config["merges_file"] == merges_file  # found beside vocab.json
    assert (config["learning_rate"], config["warmup_proportion"], config["lm_coef"]) == (
        6.25e-5, 0.002, 0.5)
    history = summary["history"]
    assert summary["train_rows"] == 40
    assert {"loss", "lm_loss", "accuracy", "dev_f1", "dev_accuracy"} <= set(history)
    assert history["loss"][0] > 0.5 * history["lm_loss"][0]  # L3 = L2 + 0.5 L1
    rows = list(csv.reader(open(out / "dev_predictions.tsv"), delimiter="\t"))
    assert rows[0] == ["guid", "prediction", "label"] and len(rows) == 13
    assert {r[1] for r in rows[1:]} <= {"0", "1"}
    submission = list(csv.reader(open(out / "glue_submission" / "MRPC.tsv"), delimiter="\t"))
    assert submission[0] == ["index", "prediction"] and len(submission) == 3
    assert json.load(open(out / "summary.json"))["history"]["dev_f1"] == history["dev_f1"]
    model = keras.saving.load_model(str(out / "export" / "model.keras"))
    # The SavedModel serves the task logits on the both-orders ids.
    import tensorflow as tf

    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    ids = np.zeros((2, 2, 9), "int32")
    ids[:, :, :5] = [[[5, 7, 9, 11, model.classify_id]] * 2] * 2
    x = {"input_word_ids": ids, "input_mask": (ids > 0).astype("int32")}
    served = serving.signatures["serving_default"](**{k: tf.constant(v) for k, v in x.items()})
    np.testing.assert_allclose(served["logits"].numpy(), model.predict(x, verbose=0), atol=1e-5)
    tokenizer = GptTokenizer(vocab_file, merges_file)
    assert isinstance(model, GptClassifier) and model.similarity  # MRPC: both orders
    assert model.classify_id == tokenizer.classify_token_id == tokenizer.vocab_size + 2
    assert model.backbone.vocab_size == tokenizer.vocab_size + 3


def test_gpt_encodings_of_the_task_readers(tmp_path):
    """SWAG, NER and an entailment GLUE task through `make_task`, with a stand-in tokenizer."""
    from training.finetune import FinetuneConfig
    from training.gpt.finetune import make_gpt_task as make_task

    class Words:
        vocab_size = 50

        def encode(self, text):
            return [sum(map(ord, w)) % 49 + 1 for w in text.lower().split()]

    special = FineTuningIds.appended_to(50)
    cfg = FinetuneConfig(model="gpt", task="swag", data_dir=os.path.join(DATA, "swag"),
                         max_seq_length=24, lm_coef=0.5)
    x, y, _ = make_task(cfg, Words()).train_arrays()
    ids = x["input_word_ids"]
    assert ids.shape[1:] == (4, 24) and len(y) == len(ids)
    assert (ids[..., 0] == special.start).all()
    assert ((ids == special.delimiter).sum(-1) == 1).all()
    assert ((ids == special.classify).sum(-1) == 1).all()

    conll = tmp_path / "conll"
    conll.mkdir()
    (conll / "train.txt").write_text(open(os.path.join(DATA, "conll", "eng_sample.txt")).read())
    task = make_task(FinetuneConfig(model="gpt", task="ner", data_dir=str(conll),
                                    max_seq_length=16, lm_coef=0.5), Words())
    x, y, weights = task.train_arrays()
    assert set(x) == {"input_word_ids", "input_mask"}  # no segments for GPT
    lengths = x["input_mask"].sum(1)
    assert (x["input_word_ids"][:, 0] == special.start).all()
    assert (x["input_word_ids"][np.arange(len(lengths)), lengths - 1] == special.classify).all()
    assert weights.sum() > 0 and isinstance(task.build_model(GptBackbone.from_config_object(
        GptConfig(vocab_size=53, n_positions=16, n_embd=12, n_layer=1, n_head=3))),
        GptTokenTagger)

    rte = tmp_path / "RTE"
    rte.mkdir()
    (rte / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n"
                                   "0\tA man eats .\tSomeone eats .\tentailment\n")
    task = make_task(FinetuneConfig(model="gpt", task="glue/rte", data_dir=str(rte),
                                    max_seq_length=10, lm_coef=0.5), Words())
    x, y, _ = task.train_arrays()
    assert not task.similarity and x["input_word_ids"].shape == (1, 10)
    ids = x["input_word_ids"][0].tolist()
    assert ids[0] == special.start and ids[5] == special.delimiter and ids[9] == special.classify


def test_gpt_backbone_from_checkpoints(backbone, tmp_path):
    """A Hugging Face folder gets the three rows; a fine-tuned `.keras` has them already."""
    from keras_bert_impl.gpt import load_gpt_checkpoint
    from training.finetune import FinetuneConfig
    from training.gpt.finetune import build_gpt_backbone

    folder = os.path.join(os.path.dirname(__file__), "goldens", "gpt_parity")  # vocab 99
    grown = build_gpt_backbone(FinetuneConfig(model="gpt", init_checkpoint=folder), 99)
    original = load_gpt_checkpoint(folder)
    assert grown.vocab_size == 102
    np.testing.assert_array_equal(np.asarray(grown.token_embedding.embeddings)[:99],
                                  np.asarray(original.token_embedding.embeddings))
    path = str(tmp_path / "fine_tuned.keras")
    GptClassifier(backbone, 2, C).save(path)
    again = build_gpt_backbone(FinetuneConfig(model="gpt", init_checkpoint=path), 99)
    assert again.vocab_size == 102
    with pytest.raises(SystemExit, match="has 102 token rows"):
        build_gpt_backbone(FinetuneConfig(model="gpt", init_checkpoint=path), 60)


@pytest.mark.parametrize("changes, message", [
    (dict(model="t5"), "--model='t5' is not one of"),
    (dict(model="gpt", task="squad"), "squad is BERT's only"),
    (dict(model="gpt"), "needs --init_checkpoint"),
    (dict(model="gpt", preset="tiny"), "not a GPT preset"),
    (dict(model="gpt", preset="gpt_tiny"), "No vocab.json"),
    (dict(lm_coef=0.5, preset="tiny"), "are GPT's"),
])
def test_finetune_gpt_refuses_clearly(tmp_path, changes, message):
    from training.finetune import FinetuneConfig
    from training.finetuning.config import resolve

    cfg = FinetuneConfig(**{"task": "glue/rte", "data_dir": str(tmp_path), **changes})
    with pytest.raises(SystemExit, match=message):
        resolve(cfg)


def test_bert_defaults_unchanged(tmp_path):
    from training.finetune import FinetuneConfig
    from training.finetuning.config import resolve

    cfg = resolve(FinetuneConfig(task="glue/rte", data_dir=str(tmp_path), preset="tiny",
                                 vocab_file="vocab.txt"))
    assert (cfg.model, cfg.learning_rate, cfg.warmup_proportion) == ("bert", 5e-5, 0.1)


def test_a_vocabulary_other_than_the_checkpoints_own_is_refused(tmp_path):
    """A same-size vocab.json or merges.txt from another BPE run would give
    every row ids the checkpoint never learned: refused, naming both files;
    the checkpoint's own files, or identical copies, are taken."""
    from training.finetune import FinetuneConfig
    from training.finetuning.config import resolve

    export = tmp_path / "export"
    export.mkdir()
    (export / "causal_lm.keras").write_bytes(b"")
    (export / "vocab.json").write_text('{"a</w>": 0, "b</w>": 1}')
    (export / "merges.txt").write_text("#version: 0.2\na b\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "vocab.json").write_text('{"b</w>": 0, "a</w>": 1}')
    (other / "merges.txt").write_text("#version: 0.2\nb a\n")
    cfg = FinetuneConfig(model="gpt", task="glue/cola", data_dir=str(tmp_path),
                         init_checkpoint=str(export / "causal_lm.keras"))
    assert resolve(cfg).vocab_file == str(export / "vocab.json")
    for field, name in (("vocab_file", "vocab.json"), ("merges_file", "merges.txt")):
        changed = FinetuneConfig(**{**cfg.__dict__, field: str(other / name)})
        with pytest.raises(SystemExit, match=rf"--{field}=.*other/{name} \(sha256 \w{{12}}\) "
                                             rf"is not the {name} of --init_checkpoint="):
            resolve(changed)
        (other / f"copy-{name}").write_bytes((export / name).read_bytes())
        same = FinetuneConfig(**{**cfg.__dict__, "vocab_file": str(export / "vocab.json"),
                                 "merges_file": str(export / "merges.txt"),
                                 field: str(other / f"copy-{name}")})
        assert getattr(resolve(same), field) == str(other / f"copy-{name}")
