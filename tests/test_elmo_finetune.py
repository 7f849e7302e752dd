"""ELMo as features: task models on a frozen biLM, their data and the entry point.

Over 400 lines: ELMo's side of fine-tuning, in one file as each family's is
(`test_gpt_finetune.py`, `test_xlnet_finetune.py`): the task models on the
frozen biLM (the `odd_backbone` fixture), bilm-tf's test model as that biLM,
and the entry point (`training/elmo/finetune.py`).
"""

import csv
import json
import os

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import assert_config_round_trip
from helpers import assert_keras_save_load_equal

from keras_bert_impl.elmo import ElmoBackbone
from keras_bert_impl.elmo import ElmoConfig
from keras_bert_impl.elmo import batch_char_ids
from keras_bert_impl.elmo import load_elmo_checkpoint
from keras_bert_impl.elmo import remove_sentence_boundaries
from keras_bert_impl.elmo import save_elmo_checkpoint
from keras_bert_impl.elmo.elmo_task_models import ElmoClassifier
from keras_bert_impl.elmo.elmo_task_models import ElmoPairClassifier
from keras_bert_impl.elmo.elmo_task_models import ElmoTokenTagger
from keras_bert_impl.elmo.elmo_task_models import MaskedMaxPooling
from keras_bert_impl.elmo.elmo_task_models import SentencePairFeatures
from training.finetune import FinetuneConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "data", "bilm_tf")  # vendored: see its README.md

SENTENCES = [["The", "cat", "sat", "."], ["Hi"], ["A", "dog", "ran", "to", "Paris", "!"]]


@pytest.fixture
def odd_backbone():
    """Odd sizes: F=15 filters, P=6 (D=12), U=11, E=5, C=9; dropout 0.3 so that
    a biLM run in training mode would show."""
    config = ElmoConfig(filters=((1, 3), (2, 5), (3, 7)), n_highway=1, projection_dim=6,
                        lstm_dim=11, n_layers=2, char_embedding_dim=5,
                        max_characters_per_token=9, cell_clip=3.0, proj_clip=3.0,
                        use_skip_connections=True, dropout=0.3)
    return ElmoBackbone.from_config_object(config)


def _char_ids(sentences=SENTENCES):
    return batch_char_ids(sentences, 9)  # (3, 8, 9)


def _tagger_batch():
    x = _char_ids()
    weights = (x[..., 0] > 0).astype("float32")  # every real token ...
    for row, sentence in enumerate(SENTENCES):
        weights[row, [0, len(sentence) + 1]] = 0  # ... but <S> and </S>
    labels = np.random.default_rng(0).integers(0, 4, weights.shape).astype("int32")
    return x, labels, weights


# --- Task models ----------------------------------------------------------------------


def test_only_the_mix_and_the_head_train(odd_backbone):
    model = ElmoTokenTagger(odd_backbone, num_labels=4, lstm_units=7)
    assert not odd_backbone.trainable and not odd_backbone.trainable_weights
    trainable = {w.path.split("/")[0] for w in model.trainable_weights}
    assert trainable == {"scalar_mix", "bilstm_0", "bilstm_1", "logits"}
    assert len(model.weights) == len(odd_backbone.weights) + len(model.trainable_weights)
    x, y, weights = _tagger_batch()
    # The mix's layer weights and gamma get gradients, through the L2 term and the task loss.
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, logits, weights)
    mix = [model.scalar_mix.layer_weights, model.scalar_mix.gamma]
    for gradient in tape.gradient(loss, mix):
        assert gradient is not None and np.abs(np.asarray(gradient)).max() > 0
    before = [np.array(w.numpy()) for w in odd_backbone.weights]
    mix_before = [np.array(w.numpy()) for w in mix]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), run_eagerly=True)  # no tracing: fast
    model.fit(x, y, sample_weight=weights, epochs=1, verbose=0)
    for w, b in zip(odd_backbone.weights, before):
        np.testing.assert_array_equal(w.numpy(), b)  # frozen
    for w, b in zip(mix, mix_before):
        assert np.abs(w.numpy() - b).max() > 1e-4  # trained
    assert len(model.losses) == 1  # the mix's L2 reaches fit


def test_the_bilm_runs_in_inference_mode_under_fit(odd_backbone):
    """The features a training step reads are the biLM's inference outputs
    (bilm-tf's graph has no dropout), though the model trains with dropout."""
    model = ElmoTokenTagger(odd_backbone, num_labels=4, lstm_units=7)
    x = _char_ids()
    features = keras.Model(model.input, model.frozen_bilm.output)  # J layers, then the mask
    *layers, mask = features({"char_ids": x}, training=True)
    reference = odd_backbone(x, training=False)
    dropped = odd_backbone(x, training=True)
    for j in range(3):
        expected, expected_mask = remove_sentence_boundaries(reference["lm_embeddings"][j],
                                                             reference["mask"])
        np.testing.assert_array_equal(np.asarray(layers[j]), np.asarray(expected))
        np.testing.assert_array_equal(np.asarray(mask), np.asarray(expected_mask))
    assert np.abs(np.asarray(dropped["lm_embeddings"][2]) -
                  np.asarray(reference["lm_embeddings"][2])).max() > 1e-3


def test_tagger_lays_logits_out_as_the_tokens(odd_backbone):
    model = ElmoTokenTagger(odd_backbone, num_labels=4, lstm_units=7)
    x = _char_ids()
    logits = np.asarray(model(x))
    assert logits.shape == (3, 8, 4) and logits.dtype == np.float32
    for row, sentence in enumerate(SENTENCES):
        n = len(sentence)
        assert not logits[row, 0].any() and not logits[row, n + 1:].any()  # <S>, </S>, padding
        assert (np.abs(logits[row, 1:n + 1]).max(axis=-1) > 0).all()  # every word
    # A sentence's logits do not depend on the batch it is in (padding is inert).
    alone = np.asarray(model(batch_char_ids([SENTENCES[1]], 9)))
    np.testing.assert_allclose(alone[0], logits[1, :3], atol=1e-6)


def test_pooling_and_pair_features():
    x = np.array([[[1.0, -5.0], [3.0, -1.0], [9.0, 9.0]], [[-2.0, -3.0], [0.0, 0.0], [0.0, 0.0]]])
    mask = np.array([[True, True, False], [True, False, False]])
    np.testing.assert_array_equal(np.asarray(MaskedMaxPooling()(x, mask)),
                                  [[3.0, -1.0], [-2.0, -3.0]])  # padding never wins
    empty = MaskedMaxPooling()(x, np.zeros((2, 3), bool))
    np.testing.assert_array_equal(np.asarray(empty), np.zeros((2, 2)))
    u, v = np.array([1.0, -2.0]), np.array([3.0, 4.0])
    pairs = np.asarray(SentencePairFeatures()(np.stack([u, v, v, u])))
    np.testing.assert_array_equal(pairs[0], [1, -2, 3, 4, 2, 6, 3, -8])
    np.testing.assert_array_equal(pairs[1], [3, 4, 1, -2, 2, 6, 3, -8])


def test_pair_classifier_encodes_each_sentence_then_compares(odd_backbone):
    model = ElmoPairClassifier(odd_backbone, num_classes=3, lstm_units=7, hidden_units=13)
    a, b = _char_ids(), _char_ids(SENTENCES[::-1])
    x = np.stack([a, b], axis=1)  # (3, 2, 8, 9)
    logits = np.asarray(model({"char_ids": x}))
    assert logits.shape == (3, 3)
    # The same weights read each sentence alone: its vector from the single encoder.
    pooled = keras.Model(model.input, model.pooling.output)
    vectors = np.asarray(pooled({"char_ids": x})).reshape(3, 2, -1)
    u, v = vectors[:, 0], vectors[:, 1]
    features = np.concatenate([u, v, np.abs(u - v), u * v], axis=-1)
    hidden = np.tanh(features @ model.hidden.kernel.numpy() + model.hidden.bias.numpy())
    expected = hidden @ model.output_dense.kernel.numpy() + model.output_dense.bias.numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    # Sentence a alone in a batch gives the same vector.
    single = np.asarray(pooled({"char_ids": np.stack([a[:1], a[:1]], axis=1)}))[0]
    np.testing.assert_allclose(single, u[0], atol=1e-6)


def test_config_round_trip_and_save_load(odd_backbone, tmp_path):
    """Every model's config round trip; `.keras` save/load for the pair model here
    (the classifier's in the SST-2 run, which loads its export)."""
    tagger = assert_config_round_trip(
        ElmoTokenTagger(odd_backbone, 4, lstm_units=7, dropout=0.2, l2_coef=0.0))
    assert (tagger.num_labels, tagger.dropout, tagger.l2_coef) == (4, 0.2, 0.0)
    classifier = assert_config_round_trip(
        ElmoClassifier(odd_backbone, 1, lstm_units=5, hidden_units=9, do_layer_norm=True))
    assert classifier.do_layer_norm and classifier.scalar_mix.do_layer_norm
    model = ElmoPairClassifier(odd_backbone, 2, lstm_units=5, hidden_units=9)
    assert not assert_config_round_trip(model).backbone.trainable
    x = _char_ids()
    loaded = assert_keras_save_load_equal(model, {"char_ids": np.stack([x, x], axis=1)}, tmp_path)
    assert not loaded.backbone.trainable
    assert len(loaded.trainable_weights) == len(model.trainable_weights)
    assert (loaded.hidden_units, loaded.l2_coef, loaded.do_layer_norm) == (9, 0.001, False)
    # A saved ELMo task model is an --init_checkpoint: its biLM, as it was.
    from training.elmo.finetune import build_elmo_backbone

    again = build_elmo_backbone(FinetuneConfig(model="elmo",
                                               init_checkpoint=str(tmp_path / "model.keras")))
    assert isinstance(again, ElmoBackbone) and again.max_batch_size is None
    for a, b in zip(again.weights, odd_backbone.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_model_errors(odd_backbone):
    stateful = ElmoBackbone.from_config_object(odd_backbone.elmo_config, max_batch_size=2)
    with pytest.raises(ValueError, match="stateless"):
        ElmoTokenTagger(stateful, 4)
    with pytest.raises(ValueError, match="lstm_units"):
        ElmoClassifier(odd_backbone, 2, lstm_units=0)
    with pytest.raises(ValueError, match="num_labels"):
        ElmoTokenTagger(odd_backbone, 1)
    with pytest.raises(ValueError, match="l2_coef"):
        ElmoClassifier(odd_backbone, 2, l2_coef=-1.0)
    model = ElmoPairClassifier(odd_backbone, 2, lstm_units=5, hidden_units=9)
    with pytest.raises(ValueError, match=r"expected shape=\(None, 2, None, 9\)"):
        model(_char_ids())


def test_mixed_precision_logits_are_float32(odd_backbone):
    keras.config.set_dtype_policy("mixed_bfloat16")
    backbone = ElmoBackbone.from_config_object(odd_backbone.elmo_config, dtype="mixed_bfloat16")
    model = ElmoClassifier(backbone, 2, lstm_units=5, hidden_units=9)
    assert keras.backend.standardize_dtype(model(_char_ids()).dtype) == "float32"


# --- The real bilm-tf test model as the frozen biLM -------------------------------------


@pytest.fixture
def bilm_fixture():
    """bilm-tf's test data, vendored in tests/data/bilm_tf."""
    assert os.path.isfile(os.path.join(FIXTURE, "lm_weights.hdf5")), FIXTURE
    return FIXTURE


def test_bilm_tf_model_as_the_frozen_bilm(bilm_fixture):
    """The fixture folder (options.json + lm_weights.hdf5) loads through the entry
    point; the task model's features for a sentence are ElmoBackbone's own
    lm_embeddings, and their top layer is bilm-tf's (its first sentence, read
    from zero states); the initial mix is their mean."""
    from training.elmo.finetune import build_elmo_backbone

    backbone = build_elmo_backbone(FinetuneConfig(model="elmo", init_checkpoint=bilm_fixture))
    model = ElmoTokenTagger(backbone, num_labels=5, lstm_units=8)
    with open(os.path.join(bilm_fixture, "lm_embeddings_sentences.json")) as f:
        lists = json.load(f)
    sentences = [lists[k][0].split() for k in range(2)]  # each list's first: zero states
    x = batch_char_ids(sentences, 50)
    features = keras.Model(model.input, model.frozen_bilm.output)  # J layers, then the mask
    *layers, mask = features({"char_ids": x}, training=True)
    own = load_elmo_checkpoint(os.path.join(bilm_fixture, "options.json"),
                               os.path.join(bilm_fixture, "lm_weights.hdf5"))(x, training=False)
    for j in range(3):
        expected, _ = remove_sentence_boundaries(own["lm_embeddings"][j], own["mask"])
        np.testing.assert_array_equal(np.asarray(layers[j]), np.asarray(expected))
    for k, sentence in enumerate(sentences):
        with h5py.File(os.path.join(bilm_fixture, f"lm_embeddings_{k}.hdf5"), "r") as f:
            golden = np.concatenate(f["0"][...], axis=-1)  # (T, 32): forward, backward
        np.testing.assert_allclose(np.asarray(layers[2])[k, :len(sentence)], golden, atol=1e-5)
    mixed = model.scalar_mix(layers, mask=mask)
    np.testing.assert_allclose(np.asarray(mixed), np.mean([np.asarray(t) for t in layers], 0),
                               atol=1e-6)


# --- The entry point ------------------------------------------------------------------

WORDS = "the cat dog sat ran on mat park".split()


def _learnable_elmo_folder(tmp_path):
    """A tiny random biLM saved as bilm-tf files (options.json + weights.hdf5).

    Random char-CNN features differ little from word to word (about 0.03
    around a common 0.1); a trained ELMo's are O(1). Its projection is
    rescaled so the token embedding of this test's words has mean 0 and
    std 1 per feature: the features then carry the words as a trained
    model's do, and a few epochs suffice.
    """
    config = ElmoConfig(filters=((1, 8), (2, 8), (3, 16)), n_highway=1, projection_dim=16,
                        lstm_dim=24, n_layers=1, char_embedding_dim=8,
                        max_characters_per_token=12, cell_clip=3.0, proj_clip=3.0,
                        use_skip_connections=False, dropout=0.1)
    backbone = ElmoBackbone.from_config_object(config)
    words = WORDS + [w.capitalize() for w in WORDS]
    out = backbone(batch_char_ids([[w] for w in words], 12), training=False)
    tokens = np.asarray(out["token_embedding"])[:, 1]  # (16, 16)
    mean, std = tokens.mean(0), tokens.std(0) + 1e-6
    projection = backbone.character_encoder.projection
    projection.kernel.assign(projection.kernel.numpy() / std)
    projection.bias.assign((projection.bias.numpy() - mean) / std)
    folder = tmp_path / "elmo"
    save_elmo_checkpoint(backbone, str(folder / "options.json"), str(folder / "weights.hdf5"))
    return str(folder)


def _conll_folder(tmp_path, rng, rows):
    """Capitalised words are entities (B-PER), the others O."""
    folder = tmp_path / "conll"
    folder.mkdir()
    for split, count in (("train", rows), ("dev", 30)):
        lines = []
        for _ in range(count):
            for word in rng.choice(WORDS, rng.integers(3, 9)):
                entity = rng.random() < 0.3
                lines.append(f"{word.capitalize()} NNP O B-PER\n" if entity else
                             f"{word} NN O O\n")
            lines.append("\n")
        (folder / f"{split}.txt").write_text("".join(lines), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_finetune_elmo_ner_learns_entities(tmp_path):
    from training.finetune import run

    data_dir = _conll_folder(tmp_path, np.random.default_rng(0), rows=120)
    summary = run(FinetuneConfig(model="elmo", task="ner", data_dir=str(data_dir),
                                 output_dir=str(tmp_path / "out"),
                                 init_checkpoint=_learnable_elmo_folder(tmp_path),
                                 elmo_lstm_units=16, epochs=5, batch_size=8, learning_rate=1e-2,
                                 export=False))
    config, history = summary["config"], summary["history"]
    assert (config["weight_decay"], config["warmup_proportion"]) == (0.0, 0.0)
    print(f"dev F1 by epoch: {[round(f, 1) for f in history['dev_f1']]}")
    assert history["dev_f1"][-1] >= 95.0  # conlleval's 0..100 scale
    lines = (tmp_path / "out" / "dev_predictions.txt").read_text(encoding="utf-8").split("\n")
    word, gold, predicted = lines[0].split()
    assert word in WORDS + [w.capitalize() for w in WORDS] and gold in ("O", "B-PER")


def _sst2_folder(tmp_path, rng, rows):
    """A sentence is positive when it holds a capitalised word."""
    folder = tmp_path / "SST-2"
    folder.mkdir()
    for split, count in (("train", rows), ("dev", 48)):
        lines = ["sentence\tlabel\n"]
        for i in range(count):
            words = [str(w) for w in rng.choice(WORDS, rng.integers(3, 8))]
            if i % 2:
                words[rng.integers(len(words))] = words[0].capitalize()
            lines.append(f"{' '.join(words)}\t{i % 2}\n")
        (folder / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
    (folder / "test.tsv").write_text("index\tsentence\n0\tthe Cat sat\n1\tthe cat sat\n",
                                     encoding="utf-8")
    return folder


@pytest.mark.slow
def test_finetune_elmo_sst2_learns_and_exports(tmp_path):
    from training.finetune import run

    data_dir = _sst2_folder(tmp_path, np.random.default_rng(1), rows=160)
    out = tmp_path / "out"
    summary = run(FinetuneConfig(model="elmo", task="glue/sst2", data_dir=str(data_dir),
                                 output_dir=str(out),
                                 init_checkpoint=_learnable_elmo_folder(tmp_path),
                                 elmo_lstm_units=16, epochs=6, batch_size=8, learning_rate=1e-2))
    history = summary["history"]
    print(f"dev accuracy by epoch: {[round(a, 3) for a in history['dev_accuracy']]}")
    assert history["dev_accuracy"][-1] >= 0.9
    submission = list(csv.reader(open(out / "glue_submission" / "SST-2.tsv"), delimiter="\t"))
    assert submission[0] == ["index", "prediction"] and len(submission) == 3
    # Exported: the SavedModel serves char ids and tokens, as Keras predicts.
    model = keras.saving.load_model(str(out / "export" / "model.keras"))
    assert isinstance(model, ElmoClassifier) and not model.backbone.trainable
    tokens = [["the", "Cat", "sat"], ["the", "cat", "sat", "on", "mat"]]
    x = batch_char_ids(tokens, 12)
    expected = np.asarray(model({"char_ids": x}, training=False))  # eager: no tracing
    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    served = serving.signatures["serving_default"](char_ids=tf.constant(x))["logits"]
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-5)
    padded = tf.constant([["the", "Cat", "sat", "", ""], ["the", "cat", "sat", "on", "mat"]])
    served = serving.signatures["serving_tokens"](tokens=padded)["logits"]
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-5)


# --- Data, defaults and refusals -------------------------------------------------------


class _Model:
    """What `char_id_batches` reads of a model: its biLM's C."""

    class backbone:  # noqa: N801
        max_characters_per_token = 9


def test_word_rows_become_elmo_char_ids(tmp_path):
    """GLUE pairs (BERT's basic tokenization, cased) and CoNLL words are rows
    `<S> words </S>` whose character ids are `batch_char_ids`' exactly; long
    texts are truncated to max_seq_length - 2 words."""
    from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer
    from training.elmo.finetune import make_elmo_task as make_task

    rte = tmp_path / "RTE"
    rte.mkdir()
    (rte / "train.tsv").write_text(
        "index\tsentence1\tsentence2\tlabel\n"
        "0\tA man, in Paris, eats.\tSomeone eats\tentailment\n"
        "1\tOne two three four five six seven\tNo\tnot_entailment\n", encoding="utf-8")
    cfg = FinetuneConfig(model="elmo", task="glue/rte", data_dir=str(rte), max_seq_length=7,
                         batch_size=2, elmo_lstm_units=5)
    task = make_task(cfg, BasicTokenizer(do_lower_case=False))
    x, y, _ = task.train_arrays()
    assert x["input_word_ids"].shape == (2, 2, 7) and y.tolist() == [0, 1]
    np.testing.assert_array_equal(x["input_mask"], x["input_word_ids"] > 0)
    (char_ids,) = next(iter(task.char_id_batches(_Model, x)))  # x only: a 1-tuple
    expected_a = batch_char_ids([["A", "man", ",", "in", "Paris"], ["One", "two", "three",
                                                                   "four", "five"]], 9)
    expected_b = batch_char_ids([["Someone", "eats"], ["No"]], 9)
    np.testing.assert_array_equal(char_ids["char_ids"].numpy()[:, 0], expected_a)
    np.testing.assert_array_equal(char_ids["char_ids"].numpy()[:, 1, :4], expected_b)
    assert not char_ids["char_ids"].numpy()[:, 1, 4:].any()
    assert isinstance(task.build_model(ElmoBackbone.from_config_object(ElmoConfig(
        filters=((1, 3),), n_highway=0, projection_dim=3, lstm_dim=4, n_layers=1,
        max_characters_per_token=9))), ElmoPairClassifier)

    conll = tmp_path / "conll"
    conll.mkdir()
    (conll / "train.txt").write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
                                     "Peter NNP B-NP B-PER\n\n", encoding="utf-8")
    task = make_task(FinetuneConfig(model="elmo", task="ner", data_dir=str(conll),
                                    max_seq_length=128, batch_size=2), None)
    x, y, weights = task.train_arrays()
    assert x["input_word_ids"].shape == y.shape == weights.shape == (2, 4)  # the longest row
    np.testing.assert_array_equal(weights, [[0, 1, 1, 0], [0, 1, 0, 0]])
    labels = task.label_list
    assert [labels[i] for i in y[0, 1:3]] == ["B-ORG", "O"] and labels[y[1, 1]] == "B-PER"
    (char_ids,) = next(iter(task.char_id_batches(_Model, x)))  # x only: a 1-tuple
    np.testing.assert_array_equal(char_ids["char_ids"].numpy(),
                                  batch_char_ids([["EU", "rejects"], ["Peter"]], 9))


def test_elmo_checkpoint_files(tmp_path, bilm_fixture):
    from training.elmo.finetune import elmo_checkpoint_files

    assert elmo_checkpoint_files(bilm_fixture) == (
        os.path.join(bilm_fixture, "options.json"), os.path.join(bilm_fixture, "lm_weights.hdf5"))
    folder = tmp_path / "released"
    folder.mkdir()
    for name in ("elmo_2x1024_128_2048cnn_1xhighway_options.json",
                 "elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5"):
        (folder / name).write_text("{}")
    options, weights = elmo_checkpoint_files(str(folder))
    assert options.endswith("_options.json") and weights.endswith("_weights.hdf5")
    (folder / "other_weights.hdf5").write_text("")
    with pytest.raises(SystemExit, match="found 2"):
        elmo_checkpoint_files(str(folder))
    explicit = str(folder / "other_weights.hdf5")
    assert elmo_checkpoint_files(explicit) == (options, explicit)
    with pytest.raises(SystemExit, match="no options file"):
        elmo_checkpoint_files(str(tmp_path))


def test_elmo_defaults(tmp_path):
    from training.finetuning.config import resolve

    cfg = resolve(FinetuneConfig(model="elmo", task="ner", data_dir=str(tmp_path),
                                 preset="elmo_tiny"))
    assert (cfg.learning_rate, cfg.warmup_proportion, cfg.weight_decay, cfg.elmo_lstm_units,
            cfg.max_seq_length, cfg.batch_size, cfg.epochs) == (1e-3, 0.0, 0.0, 128, 128, 32, 3)
    bert = resolve(FinetuneConfig(task="ner", data_dir=str(tmp_path), preset="tiny",
                                  vocab_file="vocab.txt"))
    assert (bert.learning_rate, bert.weight_decay) == (5e-5, 0.01)


@pytest.mark.parametrize("changes, message", [
    (dict(task="squad"), "not built for --model=elmo"),
    (dict(task="swag"), "not built for --model=elmo"),
    (dict(preset=""), "needs --init_checkpoint"),
    (dict(preset="tiny"), "not an ELMo preset"),
    (dict(vocab_file="vocab.txt"), "not ELMo's"),
    (dict(lm_coef=0.5), "not ELMo's"),
    (dict(max_seq_length=2), "leaves no word"),
    (dict(preset="", init_checkpoint="/no/such/folder"), "does not exist"),
    (dict(model="bert", preset="tiny", elmo_lstm_units=64), "is ELMo's"),
])
def test_finetune_elmo_refuses_clearly(tmp_path, changes, message):
    from training.finetuning.config import resolve

    cfg = FinetuneConfig(**{"model": "elmo", "task": "glue/rte", "data_dir": str(tmp_path),
                            "preset": "elmo_tiny", **changes})
    with pytest.raises(SystemExit, match=message):
        resolve(cfg)


def test_glue_windows_are_refused(tmp_path):
    from training.elmo.finetune import make_elmo_task as make_task

    cfg = FinetuneConfig(model="elmo", task="glue/sst2", data_dir=str(tmp_path), window_stride=8)
    with pytest.raises(SystemExit, match="--window_stride"):
        make_task(cfg, None)
