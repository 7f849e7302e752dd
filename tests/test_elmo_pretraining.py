"""ELMo pretraining: bilm-tf's data (vocabulary, streamed windows as
TFRecords), the biLM loss with its shared softmax, LSTM states carried
across batches, the overfit test of bilm-tf's tests/test_training.py, and
`training.pretrain --model=elmo` end to end.

Over 400 lines: `--model=elmo`'s side of `training.pretrain`, in one file as
`--model=xlnet`'s is (`test_xlnet_pretraining.py`): bilm-tf's data, the biLM's
loss and carried states, the overfit test, and the command end to end.
"""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from forked_python import run_python
from helpers import assert_config_round_trip
from helpers import tf1_session_outputs
from helpers import write_docstring_corpus

from keras_bert_impl.elmo import ElmoBackbone
from keras_bert_impl.elmo import ElmoConfig
from keras_bert_impl.elmo import batch_char_ids
from keras_bert_impl.elmo import load_elmo_checkpoint
from keras_bert_impl.elmo import token_char_ids
from keras_bert_impl.elmo.elmo_language_model import DIRECTIONS
from keras_bert_impl.elmo.elmo_language_model import ElmoLanguageModel
from keras_bert_impl.elmo.elmo_serving import stateless_copy
from keras_bert_impl.elmo.elmo_vocab import learn_elmo_vocab
from keras_bert_impl.elmo.elmo_vocab import load_elmo_vocab
from keras_bert_impl.elmo.elmo_vocab import write_elmo_vocab
from tf_records.elmo.reader import elmo_dataset
from tf_records.elmo.reader import target_counts
from tf_records.elmo.writer import stream_windows
from tf_records.elmo.writer import write_elmo_data
from training.pretraining.evaluation import bilm_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "data", "bilm_tf")  # vendored: see its README.md
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
B, T = 3, 7  # odd: swapped axes fail


@pytest.fixture
def bilm_fixture():
    """bilm-tf's test data, vendored in tests/data/bilm_tf."""
    assert os.path.isfile(os.path.join(FIXTURE, "lm_weights.hdf5")), FIXTURE
    return FIXTURE


def _sentences(count=11, seed=0):
    """Sentences of 1..9 words named after their place: `s{i}w{j}`."""
    rng = np.random.default_rng(seed)
    return [[f"s{i}w{j}" for j in range(int(rng.integers(1, 10)))] for i in range(count)]


def _corpus(tmp_path, sentences):
    path = tmp_path / "text.txt"
    path.write_text("\n".join(" ".join(s) for s in sentences) + "\n", encoding="utf-8")
    return str(path)


def _vocab(tmp_path, sentences, max_size=20):
    """A small vocabulary, so that some words are <UNK>."""
    path = str(tmp_path / "vocab.txt")
    write_elmo_vocab(learn_elmo_vocab([" ".join(s) for s in sentences], max_size=max_size), path)
    return path


def _tiny_config(**changes):
    """Odd sizes: F=15 filters, P=6, U=11, E=5, C=9."""
    values = dict(filters=((1, 3), (2, 5), (3, 7)), n_highway=1, projection_dim=6, lstm_dim=11,
                  n_layers=2, char_embedding_dim=5, max_characters_per_token=9, cell_clip=3.0,
                  proj_clip=3.0, use_skip_connections=True, dropout=0.1)
    values.update(changes)
    return ElmoConfig(**values)


# --- Data -------------------------------------------------------------------


def test_vocab_is_sorted_by_frequency_after_the_specials(tmp_path):
    tokens = learn_elmo_vocab(["b a b", "c b a", "<S> d"], max_size=5)
    assert tokens == ["<S>", "</S>", "<UNK>", "b", "a"]
    path = str(tmp_path / "vocab.txt")
    write_elmo_vocab(tokens, path)
    assert load_elmo_vocab(path) == tokens
    assert load_elmo_vocab(os.path.join(FIXTURE, "train_vocab.txt"))[:4] == [
        "<S>", "</S>", "<UNK>", "of"]


@pytest.mark.parametrize("lines, message", [
    (["</S>", "<S>", "<UNK>", "a"], "must start with <S>, </S>, <UNK>"),
    (["the", "a"], "must start with"),
    (["<S>", "</S>", "<UNK>", "a", "a"], "'a' appears twice"),
    (["<S>", "</S>", "<UNK>", "a b"], "not one token"),
])
def test_bad_vocab_files_are_refused_by_name(tmp_path, lines, message):
    path = tmp_path / "bad_vocab.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message) as error:
        load_elmo_vocab(str(path))
    assert str(path) in str(error.value)


def test_windows_are_streams_of_whole_sentences_with_next_and_previous_targets(tmp_path):
    sentences = _sentences()
    vocab = load_elmo_vocab(_vocab(tmp_path, sentences))
    ids = {w: i for i, w in enumerate(vocab)}
    batches = list(stream_windows(sentences, vocab, B, T))
    rows = {k: {key: np.concatenate([b[key][k] for b in batches]) for key in batches[0]}
            for k in range(B)}
    seen = []
    for k in range(B):
        row = rows[k]
        real = row["target_mask"] > 0
        assert real.tolist() == sorted(real.tolist(), reverse=True)  # padding only at the end
        forward, reverse = list(row["tokens"][real]), list(row["tokens_reverse"][real])
        # Row k over the batches: whole sentences back to back, each `<S> w1 .. wn`
        # predicting `w1 .. wn </S>`; reversed in place in the reverse stream.
        start = 0
        while start < len(forward):
            assert forward[start] == "<S>" and reverse[start] == "</S>"
            i = int(forward[start + 1][1:].split("w")[0])  # "s{i}w0": sentence i begins
            words = sentences[i]
            n = len(words)
            assert forward[start:start + n + 1] == ["<S>", *words]
            assert reverse[start:start + n + 1] == ["</S>", *words[::-1]]
            text = ["<S>", *words, "</S>"]
            expected = [ids.get(w, 2) for w in text[1:]]
            assert row["next_token_id"][real][start:start + n + 1].tolist() == expected
            # The backward target is the word before, in the text.
            expected = [ids.get(w, 2) for w in text[::-1][1:]]
            assert row["next_token_id_reverse"][real][start:start + n + 1].tolist() == expected
            assert row["token_ids"][real][start:start + n + 1].tolist() == [
                ids.get(w, 2) for w in text[:-1]]
            seen.append(i)
            start += n + 1
    assert sorted(seen) == list(range(len(sentences)))  # every sentence once
    # Row k of batch t + 1 starts where row k of batch t ended: with the token
    # its last position predicted, or a new sentence after `</S>`.
    for before, after in zip(batches, batches[1:]):
        for k in range(B):
            if after["target_mask"][k, 0]:
                target = before["next_token_id"][k, -1]
                assert after["token_ids"][k, 0] == (ids["<S>"] if target == ids["</S>"] else target)
                target = before["next_token_id_reverse"][k, -1]
                assert after["token_ids_reverse"][k, 0] == (
                    ids["</S>"] if target == ids["<S>"] else target)
    # Rows take the corpus' next sentence when theirs ends (bilm-tf's _get_batch).
    assert rows[0]["tokens"][:len(sentences[0]) + 1].tolist() == ["<S>", *sentences[0]]
    assert not batches[-1]["target_mask"].all()  # the tail is padded, not dropped
    assert sum(int(b["target_mask"].sum()) for b in batches) == sum(len(s) + 1 for s in sentences)
    assert 2 in np.concatenate([b["next_token_id"].ravel() for b in batches])  # some <UNK>


def test_records_read_back_in_stream_order_with_char_ids_of_the_tokens(tmp_path):
    sentences = _sentences()
    vocab_file = _vocab(tmp_path, sentences)
    vocab = load_elmo_vocab(vocab_file)
    manifest = write_elmo_data([_corpus(tmp_path, sentences)], vocab_file, str(tmp_path / "rec"),
                               B, T, batches_per_shard=2, progress=False)
    expected = list(stream_windows(sentences, vocab, B, T))
    assert manifest["batches"] == len(expected) and len(manifest["shards"]) > 1
    assert manifest["schema"] == {"kind": "elmo", "unroll_steps": T, "batch_size": B}
    dataset = elmo_dataset(str(tmp_path / "rec"), B, max_characters_per_token=9, repeat=False)
    batches = list(dataset)
    assert len(batches) == len(expected)
    for (x, y, w), want in zip(batches, expected):
        mask = want["target_mask"]
        for direction, suffix in (("forward", ""), ("backward", "_reverse")):
            name = "char_ids" if direction == "forward" else "char_ids_reverse"
            chars = token_char_ids(list(want[f"tokens{suffix}"].ravel()), 9)
            chars = chars.reshape(B, T, 9) * mask[:, :, None]  # padding tokens: all 0
            np.testing.assert_array_equal(x[name].numpy(), chars)
            np.testing.assert_array_equal(y[direction].numpy(), want[f"next_token_id{suffix}"])
            np.testing.assert_array_equal(w[direction].numpy(), mask)
    # Resuming at batch 2 of a repeating pass continues the same stream.
    again = elmo_dataset(str(tmp_path / "rec"), B, 9, start_batch=2)
    resumed = [y["forward"].numpy() for _, y, _ in again.take(len(expected))]
    for step, ids in enumerate(resumed):
        np.testing.assert_array_equal(ids, expected[(step + 2) % len(expected)]["next_token_id"])
    counts = target_counts(str(tmp_path / "rec"))
    assert counts.sum() == 2 * manifest["targets"] and counts[0] == counts[1] == len(sentences)
    with pytest.raises(ValueError, match="would cut them"):
        elmo_dataset(str(tmp_path / "rec"), B + 1)
    from tf_records.gpt.reader import lm_dataset

    with pytest.raises(ValueError, match="holds 'elmo' records.*elmo.reader.elmo_dataset"):
        lm_dataset(str(tmp_path / "rec"), B)


# --- The model ----------------------------------------------------------------


def _random_windows(config, seed, tokens=T):
    rng = np.random.default_rng(seed)
    chars = config.max_characters_per_token
    return {name: rng.integers(1, 262, (B, tokens, chars)).astype("int32")
            for name in ("char_ids", "char_ids_reverse")}


def _log_softmax(logits):
    peak = logits.max(-1, keepdims=True)
    return logits - peak - np.log(np.exp(logits - peak).sum(-1, keepdims=True))


def test_loss_is_half_the_two_cross_entropies_through_one_softmax():
    keras.utils.set_random_seed(1)
    config = _tiny_config()
    lm = ElmoLanguageModel(ElmoBackbone.from_config_object(config), vocab_size=99)
    x = _random_windows(config, 0)
    rng = np.random.default_rng(1)
    y = {d: rng.integers(0, 99, (B, T)).astype("int32") for d in DIRECTIONS}
    w = {d: (rng.random((B, T)) > 0.3).astype("float32") for d in DIRECTIONS}
    out = lm(x, training=False)
    kernel, bias = (np.asarray(v, np.float64) for v in (lm.softmax.kernel, lm.softmax.bias))
    assert kernel.shape == (99, 6) and len(lm.softmax.weights) == 2  # one softmax, W[V, P]
    expected = 0.0
    for d in DIRECTIONS:
        logp = _log_softmax(np.asarray(out[d], np.float64) @ kernel.T + bias)  # (B, T, V)
        nll = -np.take_along_axis(logp, y[d][..., None], -1)[..., 0]
        expected += 0.5 * (nll * w[d]).sum() / w[d].sum()
    for training in (False, True):  # no sampling (n_negative_samples_batch=0): the same
        loss = lm.compute_loss(x, y, out, w, training=training)
        np.testing.assert_allclose(float(loss), expected, rtol=1e-5)


def test_sampled_softmax_estimates_the_full_loss_and_trains_it():
    """In training a large vocabulary's softmax is sampled (bilm-tf's 8192
    negatives): finite, near the full loss on average, and descending it
    lowers the full loss. (The overfit test below trains a whole biLM so.)"""
    keras.utils.set_random_seed(2)
    config = _tiny_config(dropout=0.0)
    vocab = 99
    lm = ElmoLanguageModel(ElmoBackbone.from_config_object(config), vocab,
                           n_negative_samples_batch=40)
    x = _random_windows(config, 0)
    rng = np.random.default_rng(1)
    # Targets drawn Zipf-like, as the log-uniform sampler assumes.
    y = {d: np.minimum(rng.zipf(1.3, (B, T)) - 1, vocab - 1).astype("int32") for d in DIRECTIONS}
    out = lm(x, training=False)
    full = float(lm.compute_loss(x, y, out, None, training=False))
    sampled = [float(lm.compute_loss(x, y, out, None, training=True)) for _ in range(30)]
    assert np.isfinite(sampled).all() and len(set(sampled)) > 1  # a new sample each call
    assert abs(np.mean(sampled) - full) < 0.25 * full, (np.mean(sampled), full)
    optimizer = keras.optimizers.Adagrad(0.5, initial_accumulator_value=1.0)
    for _ in range(20):
        with tf.GradientTape() as tape:
            loss = lm.compute_loss(x, y, out, None, training=True)
        variables = lm.softmax.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    after = float(lm.compute_loss(x, y, out, None, training=False))
    assert after < 0.8 * full, (after, full)


def test_states_carry_from_batch_to_batch_as_one_long_window():
    keras.utils.set_random_seed(3)
    config = _tiny_config()
    stateful = ElmoLanguageModel(ElmoBackbone.from_config_object(config, max_batch_size=B), 99)
    stateless = ElmoLanguageModel(stateless_copy(stateful.backbone), 99)
    for mine, theirs in zip(stateless.softmax.weights, stateful.softmax.weights):
        mine.assign(theirs)
    first, second = _random_windows(config, 0), _random_windows(config, 1)
    stateful(first, training=False)
    carried = stateful(second, training=False)
    stateful.reset_states()
    fresh = stateful(second, training=False)
    whole = stateless({k: np.concatenate([first[k], second[k]], axis=1) for k in first},
                      training=False)
    for d in DIRECTIONS:  # the backward LM reads its (reverse) stream in order too
        assert not np.allclose(carried[d], fresh[d], atol=1e-3)
        np.testing.assert_allclose(carried[d], np.asarray(whole[d])[:, T:], atol=1e-5)
    # No gradient reaches the previous window: the states are not trainable.
    names = {v.path for v in stateful.trainable_weights}
    assert not any("state_" in name for name in names)
    assert sum("state_" in v.path for v in stateful.non_trainable_weights) == 2 * 2 * 2


def test_fit_traces_the_language_model_once(monkeypatch):
    """Keras builds a model without a strategy inside the first trace of
    its step, whose new variables (the optimizer's) make `tf.function`
    trace the step again; the language model says what it takes and
    returns (`_symbolic_batch`, `_symbolic_outputs`), so `fit` builds the
    optimizer first and traces the model once, in its step."""
    traced = []
    call = ElmoLanguageModel.call
    monkeypatch.setattr(ElmoLanguageModel, "call", lambda self, inputs, training=None: (
        traced.append(1) or call(self, inputs, training=training)))
    config = _tiny_config()
    lm = ElmoLanguageModel(ElmoBackbone.from_config_object(config, max_batch_size=B), 99)
    lm.compile(optimizer=keras.optimizers.Adagrad(0.2))
    rng = np.random.default_rng(0)
    y = {d: rng.integers(0, 99, (B, T)).astype("int32") for d in DIRECTIONS}
    weights = {d: np.ones((B, T), "float32") for d in DIRECTIONS}
    history = lm.fit(_random_windows(config, 0), y, sample_weight=weights, batch_size=B,
                     verbose=0).history
    assert len(traced) == 1
    assert np.isfinite(history["loss"][0])


def test_training_checkpoints_keep_the_carried_states(tmp_path):
    """A resumed run continues each stream from the states it stopped with
    (`tf.train.Checkpoint`, as `training.run.checkpointing` writes it)."""
    config = _tiny_config()
    lm = ElmoLanguageModel(ElmoBackbone.from_config_object(config, max_batch_size=B), 99)
    lm(_random_windows(config, 0), training=False)
    states = [np.asarray(v) for v in lm.non_trainable_weights]
    assert len(states) == 8 and all(np.abs(s).max() > 0 for s in states)
    path = tf.train.Checkpoint(model=lm).save(str(tmp_path / "ckpt"))
    again = ElmoLanguageModel(ElmoBackbone.from_config_object(config, max_batch_size=B), 99)
    tf.train.Checkpoint(model=again).restore(path).assert_existing_objects_matched()
    for state, restored in zip(states, again.non_trainable_weights):
        np.testing.assert_array_equal(state, restored)


def test_mixed_precision_keeps_the_softmax_and_loss_in_float32():
    backbone = ElmoBackbone.from_config_object(_tiny_config(), dtype="mixed_bfloat16")
    lm = ElmoLanguageModel(backbone, 99)
    x = _random_windows(_tiny_config(), 0)
    out = lm(x, training=False)
    y = {d: np.zeros((B, T), "int32") for d in DIRECTIONS}
    assert all(out[d].dtype == "float32" for d in DIRECTIONS)
    assert lm.softmax(out["forward"]).dtype == "float32"
    assert lm.softmax.kernel.dtype == "float32"
    loss = lm.compute_loss(x, y, out, None, training=False)
    assert loss.dtype == "float32" and np.isfinite(float(loss))


def test_adagrad_as_bilm_tf():
    from training.run.optimization import OptimizerConfig
    from training.run.optimization import create_optimizer

    optimizer = create_optimizer(OptimizerConfig(optimizer="adagrad", learning_rate=0.2,
                                                 weight_decay=0.0, clip_norm=10.0), 100)
    assert isinstance(optimizer, keras.optimizers.Adagrad)
    assert optimizer.initial_accumulator_value == 1.0 and optimizer.global_clipnorm == 10.0
    assert float(optimizer.learning_rate) == pytest.approx(0.2)  # constant: no schedule


def test_language_model_config_round_trip():
    lm = ElmoLanguageModel(ElmoBackbone.from_config_object(_tiny_config(), max_batch_size=B), 99,
                           n_negative_samples_batch=16)
    rebuilt = assert_config_round_trip(lm)
    assert rebuilt.n_negative_samples_batch == 16 and rebuilt.backbone.max_batch_size == B
    with pytest.raises(ValueError, match="n_negative_samples_batch"):
        ElmoLanguageModel(lm.backbone, 99, n_negative_samples_batch=99)
    with pytest.raises(ValueError, match="char_ids_reverse"):
        lm({"char_ids": np.ones((B, T, 9), "int32")})


# --- Overfit, as bilm-tf's tests/test_training.py ------------------------------


@pytest.mark.slow  # 16-37 s here, with the load of the shared cores
def test_overfits_bilm_tf_training_fixture(bilm_fixture, tmp_path):
    """bilm-tf's `test_train_bilm_chars`: its 134-token text, vocabulary and
    small options (batch 2, unroll 10, 50 epochs of 6 batches, LSTM 16 /
    projection 8, tanh char CNN, clipping at 1.0, 16 sampled negatives);
    perplexity on the same text below 20, bilm-tf's bar (measured: 16.6;
    the text's own unigram model gives 16.7, its many <UNK>s being
    easy: bilm-tf's optimizer moves slowly in 300 steps, while Adam at
    1e-2 memorises the text to 3.3 in 600)."""
    keras.utils.set_random_seed(0)
    write_elmo_data([os.path.join(bilm_fixture, "train_data.txt")],
                    os.path.join(bilm_fixture, "train_vocab.txt"), str(tmp_path / "rec"), 2, 10,
                    progress=False)
    vocab_size = len(load_elmo_vocab(os.path.join(bilm_fixture, "train_vocab.txt")))
    config = ElmoConfig(filters=((1, 8), (2, 8), (3, 16), (4, 32), (5, 64)), n_highway=1,
                        projection_dim=8, lstm_dim=16, n_layers=2, char_embedding_dim=4,
                        activation="tanh", max_characters_per_token=10, cell_clip=None,
                        proj_clip=None, use_skip_connections=False, dropout=0.1)
    lm = ElmoLanguageModel(ElmoBackbone.from_config_object(config, max_batch_size=2),
                           vocab_size, n_negative_samples_batch=16)
    lm.compile(optimizer=keras.optimizers.Adagrad(0.2, initial_accumulator_value=1.0,
                                                  global_clipnorm=1.0))
    # bilm-tf: n_train_tokens 134 // (batch 2 * unroll 10) = 6 batches an epoch.
    lm.fit(elmo_dataset(str(tmp_path / "rec"), 2, 10), steps_per_epoch=6, epochs=50, verbose=0)
    heldout = elmo_dataset(str(tmp_path / "rec"), 2, 10, repeat=False)
    report = bilm_report(lm, heldout, target_counts(str(tmp_path / "rec")))
    print(f"bilm-tf fixture perplexity: {report['perplexity']:.2f}")
    assert report["perplexity"] < 20.0, report


# --- training.pretrain --model=elmo ------------------------------------------


@pytest.mark.parametrize("flags, message", [
    ({"strategy": "mirrored"}, "ELMo trains on one replica"),
    ({"preset": "large"}, "is not an ELMo size"),
    ({"ablation": "ltr"}, "is an option of BERT"),
    ({"vocab_file": os.path.join(FIXTURE, "options.json")}, "must start with <S>, </S>, <UNK>"),
])
def test_bad_elmo_flags_stop_before_anything_is_written(flags, message):
    """`training.pretrain` makes the recipe before it touches --output_dir."""
    from training.pretrain import PretrainConfig
    from training.pretrain import make_recipe

    with pytest.raises(SystemExit, match=message):
        make_recipe(PretrainConfig(model="elmo", **flags))


def test_elmo_takes_bilm_tf_defaults_where_the_flags_keep_berts():
    from training.pretrain import PretrainConfig
    from training.pretraining.config import with_model_defaults

    cfg = with_model_defaults(PretrainConfig(model="elmo", learning_rate=0.5))
    assert (cfg.optimizer, cfg.learning_rate, cfg.clip_norm, cfg.warmup_steps,
            cfg.max_seq_length, cfg.global_batch_size) == ("adagrad", 0.5, 10.0, 0, 20, 16)
    assert with_model_defaults(PretrainConfig()) == PretrainConfig()
    # A typed flag is obeyed, even at BERT's default value.
    typed = {"optimizer": "adamw", "learning_rate": 0.002, "global_batch_size": 32}
    cfg = with_model_defaults(PretrainConfig(model="elmo", **typed), explicit=set(typed))
    assert (cfg.optimizer, cfg.learning_rate, cfg.global_batch_size, cfg.max_seq_length) == (
        "adamw", 0.002, 32, 20)
    xlnet = with_model_defaults(PretrainConfig(model="xlnet", max_seq_length=128),
                                explicit={"max_seq_length"})
    assert (xlnet.max_seq_length, xlnet.max_predictions_per_seq) == (128, 11)


@pytest.mark.slow
def test_elmo_pretrains_end_to_end_and_exports_bilm_tf_files(tmp_path):
    """--model=elmo: vocabulary learned from the text, streamed records, fit
    with carried states, held-out perplexity against the unigram model,
    export whose bilm-tf files, SavedModel and Keras model agree."""
    train = write_docstring_corpus(tmp_path / "train.txt", (os.path, json), 60, 8, seed=0)
    heldout = write_docstring_corpus(tmp_path / "heldout.txt", (os.path, json), 10, 8, seed=1)
    output = tmp_path / "run"
    args = [f"--input={train}", f"--heldout_input={heldout}", f"--output_dir={output}",
            "--model=elmo", "--global_batch_size=4", "--max_seq_length=9", "--vocab_size=300",
            "--num_train_steps=6", "--checkpoint_every_steps=3", "--log_every_steps=3"]
    result = run_python(["-m", "training.pretrain", *args], ROOT, ENV, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Training elmo_tiny ELMo" in result.stdout
    with open(output / "summary.json") as f:
        summary = json.load(f)
    assert summary["batches_trained"] == 6
    for key in ("perplexity", "forward_perplexity", "backward_perplexity",
                "baseline_unigram_perplexity"):
        assert np.isfinite(summary[key]) and summary[key] > 1, summary
    with open(output / "run_config.json") as f:
        run = json.load(f)
    assert (run["optimizer"], run["learning_rate"], run["clip_norm"]) == ("adagrad", 0.2, 10.0)

    export = output / "export"
    assert load_elmo_vocab(str(export / "vocab.txt"))[:3] == ["<S>", "</S>", "<UNK>"]
    backbone = load_elmo_checkpoint(str(export / "options.json"), str(export / "lm_weights.hdf5"))
    lm = keras.saving.load_model(export / "language_model.keras", compile=False)
    assert isinstance(lm, ElmoLanguageModel) and lm.vocab_size == 300
    sentences = [["Return", "the", "path", "."], ["Héllo", "wörld"]]
    chars = batch_char_ids(sentences)
    ours = backbone(chars, training=False)
    trained = stateless_copy(lm.backbone)(chars, training=False)
    for name in ("forward_output", "backward_output"):
        np.testing.assert_allclose(ours[name], trained[name], atol=1e-6)
    serving = tf.saved_model.load(str(export / "saved_model"))
    tokens = tf.constant([s + [""] * (4 - len(s)) for s in sentences])
    out = serving.signatures["serving_default"](tokens=tokens)
    assert out["lm_embeddings"].shape == (2, 3, 4, 128)
    np.testing.assert_array_equal(out["mask"].numpy(), [[1, 1, 1, 1], [1, 1, 0, 0]])
    top = np.concatenate([ours["forward_output"], ours["backward_output"]], -1)  # (2, 6, 128)
    np.testing.assert_allclose(out["lm_embeddings"][0, 2].numpy(), top[0, 1:5], atol=1e-5)
    np.testing.assert_allclose(out["lm_embeddings"][1, 2, :2].numpy(), top[1, 1:3], atol=1e-5)
    tf1 = tf1_session_outputs(str(export / "saved_model"), "serving_default",
                              {"tokens": tokens.numpy()})  # as TF Serving loads it
    np.testing.assert_allclose(tf1["lm_embeddings"], out["lm_embeddings"].numpy(), atol=1e-6)
