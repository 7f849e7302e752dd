"""SQuAD's official metrics (`training/tasks/squad_metrics.py`): answer
normalization, exact match and F1, and the v2.0 script's scores and
threshold search.

Metric values below are worked by hand from the official scripts' rules.
(Reading, windows, decoding and the round trips through these metrics:
`tests/test_squad.py`.)
"""

import pytest

from training.tasks import squad_metrics


def test_normalize_answer():
    assert squad_metrics.normalize_answer("The  Quick, brown FOX!") == "quick brown fox"
    assert squad_metrics.normalize_answer("an apple a day") == "apple day"
    assert squad_metrics.normalize_answer("theatre") == "theatre"  # whole words only
    assert squad_metrics.normalize_answer("the-end") == "theend"  # punctuation goes first
    assert squad_metrics.normalize_answer(" A. ") == ""


def test_exact_and_f1_by_hand():
    assert squad_metrics.exact_match("Eiffel Tower", "the eiffel tower.") == 1
    assert squad_metrics.exact_match("Eiffel Tower", "Eiffel") == 0
    # gold {quick, brown, fox}, prediction {quick, fox, jumps}: P = R = 2/3.
    assert squad_metrics.f1_v1("the quick brown fox", "quick fox jumps") == pytest.approx(2 / 3)
    assert squad_metrics.f1_v2("the quick brown fox", "quick fox jumps") == pytest.approx(2 / 3)
    # Repeated words count up to their multiplicity: P = 1/2, R = 1.
    assert squad_metrics.f1_v1("new", "new new") == pytest.approx(2 / 3)
    # Empty answers: v1 never matches, v2 matches only empty with empty.
    assert squad_metrics.f1_v1("", "") == 0
    assert squad_metrics.f1_v2("", "") == 1
    assert squad_metrics.f1_v2("the", "") == 1  # "the" normalizes to nothing
    assert squad_metrics.f1_v2("", "Denver") == 0
    assert squad_metrics.f1_v2("Denver", "") == 0


def _dataset(*qas):
    return [{"paragraphs": [{"context": "unused", "qas": list(qas)}]}]


def _q(qid, *golds):
    return {"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in golds]}


def test_evaluate_v1_multiple_golds_and_missing_prediction():
    dataset = _dataset(_q("a", "Denver Broncos", "Broncos"), _q("b", "New York City"), _q("c", "x"))
    # a: "the Broncos" matches gold 2 (EM 1, F1 1); b: "York" has P=1, R=1/3,
    # F1=1/2; c: missing, scores 0 but counts.
    result = squad_metrics.evaluate_v1(dataset, {"a": "the Broncos", "b": "York"})
    assert result == pytest.approx({"exact_match": 100 / 3, "f1": 50.0})
    assert squad_metrics.evaluate_v1({"data": dataset}, {"a": "x"})["exact_match"] == 0.0
    with pytest.raises(ValueError, match="evaluate_v2"):
        squad_metrics.evaluate_v1(_dataset({"id": "z", "answers": []}), {"z": ""})


def _v2_case():
    dataset = _dataset(
        _q("q1", "Broncos", "the Broncos"),
        _q("q2"),  # unanswerable
        _q("q3", "a"),  # its only gold normalizes to "": gold becomes [""]
        _q("q4"),  # unanswerable
    )
    preds = {"q1": "Denver Broncos", "q2": "", "q3": "", "q4": "something"}
    return dataset, preds


def test_evaluate_v2_by_hand():
    dataset, preds = _v2_case()
    # Raw: q1 EM 0, F1 2/3 (P 1/2, R 1); q2 1/1; q3 1/1; q4 0/0.
    result = squad_metrics.evaluate_v2(dataset, preds)
    assert result == pytest.approx({
        "exact": 50.0, "f1": 100 * (2 / 3 + 2) / 4, "total": 4,
        "HasAns_exact": 50.0, "HasAns_f1": 100 * (2 / 3 + 1) / 2, "HasAns_total": 2,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})
    assert list(result)[:3] == ["exact", "f1", "total"]


def test_evaluate_v2_threshold_search_by_hand():
    dataset, preds = _v2_case()
    na_probs = {"q1": 0.1, "q2": 0.9, "q3": 0.5, "q4": 0.6}
    result = squad_metrics.evaluate_v2(dataset, preds, na_probs, na_prob_thresh=0.55)
    # q2 and q4 are over 0.55: both become "no answer", right for both.
    assert result["exact"] == pytest.approx(75.0)
    assert result["f1"] == pytest.approx(100 * (2 / 3 + 3) / 4)
    # Start at 2 (both unanswerable right); in na_prob order: q1 +0 (EM) or
    # +2/3 (F1), q3 +1 -> peak at 0.5, q4 -1 (answered wrongly), q2 +0.
    assert result["best_exact"] == pytest.approx(75.0)
    assert result["best_exact_thresh"] == 0.5
    assert result["best_f1"] == pytest.approx(100 * (2 / 3 + 3) / 4)
    assert result["best_f1_thresh"] == 0.5
    # Nothing beats "all unanswered": the script's threshold stays 0.0.
    scores = {"q1": 0, "q2": 1, "q3": 0, "q4": 0}
    has_ans = {"q1": True, "q2": False, "q3": True, "q4": False}
    best = squad_metrics.find_best_thresh(preds, scores, na_probs, has_ans)
    assert best == (50.0, 0.0)


def test_evaluate_v2_missing_predictions_fail_kindly():
    dataset, preds = _v2_case()
    del preds["q3"]
    with pytest.raises(ValueError, match=r"1 question\(s\) have no prediction.*q3"):
        squad_metrics.evaluate_v2(dataset, preds)
    with pytest.raises(ValueError, match="na_probs"):
        squad_metrics.evaluate_v2(dataset, _v2_case()[1], {"q1": 0.0})
