"""SQuAD exact match and F1, as the official evaluation scripts.

`evaluate_v1` gives the numbers of `evaluate-v1.1.py` and `evaluate_v2`
those of `evaluate-v2.0.py` (Rajpurkar et al. 2016, 2018): answers are
compared after `normalize_answer`, F1 is over the normalized words, and a
question scores the best of its gold answers. The two scripts differ on
empty answers: v1 gives F1 0 when both sides are empty, v2 gives 1 (an
empty prediction is how a model says "no answer"). `search_null_threshold`
tunes BERT's v2 null-score threshold with the v2 script's `find_best_thresh`.

`dataset` everywhere is the list under the official file's "data" key (a
whole file's dict is accepted too); `predictions` maps question ids to
answer text.

Example:
>>> dataset = [{"paragraphs": [{"qas": [
...     {"id": "q1", "answers": [{"text": "the Eiffel Tower"}]}]}]}]
>>> evaluate_v1(dataset, {"q1": "Eiffel tower!"})
{'exact_match': 100.0, 'f1': 100.0}
"""

import collections
import re
import string

_PUNCTUATION = set(string.punctuation)  # ASCII only, as the scripts
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """Lowercase, drop ASCII punctuation, the articles a/an/the, extra spaces.

    The scripts' order matters: punctuation goes before articles, so
    "the-end" becomes "theend" and keeps its "the".
    """
    text = text.lower()
    text = "".join(char for char in text if char not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(gold, prediction):
    """1 when the normalized texts are equal, else 0."""
    return int(normalize_answer(gold) == normalize_answer(prediction))


def _overlap_f1(gold_tokens, prediction_tokens):
    common = collections.Counter(gold_tokens) & collections.Counter(prediction_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_v1(gold, prediction):
    """Word-overlap F1 as `evaluate-v1.1.py`: 0 whenever nothing overlaps,
    even when both answers are empty."""
    return _overlap_f1(normalize_answer(gold).split(), normalize_answer(prediction).split())


def f1_v2(gold, prediction):
    """Word-overlap F1 as `evaluate-v2.0.py`: when either side normalizes to
    nothing, 1 if both do (a correct "no answer"), else 0."""
    gold_tokens = normalize_answer(gold).split()
    prediction_tokens = normalize_answer(prediction).split()
    if not gold_tokens or not prediction_tokens:
        return int(gold_tokens == prediction_tokens)
    return _overlap_f1(gold_tokens, prediction_tokens)


def _articles(dataset):
    return dataset["data"] if isinstance(dataset, dict) else dataset


def _questions(dataset):
    for article in _articles(dataset):
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def evaluate_v1(dataset, predictions):
    """SQuAD v1.1 scores, as `evaluate-v1.1.py`'s `evaluate`.

    A question without a prediction scores 0 and still counts in the total.

    Args:
        dataset: list. The official file's "data" (or the whole file).
        predictions: dict. Question id -> predicted text.

    Returns:
        dict with "exact_match" and "f1", each on a 0..100 scale.
    """
    exact = f1 = total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue  # the script scores it 0 (it prints a note)
        golds = [answer["text"] for answer in qa["answers"]]
        if not golds:
            raise ValueError(
                f"Question {qa['id']!r} has no gold answers; SQuAD v1.1 needs at least "
                "one. For v2.0 data (unanswerable questions) use `evaluate_v2`.")
        prediction = predictions[qa["id"]]
        exact += max(exact_match(gold, prediction) for gold in golds)
        f1 += max(f1_v1(gold, prediction) for gold in golds)
    if not total:
        raise ValueError("`dataset` holds no questions.")
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def make_qid_to_has_ans(dataset):
    """Question id -> whether it has a gold answer (v2)."""
    qid_to_has_ans = {qa["id"]: bool(qa["answers"]) for qa in _questions(dataset)}
    if not qid_to_has_ans:
        raise ValueError("`dataset` holds no questions.")
    return qid_to_has_ans


def get_raw_scores(dataset, predictions):
    """Per-question v2 exact and F1 (0/1 and 0..1), best over gold answers.

    Golds that normalize to nothing are dropped; a question left with none
    has [""] as its only gold, so only an empty prediction scores.
    """
    exact_scores, f1_scores = {}, {}
    missing = []
    for qa in _questions(dataset):
        qid = qa["id"]
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in predictions:
            missing.append(qid)
            continue
        prediction = predictions[qid]
        exact_scores[qid] = max(exact_match(gold, prediction) for gold in golds)
        f1_scores[qid] = max(f1_v2(gold, prediction) for gold in golds)
    if missing:
        # The v2 script prints these and then fails with a KeyError on its
        # HasAns/NoAns totals; say so plainly instead.
        raise ValueError(
            f"{len(missing)} question(s) have no prediction, e.g. {missing[:5]}. SQuAD v2.0 "
            "scores every question: predict \"\" for no answer.")
    return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    """Scores with "no answer" predicted wherever `na_probs` > threshold."""
    new_scores = {}
    for qid, score in scores.items():
        if na_probs[qid] > na_prob_thresh:
            new_scores[qid] = float(not qid_to_has_ans[qid])
        else:
            new_scores[qid] = score
    return new_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
    """{"exact", "f1", "total"} over `qid_list` (all when None), 0..100."""
    qid_list = list(exact_scores) if qid_list is None else qid_list
    total = len(qid_list)
    return {
        "exact": 100.0 * sum(exact_scores[k] for k in qid_list) / total,
        "f1": 100.0 * sum(f1_scores[k] for k in qid_list) / total,
        "total": total,
    }


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """Best total score over no-answer thresholds, as the v2 script.

    Starts from "every question unanswered" (each unanswerable one scores
    1), then answers questions in increasing `na_probs` order: an
    answerable one adds its score, an unanswerable one loses 1 if the
    prediction is not empty. The threshold is the `na_probs` value where
    the running total peaked (0.0 if it never beat the start; the script's
    convention for probabilities in [0, 1]).

    Returns:
        (best score on a 0..100 scale, threshold).
    """
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = best_score = num_no_ans
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """SQuAD v2.0 scores, as `evaluate-v2.0.py` (without its plots).

    Args:
        dataset: list. The official file's "data" (or the whole file).
        predictions: dict. Question id -> text; "" means no answer.
        na_probs: optional dict. Question id -> no-answer score (the
            script's `--na-prob-file`; BERT's null odds work too). Adds the
            "best_*" entries.
        na_prob_thresh: float. Questions whose `na_probs` exceed it count
            as answered "no answer" (1.0, as the script).

    Returns:
        dict with "exact", "f1", "total", then "HasAns_exact", "HasAns_f1",
        "HasAns_total" and "NoAns_*" (when such questions exist), and, with
        `na_probs`, "best_exact", "best_exact_thresh", "best_f1",
        "best_f1_thresh". Scores are on a 0..100 scale.
    """
    qid_to_has_ans = make_qid_to_has_ans(dataset)
    has_na_probs = na_probs is not None
    if not has_na_probs:
        na_probs = {qid: 0.0 for qid in predictions}
    missing = [qid for qid in qid_to_has_ans if qid not in na_probs]
    if has_na_probs and missing:
        raise ValueError(f"`na_probs` lacks {len(missing)} question id(s), e.g. {missing[:5]}.")
    exact_raw, f1_raw = get_raw_scores(dataset, predictions)
    exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    result = make_eval_dict(exact_thresh, f1_thresh)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [k for k, v in qid_to_has_ans.items() if v == wanted]
        if qids:
            for key, value in make_eval_dict(exact_thresh, f1_thresh, qids).items():
                result[f"{prefix}_{key}"] = value
    if has_na_probs:
        best_exact, exact_threshold = find_best_thresh(predictions, exact_raw, na_probs, qid_to_has_ans)
        best_f1, f1_threshold = find_best_thresh(predictions, f1_raw, na_probs, qid_to_has_ans)
        result["best_exact"] = best_exact
        result["best_exact_thresh"] = exact_threshold
        result["best_f1"] = best_f1
        result["best_f1_thresh"] = f1_threshold
    return result


def search_null_threshold(dataset, nbest, null_odds):
    """The `null_score_diff_threshold` with the best dev F1 (v2).

    What the BERT README does by hand with `evaluate-v2.0.py --na-prob-file`:
    the v2 script's `find_best_thresh` over the null odds, applied to each
    question's best non-null answer (so every threshold is scored as if
    decoding had used it).

    Args:
        dataset: list. The dev file's "data" (or the whole file).
        nbest, null_odds: from `training.tasks.squad.decode_predictions(...,
            version_2_with_negative=True)`.

    Returns:
        float. Pass it as `null_score_diff_threshold`.
    """
    answers = {qid: next((e["text"] for e in entries if e["text"]), "") for qid, entries in nbest.items()}
    qid_to_has_ans = make_qid_to_has_ans(dataset)
    missing = [qid for qid in qid_to_has_ans if qid not in null_odds]
    if missing:
        raise ValueError(f"`null_odds` lacks {len(missing)} question id(s), e.g. {missing[:5]}.")
    _, f1_raw = get_raw_scores(dataset, answers)
    best_f1, threshold = find_best_thresh(answers, f1_raw, null_odds, qid_to_has_ans)
    num_no_ans = sum(1 for has_ans in qid_to_has_ans.values() if not has_ans)
    if best_f1 == 100.0 * num_no_ans / len(f1_raw):
        # Never beat "all unanswered"; the script's 0.0 means that only for
        # probabilities. Null odds can be negative: go below all of them.
        threshold = min(null_odds[qid] for qid in f1_raw) - 1.0
    return threshold
