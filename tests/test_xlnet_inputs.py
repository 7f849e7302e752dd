"""XLNet fine-tuning's input layouts (`xlnet_inputs`): transformers' XLNet
tokenizer's rows (`<cls>` last, left padding, segments), BERT's layout moved
into XLNet's, per-position arrays, refusals."""

import json
import os

import numpy as np
import pytest
from xlnet_finetune_cases import GOLDENS
from xlnet_finetune_cases import NAMES
from xlnet_finetune_cases import SPECIAL
from xlnet_finetune_cases import random_rows
from xlnet_finetune_cases import spm_tokenizer  # noqa: F401 (the `tokenizer` fixture)

from keras_bert_impl.xlnet.xlnet_inputs import XLNetSpecialIds
from keras_bert_impl.xlnet.xlnet_inputs import from_bert_layout
from keras_bert_impl.xlnet.xlnet_inputs import left_pad
from keras_bert_impl.xlnet.xlnet_inputs import multiple_choice_inputs
from keras_bert_impl.xlnet.xlnet_inputs import pack_example
from keras_bert_impl.xlnet.xlnet_inputs import text_inputs

# transformers' layouts on the test SentencePiece model (make_xlnet_layout_goldens.py).
LAYOUTS = os.path.join(GOLDENS, "xlnet_layout_goldens.json")


def test_layouts_are_transformers_xlnet_tokenizers(tokenizer):
    """Each golden case: transformers' ids packed by our code equal transformers'
    packed row (`<cls>` last, left padding, segments, truncation), padding
    segment 4 where transformers writes 3; our tokenizer gives its ids."""
    golden = json.load(open(LAYOUTS, encoding="utf-8"))
    assert golden["special_ids"] == {"sep": 4, "cls": 3, "pad": 5}
    assert XLNetSpecialIds.of(tokenizer) == SPECIAL
    for case in golden["cases"]:
        length = case["max_length"]
        x = text_inputs([case["ids_a"]], None if case["ids_b"] is None else [case["ids_b"]],
                        SPECIAL, length)
        real = np.asarray(case["attention_mask"])
        np.testing.assert_array_equal(x["input_word_ids"][0], case["input_ids"], str(case))
        np.testing.assert_array_equal(x["input_mask"][0], 1 - real)
        np.testing.assert_array_equal(x["input_type_ids"][0],
                                      np.where(real == 1, case["token_type_ids"], 4))
        assert (np.asarray(case["token_type_ids"])[real == 0] == 3).all()
        assert case["input_ids"][-1] == SPECIAL.cls  # <cls> last even when cut
        assert tokenizer.encode(case["text_a"]) == case["ids_a"]
        if case["text_b"] is not None:
            assert tokenizer.encode(case["text_b"]) == case["ids_b"]
        # The tokenizer's own packing (`XLNetTokenizer.__call__`) agrees.
        packed = tokenizer(case["text_a"], case["text_b"], max_length=length)
        for name in NAMES:
            np.testing.assert_array_equal(packed[name], x[name], name)


def test_readers_bert_layout_moves_into_xlnets(tokenizer):
    """GLUE's reader (BERT's layout, truncation and all) + `from_bert_layout`
    gives transformers' rows too; an empty B is a single text there, as the
    original `classifier_utils` (`if example.text_b`)."""
    from training.tasks import glue
    from training.xlnet.finetune import _XLNetPieces

    golden = json.load(open(LAYOUTS, encoding="utf-8"))
    for case in golden["cases"]:
        example = glue.InputExample("g-1", case["text_a"], case["text_b"], None)
        bert = glue.encode_examples([example], _XLNetPieces(tokenizer), ("0",),
                                    case["max_length"]).x
        x, source = from_bert_layout(bert, SPECIAL)
        if case["text_b"] == "":
            expected = text_inputs([case["ids_a"]], None, SPECIAL, case["max_length"])
            np.testing.assert_array_equal(x["input_word_ids"], expected["input_word_ids"])
            continue
        np.testing.assert_array_equal(x["input_word_ids"][0], case["input_ids"])
        np.testing.assert_array_equal(x["input_mask"][0], 1 - np.asarray(case["attention_mask"]))
        # `source` says where each token came from.
        np.testing.assert_array_equal(
            np.take_along_axis(bert["input_word_ids"], source, -1)[x["input_mask"] == 0],
            x["input_word_ids"][x["input_mask"] == 0])


def test_layout_details_and_per_position_arrays():
    rng = np.random.default_rng(0)
    x = multiple_choice_inputs(random_rows(rng, 2, 2),
                               [random_rows(rng, 3, 3), random_rows(rng, 3, 3)], SPECIAL, 9)
    assert x["input_word_ids"].shape == (2, 3, 9)
    assert {v.dtype for v in x.values()} == {np.dtype("int32")}
    assert (x["input_word_ids"][..., -1] == SPECIAL.cls).all()
    assert (x["input_type_ids"][..., -1] == 2).all()
    # Padding only on the left: the mask never goes 0 -> 1.
    assert (np.diff(x["input_mask"], axis=-1) <= 0).all()
    assert ((x["input_word_ids"] == SPECIAL.pad) == (x["input_mask"] == 1)).all()
    # BERT rows of every length; a per-position array of labels follows its tokens.
    lengths = np.array([2, 5, 9, 3])
    bert = {"input_word_ids": rng.integers(9, 99, (4, 9)),
            "input_type_ids": (np.arange(9)[None] >= lengths[:, None] // 2).astype(int),
            "input_mask": (np.arange(9)[None] < lengths[:, None]).astype(int)}
    bert["input_word_ids"][:, 0] = SPECIAL.cls
    labels = bert["input_word_ids"] * 10  # a label tied to each token
    out, source = from_bert_layout(bert, SPECIAL)
    moved = np.take_along_axis(labels, source, -1)
    for row, n in enumerate(lengths):
        tokens = bert["input_word_ids"][row]
        expected = [SPECIAL.pad] * (9 - n) + tokens[1:n].tolist() + [tokens[0]]
        assert out["input_word_ids"][row].tolist() == expected
        assert out["input_mask"][row].tolist() == [1] * (9 - n) + [0] * n
        real = out["input_mask"][row] == 0
        np.testing.assert_array_equal(moved[row][real], 10 * out["input_word_ids"][row][real])
        assert out["input_type_ids"][row, -1] == 2 and (out["input_type_ids"][row, :9 - n] == 4).all()


def test_layout_errors():
    with pytest.raises(ValueError, match="max_seq_length"):
        pack_example([1], [2], SPECIAL, 3)
    with pytest.raises(ValueError, match="integer token ids"):
        pack_example(["a"], None, SPECIAL, 8)
    with pytest.raises(ValueError, match="same number"):
        multiple_choice_inputs([[1], [2]], [[[3], [4]], [[5]]], SPECIAL, 8)
    with pytest.raises(ValueError, match="three different"):
        XLNetSpecialIds(4, 4, 5)
    with pytest.raises(ValueError, match="1 to max_seq_length"):
        left_pad([([1, 2, 3], [0, 0, 2])], 2, 5)
    with pytest.raises(ValueError, match="BERT's layout"):
        from_bert_layout({"input_word_ids": np.ones((1, 4)), "input_type_ids": np.zeros((1, 4)),
                          "input_mask": np.array([[0, 1, 1, 1]])}, SPECIAL)
