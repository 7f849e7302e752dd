"""GPT fine-tuning's input transformations (`gpt_inputs`): the paper's
layouts, truncation that keeps the classify token, refusals."""

import numpy as np
import pytest
from gpt_cases import SPECIAL
from gpt_cases import C
from gpt_cases import D
from gpt_cases import S

from keras_bert_impl.gpt.gpt_inputs import FineTuningIds
from keras_bert_impl.gpt.gpt_inputs import entailment_inputs
from keras_bert_impl.gpt.gpt_inputs import multiple_choice_inputs
from keras_bert_impl.gpt.gpt_inputs import similarity_inputs
from keras_bert_impl.gpt.gpt_inputs import text_inputs


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
