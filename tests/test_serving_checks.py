"""Every family's SavedModel checks each request in the graph (`serving_checks`).

Over 400 lines: every family's export checked the same way, on one
module-scoped export each (`bert`, `gpt`, `xlnet`, `elmo`, and the task exports
`xlnet_choice`, `elmo_pairs`); the text signatures' tests read `bert` and
`elmo` together.

One export per family (module-scoped), loaded with `tf.saved_model.load`:
bad requests fail with an `InvalidArgumentError` naming the input and the
allowed range or shape; a good request's outputs equal the Keras model's;
an empty batch returns empty outputs.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertPretrainer
from keras_bert_impl import preset
from keras_bert_impl.bert.bert_serving import export_saved_model
from keras_bert_impl.elmo.char_ids import batch_char_ids
from keras_bert_impl.elmo.elmo_backbone import ElmoBackbone
from keras_bert_impl.elmo.elmo_backbone import remove_sentence_boundaries
from keras_bert_impl.elmo.elmo_config import ElmoConfig
from keras_bert_impl.elmo.elmo_serving import export_elmo_saved_model
from keras_bert_impl.elmo.elmo_task_models import ElmoPairClassifier
from keras_bert_impl.elmo.elmo_task_serving import export_elmo_task_saved_model
from keras_bert_impl.gpt.gpt_backbone import GptBackbone
from keras_bert_impl.gpt.gpt_config import GptConfig
from keras_bert_impl.gpt.gpt_serving import export_gpt_saved_model
from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
from keras_bert_impl.xlnet.xlnet_config import XLNetConfig
from keras_bert_impl.xlnet.xlnet_pretrainer import XLNetPretrainer
from keras_bert_impl.xlnet.xlnet_serving import export_xlnet_pretrainer_saved_model
from keras_bert_impl.xlnet.xlnet_task_models import XLNetMultipleChoice
from keras_bert_impl.xlnet.xlnet_task_serving import export_xlnet_task_saved_model

# Odd sizes (style rule 16): batch 3, sequence 7, vocabulary 99.
B, S, V = 3, 7, 99
RNG = np.random.default_rng(17)
WORD_IDS = RNG.integers(1, V, (B, S)).astype(np.int32)
MASK = np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4], np.int32)
TYPE_IDS = np.array([[0] * 4 + [1] * 3, [0] * 7, [0] * 2 + [1] * 5], np.int32)


def _constants(x):
    return {name: tf.constant(value) for name, value in x.items()}


def _message(error):
    """The error's lines a user reads (no TensorFlow frame lines)."""
    return " ".join(line for line in str(error.value).splitlines()
                    if not line.startswith(("Graph execution", "Detected at", "<stack", "\t")))


def _rejects(signature, request, match):
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        signature(**_constants(request))
    assert match in _message(error), _message(error)


# --- BERT: serving_default with masked_lm_positions ------------------------------------------

BERT_REQUEST = {"input_word_ids": WORD_IDS, "input_mask": MASK, "input_type_ids": TYPE_IDS,
                "masked_lm_positions": np.array([[1, 6], [0, 4], [2, 2]], np.int32)}


BERT_TEXT_SIGNATURES = {}  # serving_text and serving_text_pair of the `bert` export


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    config = preset("tiny").replace(vocab_size=V, max_position_embeddings=16)
    model = BertPretrainer(BertBackbone.from_bert_config(config))
    folder = tmp_path_factory.mktemp("bert")
    vocab = folder / "vocab.txt"  # V tokens: the specials, then words
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                *(f"w{i}" for i in range(V - 5))]) + "\n")
    path = export_saved_model(model, str(folder / "saved_model"), str(vocab), max_seq_length=16)
    signatures = tf.saved_model.load(path).signatures
    BERT_TEXT_SIGNATURES.update(text=signatures["serving_text"],
                                pair=signatures["serving_text_pair"])
    return model, signatures["serving_default"]


def _with(request, **changes):
    return {**request, **{k: np.asarray(v, np.int32) for k, v in changes.items()}}


def _one_changed(array, value):
    array = array.copy()
    array[1, 3] = value
    return array


BERT_BAD = {
    "negative id": (_with(BERT_REQUEST, input_word_ids=_one_changed(WORD_IDS, -5)),
                    "input_word_ids: values must be in [0, 99) (vocab_size); got min -5 max "
                    f"{_one_changed(WORD_IDS, -5).max()}"),
    "id == vocab_size": (_with(BERT_REQUEST, input_word_ids=_one_changed(WORD_IDS, V)),
                         "input_word_ids: values must be in [0, 99) (vocab_size); got min "
                         f"{WORD_IDS.min()} max 99"),
    "type id 2": (_with(BERT_REQUEST, input_type_ids=TYPE_IDS * 2),
                  "input_type_ids: values must be in [0, 2) (type_vocab_size); got min 0 max 2"),
    "mask 3": (_with(BERT_REQUEST, input_mask=MASK * 3),
               "input_mask: values must be in [0, 2) (0 or 1); got min 0 max 3"),
    "shorter mask": (_with(BERT_REQUEST, input_mask=MASK[:, :6]),
                     "input_mask: shape [3 6] does not match the shape of input_word_ids [3 7]"),
    "fewer type rows": (_with(BERT_REQUEST, input_type_ids=TYPE_IDS[:2]),
                        "input_type_ids: shape [2 7] does not match the shape of "
                        "input_word_ids [3 7]"),
    # One input of another rank (with several, any of them may be named first).
    "rank 1": (_with(BERT_REQUEST, input_word_ids=WORD_IDS[0]),
               "Shape of tensor input_word_ids [7] is not compatible with expected shape [?,?]"),
    "rank 3": (_with(BERT_REQUEST, input_type_ids=TYPE_IDS[..., None]),
               "Shape of tensor input_type_ids [3,7,1] is not compatible with expected "
               "shape [?,?]"),
    "position == seq_len": (_with(BERT_REQUEST, masked_lm_positions=[[1, 7], [0, 4], [2, 2]]),
                            "masked_lm_positions: values must be in [0, 7) (the sequence length of "
                            "input_word_ids); got min 0 max 7"),
    "negative position": (_with(BERT_REQUEST, masked_lm_positions=[[1, -1], [0, 4], [2, 2]]),
                          "masked_lm_positions: values must be in [0, 7)"),
    "positions of another batch": (_with(BERT_REQUEST, masked_lm_positions=[[1, 6]]),
                                   "masked_lm_positions: shape [1 2] does not match (batch of "
                                   "input_word_ids, any) [3 -1]"),
    "longer than max_position_embeddings": (
        {**{k: np.tile(v, (1, 3)) for k, v in BERT_REQUEST.items() if k != "masked_lm_positions"},
         "masked_lm_positions": BERT_REQUEST["masked_lm_positions"]},
        "input_word_ids: sequences must be 1 to max_position_embeddings=16 tokens long; got 21"),
    "empty sequences": ({**{k: v[:, :0] for k, v in BERT_REQUEST.items()}},
                        "sequences must be 1 to max_position_embeddings=16 tokens long; got 0"),
}


@pytest.mark.parametrize("case", sorted(BERT_BAD))
def test_bert_rejects_bad_requests(bert, case):
    _, serve = bert
    request, match = BERT_BAD[case]
    _rejects(serve, request, match)


def test_bert_good_and_empty_requests(bert):
    model, serve = bert
    out = serve(**_constants(BERT_REQUEST))
    expected = model(BERT_REQUEST, training=False)
    backbone = model.backbone({k: v for k, v in BERT_REQUEST.items() if k != "masked_lm_positions"},
                              training=False)
    np.testing.assert_allclose(out["masked_lm"], expected["masked_lm"], atol=1e-5)
    np.testing.assert_allclose(out["next_sentence"], expected["next_sentence"], atol=1e-5)
    np.testing.assert_allclose(out["sequence_output"], backbone["sequence_output"], atol=1e-5)
    empty = serve(**_constants({k: v[:0] for k, v in BERT_REQUEST.items()}))
    assert empty["masked_lm"].shape == (0, 2, V)
    assert empty["pooled_output"].shape == (0, 128)


# Text requests (every family's text signatures share `checked_texts`).
TEXT_BAD = [
    ({"text": np.array("w1 w2")}, "Shape of tensor text [] is not compatible with expected shape"),
    ({"text": np.array([["w1"], ["w2"]])}, "Shape of tensor text [2,1] is not compatible"),
    ({"text": np.array(["w1"] * 1025)},
     "text: 1025 rows in one request; at most 1024 "
     "(serving_checks.request_bounds at export)"),
    ({"text": np.array(["w1", "w2 " * 30_000])}, "text: a string of 90000 bytes; at most 65536"),
]


@pytest.mark.parametrize("request_, match", TEXT_BAD)
def test_text_signatures_refuse_requests_out_of_bounds(bert, elmo, request_, match):
    _rejects(BERT_TEXT_SIGNATURES["text"], request_, match)
    _rejects(elmo[1]["serving_text"], request_, match)


def test_pair_text_signatures_refuse_unequal_rows(bert, elmo_pairs):
    request = {"text_a": np.array(["w1", "w2"]), "text_b": np.array(["w3"])}
    match = "text_b: 1 rows, but text_a has 2: a pair request needs as many of each"
    _rejects(BERT_TEXT_SIGNATURES["pair"], request, match)
    _rejects(elmo_pairs[1]["serving_text_pair"], request, match)
    good = BERT_TEXT_SIGNATURES["pair"](text_a=tf.constant(["w1 w2"]), text_b=tf.constant(["w3"]))
    assert good["input_word_ids"].shape[0] == 1


def test_request_bounds_are_set_at_export(tmp_path):
    from keras_bert_impl.base.serving_checks import request_bounds

    model = BertBackbone.from_bert_config(preset("tiny").replace(vocab_size=V,
                                                                 max_position_embeddings=16))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                *(f"w{i}" for i in range(V - 5))]) + "\n")
    with request_bounds(max_rows=2, max_bytes=10):
        path = export_saved_model(model, str(tmp_path / "saved_model"), str(vocab),
                                  max_seq_length=16)
    text = tf.saved_model.load(path).signatures["serving_text"]
    _rejects(text, {"text": np.array(["w1", "w2", "w3"])}, "text: 3 rows in one request; at "
                                                           "most 2")
    _rejects(text, {"text": np.array(["w1 w2 w3 w4"])}, "a string of 11 bytes; at most 10")
    assert text(text=tf.constant(["w1", "w2"]))["sequence_output"].shape[0] == 2


# --- GPT --------------------------------------------------------------------------------------

GPT_REQUEST = {"input_word_ids": WORD_IDS, "input_mask": MASK}


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    model = GptBackbone.from_config_object(
        GptConfig(vocab_size=V, n_positions=16, n_embd=12, n_layer=1, n_head=3))
    path = str(tmp_path_factory.mktemp("gpt") / "saved_model")
    export_gpt_saved_model(model, path)
    return model, tf.saved_model.load(path).signatures["serving_default"]


GPT_BAD = {
    "negative id": (_with(GPT_REQUEST, input_word_ids=-WORD_IDS),
                    "input_word_ids: values must be in [0, 99) (vocab_size); got min "
                    f"{-WORD_IDS.max()} max {-WORD_IDS.min()}"),
    "id == vocab_size": (_with(GPT_REQUEST, input_word_ids=np.full((B, S), V)),
                         "input_word_ids: values must be in [0, 99) (vocab_size); got min 99"),
    "mask 2": (_with(GPT_REQUEST, input_mask=MASK * 2),
               "input_mask: values must be in [0, 2) (0 or 1); got min 0 max 2"),
    "longer mask": (_with(GPT_REQUEST, input_mask=np.ones((B, 8))),
                    "input_mask: shape [3 8] does not match the shape of input_word_ids [3 7]"),
    "rank 1": (_with(GPT_REQUEST, input_mask=MASK[0]),
               "Shape of tensor input_mask [7] is not compatible with expected shape [?,?]"),
    "longer than n_positions": ({k: np.tile(v, (1, 3)) for k, v in GPT_REQUEST.items()},
                                "input_word_ids: sequences must be 1 to n_positions=16 tokens "
                                "long; got 21"),
}


@pytest.mark.parametrize("case", sorted(GPT_BAD))
def test_gpt_rejects_bad_requests(gpt, case):
    _, serve = gpt
    request, match = GPT_BAD[case]
    _rejects(serve, request, match)


def test_gpt_good_and_empty_requests(gpt):
    model, serve = gpt
    out = serve(**_constants(GPT_REQUEST))
    expected = model(GPT_REQUEST, training=False)
    for name in ("lm_logits", "sequence_output"):
        np.testing.assert_allclose(out[name], expected[name], atol=1e-5)
    assert serve(**_constants({k: v[:0] for k, v in GPT_REQUEST.items()}))["lm_logits"].shape == (
        0, S, V)


# --- XLNet: the pretrainer (serving_default, serving_plm) and a task model -------------------

XLNET_REQUEST = {"input_word_ids": WORD_IDS, "input_type_ids": TYPE_IDS, "input_mask": 1 - MASK}
PERM = np.triu(np.ones((S, S), np.float32), 1)[None].repeat(B, 0)  # (B, S, S)
TARGETS = np.eye(S, dtype=np.float32)[None, [5, 6]].repeat(B, 0)  # (B, 2, S)
XLNET_CONFIG = XLNetConfig(vocab_size=V, d_model=12, n_layer=1, n_head=3, d_inner=37, dropout=0.0)


@pytest.fixture(scope="module")
def xlnet(tmp_path_factory):
    model = XLNetPretrainer(XLNetBackbone.from_config_object(XLNET_CONFIG, two_stream=True))
    path = str(tmp_path_factory.mktemp("xlnet") / "saved_model")
    export_xlnet_pretrainer_saved_model(model, path)
    return model, tf.saved_model.load(path).signatures


XLNET_BAD = {
    "negative id": (_with(XLNET_REQUEST, input_word_ids=-WORD_IDS),
                    "input_word_ids: values must be in [0, 99) (vocab_size); got min "
                    f"{-WORD_IDS.max()} max {-WORD_IDS.min()}"),
    "id == vocab_size": (_with(XLNET_REQUEST, input_word_ids=np.full((B, S), V)),
                         "input_word_ids: values must be in [0, 99) (vocab_size); got min 99"),
    "mask 2": (_with(XLNET_REQUEST, input_mask=MASK * 2),
               "input_mask: values must be in [0, 2) (0 or 1, 1 = padding); got min 0 max 2"),
    "shorter type ids": (_with(XLNET_REQUEST, input_type_ids=TYPE_IDS[:, 1:]),
                         "input_type_ids: shape [3 6] does not match the shape of "
                         "input_word_ids [3 7]"),
    "rank 1": (_with(XLNET_REQUEST, input_word_ids=WORD_IDS[0]),
               "Shape of tensor input_word_ids [7] is not compatible with expected shape [?,?]"),
    "empty sequences": ({k: v[:, :0] for k, v in XLNET_REQUEST.items()},
                        "input_word_ids: sequences must hold at least 1 token; got length 0"),
}


@pytest.mark.parametrize("case", sorted(XLNET_BAD))
def test_xlnet_rejects_bad_requests(xlnet, case):
    _, signatures = xlnet
    request, match = XLNET_BAD[case]
    _rejects(signatures["serving_default"], request, match)
    _rejects(signatures["serving_plm"],
             {**request, "perm_mask": PERM, "target_mapping": TARGETS}, match)


@pytest.mark.parametrize("name, value, match", [
    ("perm_mask", PERM[:, :, :6],
     "perm_mask: shape [3 7 6] does not match (batch, length, length) of input_word_ids [3 7 7]"),
    ("target_mapping", TARGETS[:2],
     "target_mapping: shape [2 2 7] does not match (batch, any, length) of "
     "input_word_ids [3 -1 7]"),
    ("target_mapping", TARGETS[0],
     "Shape of tensor target_mapping [2,7] is not compatible with expected shape [?,?,?]"),
    ("perm_mask", PERM * 2, "perm_mask: values must be 0 or 1; got min 0 max 2"),
    ("perm_mask", PERM - 0.5, "perm_mask: values must be 0 or 1; got min -0.5 max 0.5"),
    ("target_mapping", TARGETS * 0.5, "target_mapping: values must be 0 or 1; got min 0 max 0.5"),
    ("target_mapping", np.ones_like(TARGETS),
     "target_mapping: each row must be one-hot or all zeros; a row holds 7 ones"),
])
def test_xlnet_plm_rejects_masks_of_other_shapes_and_values(xlnet, name, value, match):
    _, signatures = xlnet
    request = {**XLNET_REQUEST, "perm_mask": PERM, "target_mapping": TARGETS, name: value}
    _rejects(signatures["serving_plm"], request, match)


def test_xlnet_pretrained_with_bi_data_serves_every_row_forwards(tmp_path):
    """bi_data is pretraining's data layout (the second half of a batch read
    backwards): a served batch of 3 rows answers as the forward model, each
    row alone as in the batch, not half of them with negated positions."""
    config = XLNET_CONFIG.replace(bi_data=True)
    model = XLNetPretrainer(XLNetBackbone.from_config_object(config, two_stream=True))
    export_xlnet_pretrainer_saved_model(model, str(tmp_path / "saved_model"))
    serve = tf.saved_model.load(str(tmp_path / "saved_model")).signatures["serving_default"]
    forward = XLNetBackbone.from_config_object(XLNET_CONFIG, two_stream=True)
    forward.set_weights(model.backbone.get_weights())
    x = {**XLNET_REQUEST, "input_mask": XLNET_REQUEST["input_mask"].astype(np.float32),
         "perm_mask": 0 * PERM, "target_mapping": 0 * TARGETS[:, :1]}
    want = forward(x, training=False)["sequence_output"]
    out = serve(**_constants(XLNET_REQUEST))["sequence_output"]  # a batch of B = 3
    np.testing.assert_allclose(out, want, atol=1e-5)
    last = serve(**_constants({k: v[2:] for k, v in XLNET_REQUEST.items()}))["sequence_output"]
    np.testing.assert_allclose(last[0], out[2], atol=1e-5)


def test_xlnet_good_and_empty_requests(xlnet):
    model, signatures = xlnet
    x = {**XLNET_REQUEST, "input_mask": XLNET_REQUEST["input_mask"].astype(np.float32),
         "perm_mask": PERM, "target_mapping": TARGETS}
    out = signatures["serving_plm"](**_constants({**XLNET_REQUEST, "perm_mask": PERM,
                                                  "target_mapping": TARGETS}))
    np.testing.assert_allclose(out["plm_logits"], model(x, training=False), atol=1e-5)
    content = model.backbone({**x, "perm_mask": 0 * PERM, "target_mapping": 0 * TARGETS[:, :1]},
                             training=False)["sequence_output"]
    out = signatures["serving_default"](**_constants(XLNET_REQUEST))
    np.testing.assert_allclose(out["sequence_output"], content, atol=1e-5)
    empty = signatures["serving_default"](
        **_constants({k: v[:0] for k, v in XLNET_REQUEST.items()}))
    assert empty["sequence_output"].shape == (0, S, 12)


@pytest.fixture(scope="module")
def xlnet_choice(tmp_path_factory):
    model = XLNetMultipleChoice(XLNetBackbone.from_config_object(XLNET_CONFIG))
    path = str(tmp_path_factory.mktemp("xlnet_choice") / "saved_model")
    export_xlnet_task_saved_model(model, path)
    return model, tf.saved_model.load(path).signatures["serving_default"]


CHOICE_REQUEST = {k: np.stack([v, v[::-1]], axis=1) for k, v in XLNET_REQUEST.items()}  # (B, 2, S)


@pytest.mark.parametrize("request_, match", [
    (_with(CHOICE_REQUEST, input_word_ids=CHOICE_REQUEST["input_word_ids"] + V),
     "input_word_ids: values must be in [0, 99) (vocab_size)"),
    (_with(CHOICE_REQUEST, input_word_ids=WORD_IDS),  # the choice axis missing
     "Shape of tensor input_word_ids [3,7] is not compatible with expected shape [?,?,?]"),
    (_with(CHOICE_REQUEST, input_mask=CHOICE_REQUEST["input_mask"][:, :1]),
     "input_mask: shape [3 1 7] does not match the shape of input_word_ids [3 2 7]"),
])
def test_xlnet_task_rejects_bad_requests(xlnet_choice, request_, match):
    _rejects(xlnet_choice[1], request_, match)


def test_xlnet_task_good_request(xlnet_choice):
    model, serve = xlnet_choice
    out = serve(**_constants(CHOICE_REQUEST))["logits"]
    np.testing.assert_allclose(out, model(CHOICE_REQUEST, training=False), atol=1e-5)


# --- ELMo: the biLM (serving_char_ids) and a pair classifier ----------------------------------

SENTENCES = [["The", "cat", "sat"], ["Hi"], ["A", "longer", "sentence", "here", "."]]
ELMO_CONFIG = ElmoConfig(filters=((1, 3), (2, 5)), n_highway=1, projection_dim=6, lstm_dim=11,
                         n_layers=1, char_embedding_dim=5, max_characters_per_token=9)
CHAR_IDS = batch_char_ids(SENTENCES, 9)  # (3, 7, 9) with <S> and </S>


@pytest.fixture(scope="module")
def elmo(tmp_path_factory):
    backbone = ElmoBackbone.from_config_object(ELMO_CONFIG)
    path = str(tmp_path_factory.mktemp("elmo") / "saved_model")
    export_elmo_saved_model(backbone, path)
    return backbone, tf.saved_model.load(path).signatures


ELMO_BAD = {
    "id == n_characters": (np.where(CHAR_IDS == 100, 262, CHAR_IDS),
                           "char_ids: values must be in [0, 262) (n_characters; 0 is padding); "
                           "got min 0 max 262"),
    "negative id": (-CHAR_IDS, "char_ids: values must be in [0, 262)"),
    "other max_characters_per_token": (
        CHAR_IDS[..., :8], "Shape of tensor char_ids [3,7,8] is not compatible with expected "
                           "shape [?,?,9]"),
    "rank 2": (CHAR_IDS[0], "Shape of tensor char_ids [7,9] is not compatible with expected "
                            "shape [?,?,9]"),
    "no tokens": (CHAR_IDS[:, :0], "char_ids: sequences must hold at least 1 token; got length 0"),
}


@pytest.mark.parametrize("case", sorted(ELMO_BAD))
def test_elmo_rejects_bad_requests(elmo, case):
    char_ids, match = ELMO_BAD[case]
    _rejects(elmo[1]["serving_char_ids"], {"char_ids": char_ids}, match)


def test_elmo_good_and_empty_requests(elmo):
    backbone, signatures = elmo
    out = signatures["serving_char_ids"](char_ids=tf.constant(CHAR_IDS))
    expected = backbone(CHAR_IDS, training=False)
    layers = [remove_sentence_boundaries(keras.ops.cast(layer, "float32"), expected["mask"])[0]
              for layer in expected["lm_embeddings"]]
    np.testing.assert_allclose(out["lm_embeddings"], np.stack(layers, axis=1), atol=1e-5)
    empty = signatures["serving_char_ids"](char_ids=tf.constant(CHAR_IDS[:0]))
    assert empty["lm_embeddings"].shape[:2] == (0, 2)
    assert signatures["serving_default"](tokens=tf.fill([0, 3], ""))["mask"].shape == (0, 3)


@pytest.fixture(scope="module")
def elmo_pairs(tmp_path_factory):
    model = ElmoPairClassifier(ElmoBackbone.from_config_object(ELMO_CONFIG), num_classes=3,
                               lstm_units=7, hidden_units=13)
    path = str(tmp_path_factory.mktemp("elmo_pairs") / "saved_model")
    export_elmo_task_saved_model(model, path)
    return model, tf.saved_model.load(path).signatures


PAIR_CHAR_IDS = np.stack([CHAR_IDS, CHAR_IDS[::-1]], axis=1)  # (B, 2, T, C)


@pytest.mark.parametrize("request_, match", [
    ({"char_ids": PAIR_CHAR_IDS + 300}, "char_ids: values must be in [0, 262)"),
    ({"char_ids": np.concatenate([PAIR_CHAR_IDS, PAIR_CHAR_IDS[:, :1]], axis=1)},
     "Shape of tensor char_ids [3,3,7,9] is not compatible with expected shape [?,2,?,9]"),
])
def test_elmo_task_rejects_bad_requests(elmo_pairs, request_, match):
    _rejects(elmo_pairs[1]["serving_default"], request_, match)


def test_elmo_task_rejects_token_pairs_of_other_batches(elmo_pairs):
    tokens = np.array([["a", "b"], ["c", ""]])
    _rejects(elmo_pairs[1]["serving_tokens"], {"tokens_a": tokens, "tokens_b": tokens[:1]},
             "tokens_b: 1 rows, but tokens_a has 2: a pair request needs as many of each")


def test_elmo_task_good_and_empty_requests(elmo_pairs):
    model, signatures = elmo_pairs
    out = signatures["serving_default"](char_ids=tf.constant(PAIR_CHAR_IDS))["logits"]
    np.testing.assert_allclose(out, model(PAIR_CHAR_IDS, training=False), atol=1e-5)
    empty = signatures["serving_default"](char_ids=tf.constant(PAIR_CHAR_IDS[:0]))["logits"]
    assert empty.shape == (0, 3)
    no_words = tf.fill([0, 4], "")
    assert signatures["serving_tokens"](tokens_a=no_words, tokens_b=no_words)["logits"].shape == (
        0, 3)
