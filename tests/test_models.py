import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import make_inputs
from helpers import run_backbone_test
from helpers import run_task_test

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertCausalLMPretrainer
from keras_bert_impl import BertMaskedLMPretrainer
from keras_bert_impl import BertPretrainer
from keras_bert_impl.speed.fast_dropout import FastDropout


def _targets(x, vocab=99, seed=0):
    rng = np.random.default_rng(seed)
    batch, predictions = x["masked_lm_positions"].shape
    y = {"masked_lm": rng.integers(0, vocab, (batch, predictions)).astype("int32"),
         "next_sentence": rng.integers(0, 2, (batch,)).astype("int32")}
    weights = np.ones((batch, predictions), "float32")
    weights[0, -1] = 0  # a padded prediction slot
    sw = {"masked_lm": weights, "next_sentence": np.ones((batch,), "float32")}
    return y, sw


def test_backbone_outputs(odd_config):
    backbone = BertBackbone.from_bert_config(odd_config)
    out, rebuilt, _ = run_backbone_test(
        backbone, make_inputs(), {"sequence_output": (3, 7, 12), "pooled_output": (3, 12)})
    assert len(out["encoder_outputs"]) == 2
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
    assert backbone.bert_config == odd_config
    assert rebuilt.bert_config == odd_config


def test_backbone_variable_sequence_length(odd_config):
    backbone = BertBackbone.from_bert_config(odd_config)
    for seq in (1, 5, 16):
        out = backbone(make_inputs(seq=seq, pad_last=0))
        assert out["sequence_output"].shape == (3, seq, 12)


def test_padding_does_not_change_real_positions(odd_config):
    backbone = BertBackbone.from_bert_config(odd_config)
    x = make_inputs(batch=1, seq=5, pad_last=0)
    padded = {k: np.pad(v, ((0, 0), (0, 3))) for k, v in x.items()}
    a = backbone(x)["sequence_output"]
    b = backbone(padded)["sequence_output"][:, :5]
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_pretrainer_fit_and_save(odd_config, tmp_path):
    model = BertPretrainer(BertBackbone.from_bert_config(odd_config))
    model.compile(optimizer=keras.optimizers.AdamW(1e-3))
    x = make_inputs(predictions=3)
    y, sw = _targets(x)
    before = [np.array(w) for w in model.trainable_weights]
    history = model.fit(x, y, sample_weight=sw, epochs=2, batch_size=3, verbose=0)
    for name in ("loss", "masked_lm_loss", "next_sentence_loss",
                 "masked_lm_accuracy", "next_sentence_accuracy"):
        assert name in history.history, history.history.keys()
    changed = [not np.array_equal(a, np.array(b)) for a, b in zip(before, model.trainable_weights)]
    assert all(changed)  # every weight, the tied embedding included, trains
    # One tied table: the head does not own a second copy.
    assert len(model.trainable_weights) == len({id(w) for w in model.trainable_weights})
    loaded = run_task_test(model, x, {"masked_lm": (3, 3, 99), "next_sentence": (3, 2)},
                           tmp_path).loaded
    assert loaded.masked_lm_head.word_embedding is loaded.backbone.word_embedding


@pytest.mark.parametrize("cls", [BertPretrainer, BertMaskedLMPretrainer, BertCausalLMPretrainer])
def test_batch_slices_train_as_the_whole_batch(odd_config, cls):
    """A training batch run as 2 slices side by side (`BatchSlices`) gives
    the whole batch's outputs and gradients (no dropout here), with 4, 3
    and 1 rows (an empty slice); inference is never sliced."""
    import dataclasses

    config = dataclasses.replace(odd_config, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    causal = cls is BertCausalLMPretrainer
    model = cls(BertBackbone.from_bert_config(config, causal=causal))
    for batch in (4, 3, 1):
        x = make_inputs(batch=batch, predictions=None if causal else 3, seed=batch)
        results = []
        for slices in (1, 2):
            model.batch_slices = slices
            with tf.GradientTape() as tape:
                outputs = model(x, training=True)
                loss = sum(tf.reduce_sum(tf.sin(o)) for o in outputs.values())
            results.append((outputs, tape.gradient(loss, model.trainable_weights)))
        (whole, whole_grads), (sliced, sliced_grads) = results
        for name in whole:
            assert sliced[name].shape == whole[name].shape
            np.testing.assert_allclose(sliced[name], whole[name], rtol=1e-5, atol=1e-5)
        for a, b in zip(whole_grads, sliced_grads):
            assert (a is None) == (b is None)  # the pooler of a masked-LM-only model
            if a is not None:
                np.testing.assert_allclose(tf.convert_to_tensor(b), tf.convert_to_tensor(a),
                                           rtol=1e-4, atol=1e-5)
    # Sliced, the training call runs the functional graph once per slice;
    # an inference call runs it once.
    from unittest import mock

    from keras.src.models.functional import Functional

    calls, functional_call = [], Functional.call
    model.batch_slices = 2
    x = make_inputs(batch=4, predictions=None if causal else 3)
    with mock.patch.object(Functional, "call", lambda self, *a, **k: (calls.append(
            k.get("training")) if self is model else None) or functional_call(self, *a, **k)):
        model(x, training=True)
        model(x, training=False)
        model.predict(x, verbose=0)
    assert calls == [True, True, False, False], calls


def test_batch_slices_fit_as_the_whole_batch(odd_config):
    """`fit` with 2 slices makes the same updates as whole batches (no
    dropout): the losses are computed on the concatenated outputs."""
    import dataclasses

    config = dataclasses.replace(odd_config, hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)
    x = make_inputs(batch=6, predictions=3)
    y, sw = _targets(x)
    weights = None
    for slices in (1, 2):
        keras.utils.set_random_seed(5)
        model = BertPretrainer(BertBackbone.from_bert_config(config))
        model.batch_slices = slices
        model.compile(optimizer=keras.optimizers.SGD(0.5))
        history = model.fit(x, y, sample_weight=sw, epochs=2, batch_size=6, verbose=0).history
        if weights is None:
            weights, losses = [np.array(w) for w in model.weights], history["loss"]
            continue
        np.testing.assert_allclose(history["loss"], losses, rtol=1e-5)
        for a, b in zip(weights, model.weights):
            np.testing.assert_allclose(np.array(b), a, rtol=1e-4, atol=1e-6)


def test_fit_and_evaluate_turn_off_the_autotuning_thread_that_delays_their_end(
        odd_config, monkeypatch):
    # Keras 3.15 + TF 2.21: destroying a fit's or evaluate's iterator waits
    # out its autotuning thread's period (51 s measured after a 93 s fit,
    # 3.1-3.3 s after a 7 s evaluate).
    from keras_bert_impl.base.strategy_fixes import without_autotune_thread

    seen = []
    for name in ("fit", "evaluate"):
        keras_method = getattr(keras.Model, name)
        monkeypatch.setattr(keras.Model, name, lambda self, x=None, *a, _m=keras_method, _n=name,
                            **k: (seen.append((_n, x.options().autotune.enabled)),
                                  _m(self, x, *a, **k))[1])
    model = BertPretrainer(BertBackbone.from_bert_config(odd_config))
    model.compile(optimizer=keras.optimizers.AdamW(1e-3))
    x = make_inputs(predictions=3)
    y, sw = _targets(x)
    dataset = tf.data.Dataset.from_tensors((x, y, sw)).repeat(2)
    assert dataset.options().autotune.enabled is None
    history = model.fit(dataset, epochs=1, verbose=0).history
    scores = model.evaluate(dataset, verbose=0, return_dict=True)
    assert seen == [("fit", False), ("evaluate", False)]
    assert np.isfinite(history["loss"]).all() and np.isfinite(scores["loss"])
    # Arrays pass through; a choice the dataset made is kept.
    assert without_autotune_thread(x) is x
    options = tf.data.Options()
    options.autotune.enabled = True
    assert without_autotune_thread(dataset.with_options(options)).options().autotune.enabled


@pytest.mark.parametrize("policy, atol", [("float32", 1e-5), ("mixed_bfloat16", 0.05)])
@pytest.mark.parametrize("cls", [BertPretrainer, BertMaskedLMPretrainer])
def test_pretrainer_equals_heads_on_the_whole_backbone(odd_config, cls, policy, atol):
    """The pretrainer's last block computes only [CLS] and the masked rows:
    its outputs must equal the heads applied to the full backbone output."""
    model = cls(BertBackbone.from_bert_config(odd_config, dtype=policy))
    x = make_inputs(batch=4, seq=9, predictions=4, pad_last=3)
    x["masked_lm_positions"][1] = [0, 5, 5, 8]  # [CLS], a repeat, the last position
    x["masked_lm_positions"][2, 2:] = 0  # padded prediction slots
    full = model.backbone({k: v for k, v in x.items() if k != "masked_lm_positions"})
    expected_mlm = model.masked_lm_head(full["sequence_output"], x["masked_lm_positions"])
    out = model(x, training=False)
    assert out["masked_lm"].shape == (4, 4, 99)
    np.testing.assert_allclose(out["masked_lm"], expected_mlm, atol=atol, rtol=0)
    if cls is BertPretrainer:
        expected_nsp = model.next_sentence_head(full["pooled_output"])
        np.testing.assert_allclose(out["next_sentence"], expected_nsp, atol=atol, rtol=0)


def test_masked_lm_loss_is_weighted_mean(odd_config):
    model = BertPretrainer(BertBackbone.from_bert_config(odd_config))
    model.compile()
    x = make_inputs(predictions=3)
    y, sw = _targets(x)
    logits = np.asarray(model(x, training=False)["masked_lm"], "float64")
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    xent = -np.take_along_axis(logp, y["masked_lm"][..., None], -1)[..., 0]
    expected = (xent * sw["masked_lm"]).sum() / sw["masked_lm"].sum()
    result = model.evaluate(x, y, sample_weight=sw, verbose=0, return_dict=True)
    np.testing.assert_allclose(result["masked_lm_loss"], expected, rtol=1e-5)


def test_masked_lm_only_pretrainer(odd_config, tmp_path):
    model = BertMaskedLMPretrainer(BertBackbone.from_bert_config(odd_config))
    model.compile()
    x = make_inputs(predictions=2)
    y, sw = _targets(x)
    history = model.fit(x, {"masked_lm": y["masked_lm"]},
                        sample_weight={"masked_lm": sw["masked_lm"]}, verbose=0)
    assert "masked_lm_accuracy" in history.history
    assert set(model(x)) == {"masked_lm"}
    run_task_test(model, x, {"masked_lm": (3, 2, 99)}, tmp_path)


@pytest.mark.parametrize("how", ["global_policy", "dtype_argument"])
def test_mixed_bfloat16_dtypes(odd_config, how):
    if how == "global_policy":
        keras.config.set_dtype_policy("mixed_bfloat16")
        backbone = BertBackbone.from_bert_config(odd_config)
    else:  # the global policy stays float32
        backbone = BertBackbone.from_bert_config(odd_config, dtype="mixed_bfloat16")
    model = BertPretrainer(backbone)
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.LayerNormalization):
            assert layer.compute_dtype == "float32", layer.name
        elif isinstance(layer, (keras.layers.Dense, FastDropout)):
            if layer.name != "dense":  # the NSP logits layer is float32 on purpose
                assert layer.compute_dtype == "bfloat16", layer.name
    out = model(make_inputs(predictions=2))
    assert keras.backend.standardize_dtype(out["masked_lm"].dtype) == "float32"
    assert keras.backend.standardize_dtype(out["next_sentence"].dtype) == "float32"
    assert all(w.dtype == "float32" for w in model.weights)
    backbone_out = model.backbone(make_inputs())
    assert keras.backend.standardize_dtype(backbone_out["sequence_output"].dtype) == "bfloat16"
    model.compile()
    x = make_inputs(predictions=2)
    y, sw = _targets(x)
    loss = model.fit(x, y, sample_weight=sw, verbose=0).history["loss"][0]
    assert np.isfinite(loss)


def test_xla_compiled_fit_with_static_shapes(odd_config):
    model = BertPretrainer(BertBackbone.from_bert_config(odd_config))
    model.compile(jit_compile=True)
    x = make_inputs(batch=4, predictions=2)
    y, sw = _targets(x)
    ds = tf.data.Dataset.from_tensor_slices((x, y, sw)).batch(2, drop_remainder=True)
    history = model.fit(ds, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert model.jit_compile is True


def test_model_is_deterministic_in_inference(odd_config):
    backbone = BertBackbone.from_bert_config(odd_config)
    x = make_inputs()
    np.testing.assert_array_equal(backbone(x)["pooled_output"], backbone(x)["pooled_output"])
    assert not np.array_equal(backbone(x, training=True)["sequence_output"],
                              backbone(x, training=False)["sequence_output"])


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda x: {**x, "input_word_ids": x["input_word_ids"].astype("float32")}, "integer"),
        (lambda x: {**x, "input_mask": x["input_mask"][0]}, "rank 2"),
        (lambda x: {k: np.tile(v, (1, 3)) for k, v in x.items()}, "longer than max_position_embeddings=16"),
        (lambda x: {**x, "input_word_ids": x["input_word_ids"] + 99}, "outside \\[0, 99\\)"),
        (lambda x: {**x, "input_word_ids": x["input_word_ids"] - 200}, "holds -"),
        (lambda x: {**x, "input_type_ids": x["input_type_ids"] * 2}, "type_vocab_size"),
        (lambda x: {k: v for k, v in x.items() if k != "input_mask"}, "Missing.*input_mask"),
        (lambda x: {**x, "input_mask": x["input_mask"][:, :5]}, "same shape"),
    ],
)
def test_bad_inputs_raise_clear_errors(odd_config, change, message):
    backbone = BertBackbone.from_bert_config(odd_config)
    with pytest.raises(ValueError, match=message):
        backbone(change(make_inputs()))


def test_bad_pretrainer_inputs(odd_config):
    model = BertPretrainer(BertBackbone.from_bert_config(odd_config))
    x = make_inputs(predictions=2)
    x["input_word_ids"] = x["input_word_ids"] + 1000
    with pytest.raises(ValueError, match="input_word_ids"):
        model(x)
    with pytest.raises(ValueError, match="masked_lm_positions"):
        model(make_inputs())
    x = make_inputs(predictions=2)
    x["masked_lm_positions"][1, 1] = 7
    with pytest.raises(ValueError, match="`masked_lm_positions` holds 7, outside \\[0, 7\\)"):
        model(x)


def test_long_sequence_rejected_when_traced(odd_config):
    backbone = BertBackbone.from_bert_config(odd_config)
    x = make_inputs(seq=20, pad_last=0)
    with pytest.raises(ValueError, match="longer than max_position_embeddings"):
        backbone.predict(x, verbose=0)

