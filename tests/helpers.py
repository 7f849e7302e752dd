"""Shared checks every layer and model gets (style rule 16), and the tests' shared helpers."""

import contextlib
import os
import re
import time
from typing import NamedTuple

import keras
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What TensorFlow 2.21 prints on import, on its first device probe and at
# its first XLA compile (any host: the absl preamble; here also oneDNN,
# the CPU-feature notice and the failed cuInit of a machine without GPU):
# none of it may reach a command's console (tf_records/command_line/console.py).
NOISE = ("absl::InitializeLog", "port.cc", "cpu_feature_guard", "cuda_platform", "cuInit",
         "cudart_stub", "XLA service", "UserWarning")
CPP_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d", re.MULTILINE)  # absl's C++ prefix


def console_noise(text):
    """The noise lines in a command's console output ([] when quiet)."""
    return [n for n in NOISE if n in text] + CPP_LOG_LINE.findall(text)


def assert_config_round_trip(layer):
    """`get_config` holds every constructor argument, and rebuilds equal."""
    config = layer.get_config()
    rebuilt = layer.__class__.from_config(config)
    assert rebuilt.get_config() == config
    return rebuilt


def _keras_save_load_outputs(model, inputs, tmp_path):
    """`model` saved to `.keras` and reloaded with safe_mode on; the loaded
    model and `model`'s outputs, after checking the loaded model's are
    identical. Saved before either is called: a stateful model (ELMo's
    kept states, XLNet's memory) starts both calls from the same state."""
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    a = model(inputs, training=False)
    b = loaded(inputs, training=False)
    for x, y in zip(keras.tree.flatten(a), keras.tree.flatten(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    return loaded, a


def assert_keras_save_load_equal(model, inputs, tmp_path):
    """`.keras` with safe_mode on reloads to identical outputs."""
    return _keras_save_load_outputs(model, inputs, tmp_path)[0]


def assert_output_shapes(outputs, expected_output_shape):
    """`outputs` have `expected_output_shape`: a tuple for a single output;
    a dict names the outputs it checks, each by its shape."""
    if isinstance(expected_output_shape, dict):
        shapes = {name: tuple(outputs[name].shape) for name in expected_output_shape}
        assert shapes == expected_output_shape, shapes
    else:
        assert tuple(outputs.shape) == expected_output_shape, outputs.shape


class Checked(NamedTuple):
    """What `run_backbone_test` and `run_task_test` leave for the test's
    own checks: the model's outputs, the model rebuilt from its config, and
    the model loaded from its `.keras` file (None without `tmp_path`)."""

    outputs: object
    rebuilt: keras.Model
    loaded: keras.Model | None


def run_backbone_test(backbone, input_data, expected_output_shape, tmp_path=None):
    """The checks every backbone gets, after keras-hub's
    `TestCase.run_backbone_test`, on a model the test built (its weights
    random, set or loaded): inference on `input_data` gives
    `expected_output_shape` (`assert_output_shapes`); `get_config` rebuilds
    the same class with an equal config; with `tmp_path`, the `.keras` file
    reloads as the same class to identical outputs."""
    if tmp_path is None:
        loaded, outputs = None, backbone(input_data, training=False)
    else:
        loaded, outputs = _keras_save_load_outputs(backbone, input_data, tmp_path)
        assert type(loaded) is type(backbone)
    assert_output_shapes(outputs, expected_output_shape)
    rebuilt = assert_config_round_trip(backbone)
    assert type(rebuilt) is type(backbone)
    return Checked(outputs, rebuilt, loaded)


def run_task_test(model, input_data, expected_output_shape, tmp_path=None):
    """`run_backbone_test`'s checks for a task model (or a pretrainer), after
    keras-hub's `TestCase.run_task_test`, and: every output is float32 (task
    logits stay float32 under mixed precision too), and the rebuilt and the loaded
    model keep the constructor's arguments besides the backbone
    (`TaskModel.config_names`)."""
    checked = run_backbone_test(model, input_data, expected_output_shape, tmp_path)
    for output in keras.tree.flatten(checked.outputs):
        assert keras.backend.standardize_dtype(output.dtype) == "float32", output.dtype
    names = getattr(model, "config_names", ())
    arguments = {name: getattr(model, name) for name in names}
    for other in (checked.rebuilt, checked.loaded):
        if other is not None:
            assert {name: getattr(other, name) for name in names} == arguments
    return checked


def write_docstring_corpus(path, modules, documents, max_sentences, seed=0):
    """Pretraining text from the modules' docstring sentences: `documents`
    documents of 2..max_sentences-1 random sentences, blank lines between."""
    import inspect

    sentences = []
    for module in modules:
        for name in sorted(dir(module)):
            doc = inspect.getdoc(getattr(module, name, None)) or ""
            sentences += [s.strip() for s in doc.replace("\n", " ").split(". ") if len(s.split()) > 3]
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(documents):
        lines += list(rng.choice(sentences, rng.integers(2, max_sentences))) + [""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return str(path)


def _free_ports(n):
    """`n` free localhost ports, for a TF_CONFIG cluster of `n` workers."""
    import socket

    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_workers(args, env, cwd, count=2, timeout=900):
    """`python -m <args>` as `count` workers of one localhost cluster
    (TF_CONFIG task i for process i), side by side, forked from the test
    command server (`forked_python`); each one's `(stdout, stderr)`, after
    checking that every worker exited 0."""
    import json

    from forked_python import start_python

    cluster = {"worker": [f"localhost:{p}" for p in _free_ports(count)]}
    workers = [start_python(["-m", *args], cwd, dict(env, TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}})))
        for index in range(count)]
    # Polled, not waited for in turn: a worker that fails leaves its peers
    # waiting for it for ever, so the first failure ends the cluster and is
    # reported with its own output (a wait on worker 0 once hid worker 1's
    # refusal behind a 600 s timeout).
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            codes = [worker.poll() for worker in workers]
            if None not in codes or any(code not in (None, 0) for code in codes):
                break
            time.sleep(0.2)
    finally:
        for worker in workers:
            worker.kill_group()
    outputs = [worker.outputs() for worker in workers]
    for index, (worker, (out, err)) in enumerate(zip(workers, outputs)):
        assert worker.returncode == 0, (
            f"worker {index} exited {worker.returncode} (-9: killed when a peer failed "
            f"or after {timeout} s):\n" + out[-2000:] + err[-3000:])
    return outputs


def skip_random_init(monkeypatch):
    """Keras' normal and truncated-normal initializers fill zeros instead,
    for tests that only count a big model's weights: building BERT-Large
    took 9.2 s with its random draws and 0.5 s without (one thread)."""
    from keras.src.initializers import random_initializers

    def zeros(self, shape, dtype=None):
        return keras.ops.zeros(shape, dtype=dtype)

    for name in ("RandomNormal", "TruncatedNormal"):
        monkeypatch.setattr(getattr(random_initializers, name), "__call__", zeros)


@contextlib.contextmanager
def our_autograph_conversions():
    """The functions of our packages AutoGraph is asked to convert inside
    the block (a list, filled as it goes). tf.data asks for every function
    given to `map`, `flat_map` or `filter`; ours are `tf_records.plain`.
    Recorded at every request, so AutoGraph's cache of earlier conversions
    (in this process) does not hide one."""
    from tensorflow.python.autograph.impl import api

    converted = []
    original = api._convert_actual

    def record(entity, program_ctx):
        code = getattr(entity, "__code__", None)
        if code is not None and code.co_filename.startswith(ROOT + os.sep) and (
                os.sep + "tests" + os.sep not in code.co_filename):
            converted.append(f"{code.co_filename}: {entity.__qualname__}")
        return original(entity, program_ctx)

    api._convert_actual = record
    try:
        yield converted
    finally:
        api._convert_actual = original


def tf1_session_outputs(export_dir, signature, inputs):
    """`signature`'s outputs from the SavedModel at `export_dir` loaded as TF
    Serving's C++ loader loads it: the graph, its restore op and its init op
    in a TensorFlow 1 `Session` (`tf.compat.v1.saved_model.loader.load`),
    `inputs` (name -> array) fed by the signature's names."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
        sig = meta.signature_def[signature]
        feed = {graph.get_tensor_by_name(sig.inputs[k].name): v for k, v in inputs.items()}
        fetch = {k: graph.get_tensor_by_name(v.name) for k, v in sig.outputs.items()}
        return session.run(fetch, feed)
