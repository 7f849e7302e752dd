"""XLNet's fine-tuning tasks and entry point (`training/xlnet/finetune.py`):
SQuAD windows and decoding, NER rows, length-grouped batches, each task end
to end (the module-scoped `tiny_keras`, a 1-layer XLNet saved once), the
flags it refuses and the defaults it fills."""

import csv
import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from forked_python import run_python
from xlnet_finetune_cases import DATA
from xlnet_finetune_cases import GOLDENS
from xlnet_finetune_cases import PARITY
from xlnet_finetune_cases import SPECIAL
from xlnet_finetune_cases import SPM
from xlnet_finetune_cases import spm_tokenizer  # noqa: F401 (the `tokenizer` fixture)

from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
from keras_bert_impl.xlnet.xlnet_config import XLNetConfig
from keras_bert_impl.xlnet.xlnet_inputs import text_inputs
from keras_bert_impl.xlnet.xlnet_task_models import XLNetClassifier
from training.finetune import FinetuneConfig
from training.finetune import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tiny_keras(tmp_path_factory):
    """A 1-layer XLNet over the 4,000-piece model, as a `.keras` file."""
    config = XLNetConfig(vocab_size=4000, d_model=12, n_layer=1, n_head=3, d_inner=37)
    path = str(tmp_path_factory.mktemp("tiny") / "xlnet.keras")
    XLNetBackbone.from_config_object(config).save(path)
    keras.backend.clear_session(free_memory=False)
    return path


def _squad_folder(tmp_path, version="1.1", extra=None):
    folder = tmp_path / f"squad{version}"
    folder.mkdir()
    dataset = json.load(open(os.path.join(DATA, "squad", f"tiny-v{version}.json")))
    if extra:
        dataset["data"].append(extra)
    for split in ("train", "dev"):
        json.dump(dataset, open(folder / f"{split}-v{version}.json", "w"))
    return folder


def test_squad_windows_and_decoding_recover_the_answers(tokenizer, tmp_path):
    """Small windows: the gold positions spell the answer in every window
    that holds it. One window: gold positions as logits decode to the gold
    answers, one inside a word ("1895" of "(1895-1943).") included."""
    from training.tasks import squad
    from training.tasks.squad_metrics import normalize_answer
    from training.tasks.xlnet_squad import decode_xlnet_squad
    from training.tasks.xlnet_squad import xlnet_squad_features

    context = "Dvořák lived (1895-1943). He wrote nine symphonies and many other works."
    extra = {"title": "x", "paragraphs": [{"context": context, "qas": [
        {"id": "born", "question": "When?", "answers": [
            {"text": "1895", "answer_start": context.index("1895")}]},
        {"id": "how-many", "question": "How many symphonies?", "answers": [
            {"text": "nine", "answer_start": context.index("nine")}]}]}]}
    folder = _squad_folder(tmp_path, extra=extra)
    examples, _ = squad.read_squad_examples(str(folder / "train-v1.1.json"), True)
    # Windows of 32 - 8 - 3 = 21 pieces, 8 apart: each answer (at most 11
    # pieces) lies whole in one of them.
    features = xlnet_squad_features(examples, tokenizer, max_seq_length=32, doc_stride=8,
                                    max_query_length=8, is_training=True)
    x, y = features.x, features.y
    assert len(features) > 3 * len(examples)  # several windows per paragraph
    assert (x["input_word_ids"][:, -1] == SPECIAL.cls).all()
    assert (x["input_word_ids"][:, -2] == SPECIAL.sep).all()
    found = set()
    for row, example_index in enumerate(features.example_index):
        example = examples[example_index]
        # The question, as B, ends every row; the paragraph (A) comes first.
        query = tokenizer.encode(example.question_text)[:8]
        assert x["input_word_ids"][row, -len(query) - 2:-2].tolist() == query
        assert (x["input_type_ids"][row, -len(query) - 2:-1] == 1).all()
        start, end = y["start_logits"][row], y["end_logits"][row]
        if start == 31:  # <cls>: the window misses the answer
            continue
        pieces = [tokenizer.id_to_piece(i) for i in x["input_word_ids"][row, start:end + 1]]
        spelled = "".join(pieces).replace("\u2581", "")
        assert spelled == tokenizer.preprocess(example.orig_answer_text).replace(" ", "")
        found.add(example.qas_id)
    assert found == {e.qas_id for e in examples}
    features = xlnet_squad_features(examples, tokenizer, 256, 128, 64, is_training=True)
    assert len(features) == len(examples)  # one window each
    y = features.y
    start = np.where(np.arange(256)[None] == y["start_logits"][:, None], 10.0, 0.0)
    end = np.where(np.arange(256)[None] == y["end_logits"][:, None], 10.0, 0.0)
    predictions, nbest, _ = decode_xlnet_squad(examples, features, start, end)
    for example in examples:
        assert normalize_answer(predictions[example.qas_id]) == normalize_answer(
            example.orig_answer_text), example.qas_id
    assert predictions["born"] == "1895" and predictions["how-many"] == "nine"
    assert nbest["born"][0]["probability"] > 0.5
    # "No answer" is the last position, <cls>: v2 decodes "" when it wins there.
    null_start, null_end = np.zeros_like(start), np.zeros_like(end)
    null_start[:, -1] = null_end[:, -1] = 10.0
    predictions, _, null_odds = decode_xlnet_squad(examples, features, null_start, null_end,
                                                   version_2_with_negative=True)
    assert set(predictions.values()) == {""} and min(null_odds.values()) > 0


def test_ner_rows_keep_labels_on_each_words_first_piece(tokenizer, tmp_path):
    from training.tasks import conll
    from training.xlnet.finetune import make_xlnet_task

    folder = tmp_path / "conll"
    folder.mkdir()
    shutil.copy(os.path.join(DATA, "conll", "eng_sample.txt"), folder / "train.txt")
    cfg = FinetuneConfig(model="xlnet", task="ner", data_dir=str(folder), max_seq_length=96)
    task = make_xlnet_task(cfg, tokenizer)
    encoded = task._encode("train")
    sentences = task._data["train"].sentences
    x = encoded.x
    assert (x["input_word_ids"][:, -1] == SPECIAL.cls).all()
    for row, sentence_index in enumerate(encoded.sentence_index):
        sentence = sentences[sentence_index]
        labelled = np.flatnonzero(encoded.sample_weight[row])
        words = encoded.word_index[row, labelled]
        assert words.tolist() == list(range(len(sentence.words)))  # every word, in order
        for position, word in zip(labelled, words):
            assert x["input_word_ids"][row, position] == tokenizer.encode(sentence.words[word])[0]
            assert task.label_list[encoded.y[row, position]] == sentence.labels[word]
    # Gold labels as logits decode to the gold tags, word for word.
    logits = np.eye(len(task.label_list))[encoded.y] * encoded.sample_weight[..., None]
    predicted = conll.decode_predictions(logits, encoded, task.label_list)
    assert predicted == [list(s.labels) for s in sentences]


def test_grouped_batches_cut_left_padding_and_keep_rows():
    from training.xlnet.finetune import grouped_left_padded_batches

    rng = np.random.default_rng(3)
    texts = [rng.integers(9, 99, n).tolist() for n in rng.integers(1, 30, 12)]
    x = text_inputs(texts, None, SPECIAL, 40)
    lengths = (x["input_mask"] == 0).sum(1)
    start = 40 - lengths + rng.integers(0, lengths)  # a real position per row
    y = {"start_logits": start.astype("int32"), "end_logits": np.full(12, 39, "int32")}
    tags = (x["input_word_ids"] % 7) * (1 - x["input_mask"])  # per-position targets
    span = grouped_left_padded_batches(x, y, None, batch_size=3, group=4, seed=5)
    tagging = grouped_left_padded_batches(x, tags, tags.astype("float32"), 3, 4, 5)
    seen, widths = [], set()
    for (bx, by), (tx, ty, tw) in zip(span, tagging):
        bx, by, tx, ty, tw = keras.tree.map_structure(np.asarray, (bx, by, tx, ty, tw))
        widths.add(bx["input_mask"].shape[1])
        assert (np.diff(bx["input_mask"], axis=1) <= 0).all()  # still left padding
        np.testing.assert_array_equal(tx["input_word_ids"], bx["input_word_ids"])  # same order
        for row in range(len(bx["input_word_ids"])):
            ids = bx["input_word_ids"][row]
            n = (bx["input_mask"][row] == 0).sum()
            original = [i for i in range(12) if lengths[i] == n and
                        (x["input_word_ids"][i, -n:] == ids[-n:]).all()][0]
            seen.append(original)
            cut = 40 - len(ids)
            assert by["start_logits"][row] == start[original] - cut  # the same token
            assert ids[by["start_logits"][row]] == x["input_word_ids"][original, start[original]]
            assert by["end_logits"][row] == len(ids) - 1  # <cls>
            np.testing.assert_array_equal(ty[row], tags[original, cut:])
            np.testing.assert_array_equal(tw[row], tags[original, cut:])
    assert sorted(seen) == list(range(12))
    assert len(widths) > 1 and max(widths) <= 40 and min(widths) < 40


# --- The entry point --------------------------------------------------------------------------


def _run(tmp_path, task, data_dir, tiny_keras, **changes):
    return run(FinetuneConfig(
        model="xlnet", task=task, data_dir=str(data_dir), output_dir=str(tmp_path / "out"),
        init_checkpoint=tiny_keras, vocab_file=SPM, do_lower_case=False, epochs=1,
        batch_size=4, **changes))


def test_finetune_glue_pair_end_to_end_and_export(tmp_path, tiny_keras, tokenizer):
    summary = _run(tmp_path, "glue/mrpc", os.path.join(DATA, "glue", "MRPC"), tiny_keras,
                   max_seq_length=48)
    config = summary["config"]
    assert (config["learning_rate"], config["warmup_proportion"], config["weight_decay"]) == (
        5e-5, 0.1, 0.0)
    assert {"loss", "accuracy", "dev_f1", "dev_accuracy"} <= set(summary["history"])
    out = tmp_path / "out"
    rows = list(csv.reader(open(out / "dev_predictions.tsv"), delimiter="\t"))
    assert rows[0] == ["guid", "prediction", "label"] and len(rows) == 3
    submission = list(csv.reader(open(out / "glue_submission" / "MRPC.tsv"), delimiter="\t"))
    assert submission[0] == ["index", "prediction"] and {r[1] for r in submission[1:]} <= {"0", "1"}
    model = keras.saving.load_model(str(out / "export" / "model.keras"))
    assert isinstance(model, XLNetClassifier) and model.num_classes == 2
    assert model.optimizer.built  # compiled again from the file, with its state
    # The SavedModel: text in (tokenized and packed in the graph) and ids in,
    # the same logits as Keras on our Python layout.
    texts_a, texts_b = ["A man eats bread.", "Tabs\tand 1,000 things"], ["Someone eats.", "x"]
    x = text_inputs(tokenizer.encode(texts_a), tokenizer.encode(texts_b), SPECIAL, 48)
    expected = np.asarray(model(x, training=False))
    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    served = serving.signatures["serving_text_pair"](text_a=tf.constant(texts_a),
                                                     text_b=tf.constant(texts_b))
    np.testing.assert_array_equal(served["input_word_ids"].numpy(), x["input_word_ids"])
    np.testing.assert_array_equal(served["input_type_ids"].numpy(), x["input_type_ids"])
    np.testing.assert_allclose(served["logits"].numpy(), expected, atol=1e-5)
    by_ids = serving.signatures["serving_default"](**{k: tf.constant(v) for k, v in x.items()})
    np.testing.assert_allclose(by_ids["logits"].numpy(), expected, atol=1e-5)


def test_finetune_glue_regression_end_to_end(tmp_path, tiny_keras):
    summary = _run(tmp_path, "glue/stsb", os.path.join(DATA, "glue", "STS-B"), tiny_keras,
                   max_seq_length=32, export=False)
    assert "dev_pearson" in summary["history"] and summary["export"] is None
    rows = list(csv.reader(open(tmp_path / "out" / "dev_predictions.tsv"), delimiter="\t"))
    assert all(np.isfinite(float(r[1])) for r in rows[1:])  # scores, not labels
    assert (tmp_path / "out" / "glue_submission" / "STS-B.tsv").exists()


def test_finetune_squad_end_to_end(tmp_path, tiny_keras):
    folder = _squad_folder(tmp_path, "2.0")
    summary = _run(tmp_path, "squad", folder, tiny_keras, max_seq_length=96, doc_stride=64,
                   length_grouping=0)  # one training shape: one trace
    assert summary["config"]["learning_rate"] == 2e-5
    dataset = json.load(open(os.path.join(DATA, "squad", "tiny-v2.0.json")))
    qids = {q["id"] for a in dataset["data"] for p in a["paragraphs"] for q in p["qas"]}
    out = tmp_path / "out"
    predictions = json.load(open(out / "predictions.json"))
    assert set(predictions) == qids and all(isinstance(v, str) for v in predictions.values())
    assert set(json.load(open(out / "null_odds.json"))) == qids
    assert 0 <= summary["history"]["dev_f1"][0] <= 100
    assert "dev_null_score_diff_threshold" in summary["history"]
    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    served = serving.signatures["serving_text_pair"](
        text_a=tf.constant(["The cat sat on the mat."]), text_b=tf.constant(["Who sat?"]))
    assert served["start_logits"].shape == (1, 96)
    assert (served["start_logits"].numpy()[served["input_mask"].numpy() == 1] == -1e30).all()


def test_finetune_ner_end_to_end_with_windows(tmp_path, tiny_keras):
    folder = tmp_path / "conll"
    folder.mkdir()
    for name in ("train.txt", "dev.txt"):
        shutil.copy(os.path.join(DATA, "conll", "eng_sample.txt"), folder / name)
    summary = _run(tmp_path, "ner", folder, tiny_keras, max_seq_length=16, window_stride=4)
    assert "dev_f1" in summary["history"]
    lines = open(tmp_path / "out" / "dev_predictions.txt").read().split("\n")
    words = [line.split() for line in lines if line.strip()]
    source = [line.split() for line in open(os.path.join(DATA, "conll", "eng_sample.txt"))
              if line.strip() and not line.startswith("-DOCSTART-")]
    assert [w[0] for w in words] == [s[0] for s in source]  # every word, windows merged
    assert (tmp_path / "out" / "export" / "model.keras").exists()


@pytest.mark.slow(seconds=20)  # a process of its own
def test_finetune_swag_from_the_command_line(tmp_path, tiny_keras):
    """`python -m training.finetune --model=xlnet`: cased unless told
    otherwise (XLNet's released models are); multiple choice exports ids only."""
    out = tmp_path / "out"
    command = ["-m", "training.finetune", "--model=xlnet", "--task=swag",
               f"--data_dir={os.path.join(DATA, 'swag')}", f"--output_dir={out}",
               f"--init_checkpoint={tiny_keras}", f"--vocab_file={SPM}", "--max_seq_length=32",
               "--epochs=1", "--batch_size=4"]
    result = run_python(command, ROOT,
                        {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = json.load(open(out / "summary.json"))
    assert summary["config"]["do_lower_case"] is False
    assert summary["config"]["learning_rate"] == 2e-5
    assert "val_accuracy" in summary["history"]
    for name in ("val_predictions.csv", "test_predictions.csv"):
        rows = list(csv.reader(open(out / name)))
        assert rows[0] == ["guid", "prediction"] and {r[1] for r in rows[1:]} <= set("0123")
    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    assert set(serving.signatures) == {"serving_default"}  # ids only: sets of pairs
    assert serving.signatures["serving_default"].structured_input_signature[1][
        "input_word_ids"].shape.rank == 3


@pytest.mark.parametrize("changes, message", [
    (dict(), "needs --init_checkpoint"),
    (dict(preset="tiny"), "not an XLNet preset"),
    (dict(preset="xlnet_debug"), "No spiece.model beside"),
    (dict(preset="xlnet_debug", init_checkpoint="x.keras"), "not both"),
    (dict(init_checkpoint="missing.keras"), "neither a Hugging Face"),
    (dict(preset="xlnet_debug", vocab_file=os.path.join(DATA, "conll", "eng_sample.txt")),
     "not a SentencePiece model"),
    (dict(preset="xlnet_debug", vocab_file=SPM, lm_coef=0.5), "not XLNet's"),
    (dict(preset="xlnet_debug", vocab_file=SPM, merges_file="merges.txt"), "not XLNet's"),
    (dict(preset="xlnet_debug", vocab_file=SPM, ablation="ltr"), "option of BERT"),
    (dict(init_checkpoint=PARITY, vocab_file=SPM), "has 99 token rows"),
    (dict(init_checkpoint=os.path.join(GOLDENS, "gpt_parity"), vocab_file=SPM),
     "Unknown XLNet config keys"),
])


def test_bad_flags_are_refused_before_anything_is_written(tmp_path, changes, message):
    out = tmp_path / "out"
    cfg = FinetuneConfig(**{"model": "xlnet", "task": "glue/rte", "data_dir": str(tmp_path),
                            "output_dir": str(out), **changes})
    with pytest.raises(SystemExit, match=message):
        run(cfg)
    assert not out.exists()


def test_resolve_fills_xlnets_defaults_and_finds_spiece(tmp_path):
    from training.finetuning.config import resolve

    folder = tmp_path / "checkpoint"  # resolve reads config.json only
    folder.mkdir()
    XLNetConfig(vocab_size=4000, d_model=12, n_layer=1, n_head=3).to_json_file(
        str(folder / "config.json"))
    shutil.copy(SPM, folder / "spiece.model")
    base = dict(model="xlnet", data_dir=str(tmp_path), init_checkpoint=str(folder))
    glue_cfg = resolve(FinetuneConfig(task="glue/rte", **base))
    assert glue_cfg.vocab_file == str(folder / "spiece.model")
    assert (glue_cfg.learning_rate, glue_cfg.max_seq_length, glue_cfg.warmup_proportion,
            glue_cfg.weight_decay) == (5e-5, 128, 0.1, 0.0)
    squad_cfg = resolve(FinetuneConfig(task="squad", learning_rate=1e-5, **base))
    assert (squad_cfg.learning_rate, squad_cfg.max_seq_length) == (1e-5, 512)
    assert resolve(FinetuneConfig(task="swag", **base)).learning_rate == 2e-5
    with pytest.raises(SystemExit, match="no config.json"):
        resolve(FinetuneConfig(task="swag", **dict(base, init_checkpoint=str(tmp_path))))


def test_backbones_for_fine_tuning():
    """A Hugging Face folder loads without memory; its 99 rows cannot read a
    4,000-piece model; a two-stream memory backbone becomes the content
    stream alone with the same weights and the same outputs."""
    from training.xlnet.finetune import _for_fine_tuning
    from training.xlnet.finetune import build_xlnet_backbone

    cfg = FinetuneConfig(model="xlnet", init_checkpoint=PARITY, vocab_file=SPM)
    backbone = build_xlnet_backbone(cfg, 99)
    assert not backbone.two_stream and not backbone.xlnet_config.uses_memory
    with pytest.raises(SystemExit, match="has 99 token rows"):
        build_xlnet_backbone(cfg, 4000)
    config = backbone.xlnet_config.replace(mem_len=3, reuse_len=2, dropout=0.0)
    pretraining = XLNetBackbone.from_config_object(config, two_stream=True)
    pretraining.set_weights(backbone.get_weights())
    rebuilt = _for_fine_tuning(pretraining, None)
    assert not rebuilt.two_stream and rebuilt.xlnet_config.mem_len is None
    x = text_inputs([[10, 11, 12], [13]], [[20], [21, 22]], SPECIAL, 9)
    x = {**x, "input_mask": x["input_mask"].astype("float32")}
    full = pretraining({**x, "perm_mask": np.zeros((2, 9, 9), "float32"),
                        "target_mapping": np.eye(9, dtype="float32")[None, :1].repeat(2, 0),
                        "mems": np.zeros((2, 2, 0, 10), "float32")}, training=False)
    np.testing.assert_allclose(np.asarray(rebuilt(x, training=False)["sequence_output"]),
                               np.asarray(full["sequence_output"]), atol=1e-5)
    assert _for_fine_tuning(rebuilt, None) is rebuilt
