"""Raw-text signatures of GPT's and ELMo's task exports against the fine-tuning path.

`--task=text_classification`'s SavedModel takes raw strings for every
family. Each test builds the task object the entry point builds (the same
files, tokenizer and `_encode`), exports the task model, calls the text
signatures and checks the ids or words they read, then the logits, label
strings and probabilities, against that Python path and the Keras model.
"""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (GPT's text signatures' ops)

from keras_bert_impl.gpt import GptBackbone
from keras_bert_impl.gpt import GptConfig
from keras_bert_impl.gpt import grow_vocabulary
from keras_bert_impl.gpt.gpt_serving import export_gpt_saved_model
from keras_bert_impl.gpt.gpt_task_models import GptClassifier
from keras_bert_impl.gpt.gpt_task_models import GptMultipleChoice
from keras_bert_impl.gpt.gpt_task_models import GptTokenTagger
from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
from keras_bert_impl.tokenizers.basic_tokenizer import BasicTokenizer
from training.finetune import FinetuneConfig
from training.tasks.glue import InputExample

GOLDENS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens")
VOCAB = os.path.join(GOLDENS, "gpt_bpe", "vocab.json")
MERGES = os.path.join(GOLDENS, "gpt_bpe", "merges.txt")
LABELS = ("meh", "no", "yes")  # sorted, as the task sorts the training file's

# Accents (composed and decomposed), punctuation, CJK, Greek capital sigma,
# texts of no words (empty, spaces, a zero-width space), and one long enough
# to be cut.
TEXTS_A = ["Héllo, wörld!", "", "Ça va? Très bien...", "   ",
           "Cafe\u0301 ΣΊΣΥΦΟΣ 日本語", "\u200b",
           "the cat sat on the mat and the dog ran off to the park again today"]
TEXTS_B = ["Yes.", "well -- maybe", "", "No!!", "(fine)", "ok", "short"]


def _files(tmp_path):
    rows = [("good film", "nice", "yes"), ("bad film", "awful", "no"), ("so so", "hm", "meh")]
    paths = []
    for split in ("train", "dev"):
        path = tmp_path / f"{split}.csv"
        with open(path, "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows([("title", "body", "label"), *rows])
        paths.append(str(path))
    return paths


def _config(tmp_path, model, pair, **changes):
    train, dev = _files(tmp_path)
    family = {"gpt": {"lm_coef": 0.5}, "elmo": {"elmo_lstm_units": 5}}[model]  # `resolve`'s
    return FinetuneConfig(model=model, task="text_classification", train_file=train,
                          dev_file=dev, text_column="title", text_b_column="body" if pair else "",
                          label_column="label", batch_size=4, **family, **changes)


def _examples(pair):
    return [InputExample(f"x-{i}", a, b if pair else None, LABELS[i % 3])
            for i, (a, b) in enumerate(zip(TEXTS_A, TEXTS_B))]


def _strings(tensor):
    return [s.decode() for s in np.asarray(tensor).ravel()]


def _check_labels(served, logits):
    """`logits` as the Keras model's; `label` its argmax's string; `probabilities` its softmax."""
    np.testing.assert_allclose(served["logits"].numpy(), logits, atol=1e-5)
    assert _strings(served["label"]) == [LABELS[i] for i in np.argmax(logits, -1)]
    np.testing.assert_allclose(served["probabilities"].numpy(),
                               tf.nn.softmax(logits).numpy(), atol=1e-5)


# --- GPT ------------------------------------------------------------------------------


def _gpt_backbone(vocab_size):
    """Odd sizes: hidden 12, 4 heads (2 head branches in two exports), 1 layer, 16 positions; the 3
    fine-tuning tokens appended."""
    config = GptConfig(vocab_size=vocab_size, n_positions=16, n_embd=12, n_layer=1, n_head=4)
    return grow_vocabulary(GptBackbone.from_config_object(config), 3)


def _gpt_task(cfg, name=None):
    from training.gpt.finetune import GptGlueTask
    from training.gpt.finetune import make_gpt_task

    tokenizer = GptTokenizer(VOCAB, MERGES)
    if name is None:
        return make_gpt_task(cfg, tokenizer)
    return GptGlueTask(tokenizer, name, data_dir=cfg.data_dir, max_seq_length=cfg.max_seq_length,
                       batch_size=cfg.batch_size, window_stride=cfg.window_stride,
                       skip_bad_input=cfg.skip_bad_input, lm_coef=cfg.lm_coef)


def test_gpt_classifier_text_signatures_build_the_finetuning_ids(tmp_path):
    single = _gpt_task(_config(tmp_path, "gpt", pair=False, max_seq_length=11))
    pairs = _gpt_task(_config(tmp_path, "gpt", pair=True, max_seq_length=11))
    assert tuple(single.class_labels) == LABELS
    model = pairs.build_model(_gpt_backbone(pairs.tokenizer.vocab_size))
    assert not model.similarity
    path = str(tmp_path / "saved_model")
    assert export_gpt_saved_model(model, path, VOCAB, MERGES, max_seq_length=11,
                                  labels=LABELS, head_branches=2) == [
        "serving_default", "serving_text", "serving_text_pair"]
    serving = tf.saved_model.load(path)
    for task, pair in ((single, False), (pairs, True)):
        encoded = task._encode(_examples(pair))  # the entry point's ids
        if pair:
            served = serving.signatures["serving_text_pair"](text_a=tf.constant(TEXTS_A),
                                                             text_b=tf.constant(TEXTS_B))
        else:
            served = serving.signatures["serving_text"](text=tf.constant(TEXTS_A))
        for name in ("input_word_ids", "input_mask"):
            np.testing.assert_array_equal(served[name].numpy(), encoded.x[name], err_msg=name)
        _check_labels(served, task._predict(model, encoded.x))
    assert (encoded.x["input_mask"].sum(1) == 11).any()  # the long text was cut
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"text_b: 1 rows, but text_a has 2: "
                                                             r"a pair request needs as many"):
        serving.signatures["serving_text_pair"](text_a=tf.constant(["a", "b"]),
                                                text_b=tf.constant(["c"]))
    empty = serving.signatures["serving_text"](text=tf.constant([], tf.string))
    assert empty["logits"].shape == (0, 3) and empty["label"].shape == (0,)


def test_gpt_similarity_classifier_serves_pairs_in_both_orders(tmp_path):
    task = _gpt_task(_config(tmp_path, "gpt", pair=True, max_seq_length=9), name="mrpc")
    model = task.build_model(_gpt_backbone(task.tokenizer.vocab_size))
    assert model.similarity  # MRPC: both orders, their final states added
    path = str(tmp_path / "saved_model")
    assert export_gpt_saved_model(model, path, VOCAB, MERGES, max_seq_length=9,
                                  head_branches=2) == [
        "serving_default", "serving_text_pair"]  # one text has no second order
    served = tf.saved_model.load(path).signatures["serving_text_pair"](
        text_a=tf.constant(TEXTS_A), text_b=tf.constant(TEXTS_B))
    examples = [InputExample(f"x-{i}", a, b, "1") for i, (a, b) in enumerate(zip(TEXTS_A,
                                                                                    TEXTS_B))]
    encoded = task._encode(examples)
    assert encoded.x["input_word_ids"].shape == (7, 2, 9)
    for name in ("input_word_ids", "input_mask"):
        np.testing.assert_array_equal(served[name].numpy(), encoded.x[name], err_msg=name)
    np.testing.assert_allclose(served["logits"].numpy(), task._predict(model, encoded.x),
                               atol=1e-5)
    assert "label" not in served  # exported without labels


def test_gpt_text_signatures_refuse_what_cannot_match(tmp_path):
    tokenizer = GptTokenizer(VOCAB, MERGES)
    backbone = _gpt_backbone(tokenizer.vocab_size)
    path = str(tmp_path / "saved_model")
    wrong = GptClassifier(backbone, 3, tokenizer.vocab_size + 1)  # not `_classify_`'s id
    with pytest.raises(ValueError, match=r"classify_id=4001: pass the vocab.json"):
        export_gpt_saved_model(wrong, path, VOCAB, MERGES, max_seq_length=11)
    model = GptClassifier(backbone, 3, tokenizer.classify_token_id)
    with pytest.raises(ValueError, match=r"in \[3, n_positions=16\].*max_seq_length=17"):
        export_gpt_saved_model(model, path, VOCAB, MERGES, max_seq_length=17)
    assert not os.path.exists(path)
    # Sets of pairs and labels per BPE piece: ids only, vocabulary or not.
    choices = GptMultipleChoice(backbone, tokenizer.classify_token_id)
    assert export_gpt_saved_model(choices, path, VOCAB, MERGES, max_seq_length=11) == [
        "serving_default"]
    tagger = GptTokenTagger(backbone, 4)
    assert export_gpt_saved_model(tagger, path, VOCAB, MERGES, max_seq_length=11) == [
        "serving_default"]


def test_graph_gpt_pack_takes_the_finetuning_ids():
    """The text signatures pack with `FineTuningIds.appended_to(vocab_size)`, as the entry
    point, not the tokenizer's own ids (which differ for a vocab.json holding `_start_`)."""
    from keras_bert_impl.gpt.gpt_inputs import FineTuningIds
    from keras_bert_impl.gpt.gpt_inputs import entailment_inputs
    from keras_bert_impl.gpt.graph_gpt_tokenizer import GraphGptTokenizer

    tokenizer = GraphGptTokenizer(VOCAB, MERGES)
    special = FineTuningIds(7, 5, 3)
    a, b = tf.ragged.constant([[11, 12, 13, 14], []]), tf.ragged.constant([[21], [22, 23]])
    packed = tokenizer.pack(a, b, 6, special)
    expected = entailment_inputs(a.to_list(), b.to_list(), special, 6)
    np.testing.assert_array_equal(packed["input_word_ids"].numpy(), expected["input_word_ids"])


# --- ELMo -----------------------------------------------------------------------------


def _elmo_backbone():
    """Odd sizes: F=15 filters, P=6, U=11, C=9 characters per token (longer words cut)."""
    from keras_bert_impl.elmo import ElmoBackbone
    from keras_bert_impl.elmo import ElmoConfig

    return ElmoBackbone.from_config_object(ElmoConfig(
        filters=((1, 3), (2, 5), (3, 7)), n_highway=1, projection_dim=6, lstm_dim=11,
        n_layers=2, char_embedding_dim=5, max_characters_per_token=9))


def _elmo_words(task, ids):
    """The words a row of the task's word-table ids holds (`<S>`, `</S>`, padding left out)."""
    return [task.words.words[i] for i in ids if i > 2]


@pytest.mark.parametrize("pair", [False, True])
def test_elmo_classifier_text_signature_reads_the_finetuning_words(tmp_path, pair):
    from keras_bert_impl.elmo.elmo_task_serving import export_elmo_task_saved_model
    from training.elmo.finetune import make_elmo_task

    cfg = _config(tmp_path, "elmo", pair, max_seq_length=8)
    task = make_elmo_task(cfg, BasicTokenizer(do_lower_case=False))  # the entry point's
    model = task.build_model(_elmo_backbone())
    path = str(tmp_path / "saved_model")
    text = "serving_text_pair" if pair else "serving_text"
    assert export_elmo_task_saved_model(model, path, labels=LABELS, max_seq_length=8) == [
        "serving_default", text, "serving_tokens"]
    signature = tf.saved_model.load(path).signatures[text]
    if pair:
        served = signature(text_a=tf.constant(TEXTS_A), text_b=tf.constant(TEXTS_B))
    else:
        served = signature(text=tf.constant(TEXTS_A))
    encoded = task._encode(_examples(pair))  # word-table rows, (N, T) or (N, 2, T)
    rows = encoded.x["input_word_ids"]
    columns = [rows[:, 0], rows[:, 1]] if pair else [rows]
    words = {}
    for name, column in zip(["words_a", "words_b"] if pair else ["words"], columns):
        words[name] = [[w for w in _strings(row) if w] for row in served[name].numpy()]
        assert words[name] == [_elmo_words(task, ids) for ids in column], name
    first = words["words_a" if pair else "words"]
    assert first[0] == ["Héllo", ",", "wörld", "!"]  # cased, punctuation split off
    assert first[-1] == TEXTS_A[-1].split()[:6]  # max_seq_length - 2 words kept
    # The entry point's character ids of those rows (`char_id_batches`), one batch, eager.
    (x,), = task.char_id_batches(model, encoded.x, batch_size=len(rows))
    _check_labels(served, np.asarray(model(x, training=False)))


def test_elmo_bilm_text_signature_and_tagger(tmp_path):
    from keras_bert_impl.elmo import batch_char_ids
    from keras_bert_impl.elmo.elmo_serving import export_elmo_saved_model
    from keras_bert_impl.elmo.elmo_task_models import ElmoTokenTagger
    from keras_bert_impl.elmo.elmo_task_serving import export_elmo_task_saved_model

    backbone = _elmo_backbone()
    path = str(tmp_path / "bilm")
    assert "serving_text" in export_elmo_saved_model(backbone, path)
    signatures = tf.saved_model.load(path).signatures
    served = signatures["serving_text"](text=tf.constant(TEXTS_A))
    words = [BasicTokenizer(do_lower_case=False).tokenize(t) for t in TEXTS_A]
    assert [[w for w in _strings(row) if w] for row in served["words"].numpy()] == words
    chars = signatures["serving_char_ids"](char_ids=tf.constant(batch_char_ids(words, 9)))
    for name in ("lm_embeddings", "mask"):
        np.testing.assert_allclose(served[name].numpy(), chars[name].numpy(), atol=1e-6)
    tagger = ElmoTokenTagger(backbone, 4, lstm_units=5)  # labels per given word: words only
    assert export_elmo_task_saved_model(tagger, str(tmp_path / "tagger")) == [
        "serving_default", "serving_tokens"]
    with pytest.raises(ValueError, match=r"max_seq_length=2"):
        export_elmo_task_saved_model(tagger, str(tmp_path / "tagger"), max_seq_length=2)
