"""The XLNet pretrainer (`XLNetPretrainer`) and its memory: carried from
batch to batch in calls and in `fit`, per replica under MirroredStrategy;
it overfits two documents, traces once in `fit`, and refuses what it
cannot use."""

import os
import textwrap

import keras
import numpy as np
import pytest
from forked_python import run_python
from xlnet_cases import ODD
from xlnet_cases import permutation_mask
from xlnet_cases import pretrainer_with_memory
from xlnet_cases import xlnet_inputs

from keras_bert_impl.xlnet import XLNetBackbone
from keras_bert_impl.xlnet import XLNetPretrainer
from keras_bert_impl.xlnet import xlnet_preset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_second_batch_attends_to_the_first_batchs_memory():
    model = pretrainer_with_memory()
    first, second = xlnet_inputs(predict=2, seed=1), xlnet_inputs(predict=2, seed=2)
    for x in (first, second):
        del x["input_mask"]  # the pretrainer's default: no padding
    model(first)
    state = np.asarray(model.mems_state)
    manual = model.backbone({**first, "input_mask": np.zeros((3, 7), "float32"),
                             "mems": np.zeros((3, 2, 4, 12), "float32")})
    np.testing.assert_allclose(state, manual["new_mems"], atol=1e-6)  # zeros at first
    carried = np.asarray(model(second))
    out = model.backbone({**second, "input_mask": np.zeros((3, 7), "float32"), "mems": state})
    expected = np.asarray(model.backbone.word_embedding(out["query_output"], reverse=True)
                          ) + np.asarray(model.lm_bias)
    np.testing.assert_allclose(carried, expected, atol=1e-5, rtol=0)
    model.reset_states()
    assert not np.asarray(model.mems_state).any()
    assert np.abs(np.asarray(model(second)) - carried).max() > 1e-2
    # A smaller batch reads and writes rows [:2] only.
    before = np.asarray(model.mems_state)
    model({k: v[:2] for k, v in first.items()})
    np.testing.assert_array_equal(np.asarray(model.mems_state)[2], before[2])
    with pytest.raises(ValueError, match="max_batch_size=3 rows. Received a batch of 4"):
        model(xlnet_inputs(batch=4, predict=2))


def test_fit_carries_memory_from_batch_to_batch():
    """Two fit steps at learning rate 0: the kept memory is what two
    chained backbone calls give, and the loss is the weighted mean CE."""
    model = pretrainer_with_memory()
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    batches = [xlnet_inputs(predict=2, seed=s) for s in (1, 2)]
    x = {k: np.concatenate([b[k] for b in batches]) for k in ("input_word_ids",
                                                                "input_type_ids", "perm_mask",
                                                                "target_mapping")}
    target = np.random.default_rng(0).integers(0, 99, (6, 2)).astype("int32")
    weight = np.array([[1, 1], [1, 0], [1, 1]] * 2, "float32")
    history = model.fit(x, target, sample_weight=weight, batch_size=3, shuffle=False, verbose=0)
    memory = np.zeros((3, 2, 4, 12), "float32")
    losses = []
    for i, b in enumerate(batches):
        out = model.backbone({**b, "mems": memory})
        logits = (np.asarray(model.backbone.word_embedding(out["query_output"], reverse=True))
                  + np.asarray(model.lm_bias)).astype("float64")
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        picked = np.take_along_axis(log_probs, target[3 * i:3 * i + 3, :, None], -1)[..., 0]
        w = weight[3 * i:3 * i + 3]
        losses.append(-(picked * w).sum() / w.sum())
        memory = np.asarray(out["new_mems"])
    np.testing.assert_allclose(np.asarray(model.mems_state), memory, atol=1e-5)
    np.testing.assert_allclose(history.history["loss"][0], np.mean(losses), rtol=1e-5)


@pytest.mark.slow(seconds=40)
def test_memory_is_per_replica_under_mirrored_strategy():
    """MirroredStrategy over 2 logical CPUs, global batch 4: each replica
    carries its own 2 rows of memory through fit."""
    tests = os.path.join(ROOT, "tests")
    script = f"import sys\nsys.path.insert(0, {tests!r})\n" + textwrap.dedent("""
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        import numpy as np
        import xlnet_cases as t
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        strategy = tf.distribute.MirroredStrategy(devices)
        with strategy.scope():
            model = t.pretrainer_with_memory(batch=2)
            model.compile(optimizer=keras.optimizers.SGD(0.0))
        batches = [t.xlnet_inputs(batch=4, predict=2, seed=s) for s in (1, 2)]
        names = ("input_word_ids", "input_type_ids", "perm_mask", "target_mapping")
        x = {k: np.concatenate([b[k] for b in batches]) for k in names}
        data = tf.data.Dataset.from_tensor_slices((x, np.zeros((8, 2), "int32"))).batch(4)
        model.fit(data, verbose=0)
        replicas = strategy.experimental_local_results(model.mems_state._value)
        memory = np.zeros((4, 2, 4, 12), "float32")
        for b in batches:
            memory = np.asarray(model.backbone({**b, "mems": memory})["new_mems"])
        for i, kept in enumerate(replicas):
            np.testing.assert_allclose(kept.numpy(), memory[2 * i:2 * i + 2], atol=1e-5)
        print("replicas", len(replicas), "ok")
    """)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    result = run_python(["-c", script], ROOT, env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "replicas 2 ok" in result.stdout


@pytest.mark.slow(seconds=60)
def test_pretrainer_overfits_two_documents():
    """The debug size (6 layers, d_model 32, relu) on two repeated
    documents with their permutations (seq 16, reuse 8, mem_len 8, 3
    predictions each): the permutation LM loss goes near 0."""
    config = xlnet_preset("xlnet_debug").replace(vocab_size=40, mem_len=8, reuse_len=8)
    model = XLNetPretrainer(XLNetBackbone.from_config_object(config, two_stream=True),
                            max_batch_size=2)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 40, (2, 16)).astype("int32")
    perm = np.stack([permutation_mask(np.concatenate([rng.permutation(8), 8 + rng.permutation(8)]))
                     for _ in range(2)])
    perm[:, :8, 8:] = 1.0  # the reused half never sees the rest (as the original)
    positions = np.stack([np.sort(rng.choice(16, 3, replace=False)) for _ in range(2)])
    x = {"input_word_ids": ids, "input_type_ids": np.zeros((2, 16), "int32"), "perm_mask": perm,
         "target_mapping": np.eye(16, dtype="float32")[positions]}
    target = np.take_along_axis(ids, positions, 1)
    weight = np.ones((2, 3), "float32")
    start = model.evaluate(x, target, sample_weight=weight, verbose=0)[0]
    history = model.fit(  # 50 steps per epoch: few epoch overheads
        {k: np.concatenate([v] * 50) for k, v in x.items()}, np.concatenate([target] * 50),
        sample_weight=np.concatenate([weight] * 50), batch_size=2, epochs=3, shuffle=False,
        verbose=0)
    print(f"permutation LM loss: {start:.3f} before, {history.history['loss']} per epoch")
    assert start > 3.0  # it starts near log(40)
    assert history.history["loss"][-1] < 0.05, history.history["loss"]


def test_pretrainer_fit_traces_the_model_once(monkeypatch):
    """Keras builds the compiled loss and metrics from a trace of the whole
    model made before the step's own; the pretrainer says what it returns
    instead (`_symbolic_outputs`), so `fit` traces it once, in its step,
    and still has its loss and metric."""
    traced = []
    call = XLNetPretrainer.call
    monkeypatch.setattr(XLNetPretrainer, "call", lambda self, inputs, training=None: (
        traced.append(1) or call(self, inputs, training=training)))
    config = xlnet_preset("xlnet_debug").replace(vocab_size=40, mem_len=8, reuse_len=8)
    model = XLNetPretrainer(XLNetBackbone.from_config_object(config, two_stream=True),
                            max_batch_size=2)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    perm = np.zeros((2, 8, 8), "float32")
    x = {"input_word_ids": np.full((2, 8), 5, "int32"), "input_type_ids": np.zeros((2, 8), "int32"),
         "perm_mask": perm, "target_mapping": np.eye(8, dtype="float32")[[[1, 4], [2, 6]]]}
    history = model.fit(x, np.full((2, 2), 5, "int32"), sample_weight=np.ones((2, 2), "float32"),
                        batch_size=2, verbose=0).history
    assert len(traced) == 1
    assert set(history) == {"loss", "plm_accuracy"} and np.isfinite(history["loss"][0])


def test_pretrainer_rejects_what_it_cannot_use():
    with pytest.raises(ValueError, match="two_stream=True"):
        XLNetPretrainer(XLNetBackbone.from_config_object(ODD))
    with pytest.raises(ValueError, match="max_batch_size=None"):
        XLNetPretrainer(XLNetBackbone.from_config_object(ODD.replace(mem_len=2), two_stream=True))
    model = XLNetPretrainer(XLNetBackbone.from_config_object(ODD, two_stream=True))
    with pytest.raises(ValueError, match="Received: \\['input_word_ids'\\]"):
        model({"input_word_ids": np.zeros((3, 7), "int32")})
