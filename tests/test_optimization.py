"""`training.run.optimization`: the warmup and linear decay, the original's
AdamW and LAMB, and `FusedAdamW`, which takes Keras' AdamW steps in fewer
kernels."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertPretrainer
from keras_bert_impl import preset
from training.run.optimization import NO_DECAY_NAMES
from training.run.optimization import FusedAdamW
from training.run.optimization import OptimizerConfig
from training.run.optimization import WarmupLinearDecay
from training.run.optimization import create_optimizer


def test_warmup_then_linear_decay():
    schedule = WarmupLinearDecay(1e-3, warmup_steps=10, total_steps=100)
    values = [float(schedule(step)) for step in (0, 5, 10, 50, 100, 150)]
    np.testing.assert_allclose(values, [0.0, 5e-4, 9e-4, 5e-4, 0.0, 0.0], atol=1e-9)
    # With accumulation Keras passes micro-steps: the schedule counts updates.
    accumulating = WarmupLinearDecay(1e-3, 10, 100, accumulation_steps=4)
    assert float(accumulating(21)) == pytest.approx(float(schedule(5)))
    rebuilt = WarmupLinearDecay.from_config(schedule.get_config())
    assert float(rebuilt(7)) == float(schedule(7))
    with pytest.raises(ValueError, match="warmup_steps"):
        WarmupLinearDecay(1e-3, 200, 100)


def test_adamw_as_the_original():
    """Decay 0.01 on kernels and embeddings, none on LayerNorm or biases;
    epsilon 1e-6; global-norm clip 1.0."""
    model = BertPretrainer(BertBackbone.from_bert_config(preset("tiny")))
    optimizer = create_optimizer(OptimizerConfig(learning_rate=0.1, warmup_steps=0), 10)
    assert optimizer.epsilon == 1e-6 and optimizer.global_clipnorm == 1.0
    variables = model.trainable_variables
    before = [np.asarray(v).copy() for v in variables]
    # Zero gradients: Adam's step is 0, only the decoupled decay moves weights.
    optimizer.apply([keras.ops.zeros_like(v) for v in variables], variables)
    decayed = []
    for variable, old in zip(variables, before):
        new = np.asarray(variable)
        if np.allclose(new, old * (1 - 0.1 * 0.01), rtol=1e-6) and not np.array_equal(new, old):
            decayed.append(variable.name)
        else:
            np.testing.assert_array_equal(new, old, err_msg=variable.path)
    names = {v.name for v in variables}
    assert set(decayed) == names - {"gamma", "beta", "bias", "output_bias"}
    assert "kernel" in decayed and "embeddings" in decayed


def test_lamb_and_accumulation_options():
    config = OptimizerConfig(optimizer="lamb", gradient_accumulation_steps=4)
    optimizer = create_optimizer(config, 100)
    assert isinstance(optimizer, keras.optimizers.Lamb)
    assert optimizer.gradient_accumulation_steps == 4
    with pytest.raises(ValueError, match="Unknown optimizer 'sgd'"):
        create_optimizer(OptimizerConfig(optimizer="sgd"), 10)


def _variables(seed):
    rng = np.random.default_rng(seed)
    return [keras.Variable(rng.normal(size=shape).astype("float32"), name=name)
            for name, shape in (("kernel", (7, 5)), ("bias", (5,)), ("gamma", (5,)),
                                ("embeddings", (11, 5)))]


def _steps(optimizer, clip_scale, sparse):
    """Three steps on the same variables and gradients; the gradients are
    `clip_scale` times a unit-ish size (so clipping at 1.0 acts, or not),
    the embeddings' sparse (rows 1, 3, 3: a repeated row) when `sparse`."""
    variables = _variables(0)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    rng = np.random.default_rng(1)
    for _ in range(3):
        grads = [tf.constant(clip_scale * rng.normal(size=v.shape).astype("float32"))
                 for v in variables]
        if sparse:
            rows = tf.constant(clip_scale * rng.normal(size=(3, 5)).astype("float32"))
            grads[-1] = tf.IndexedSlices(rows, tf.constant([1, 3, 3]), tf.constant([11, 5]))
        optimizer.apply(grads, variables)
    assert int(optimizer.iterations) == 3
    return [v.numpy() for v in variables] + [s.numpy() for s in optimizer.variables[1:]]


@pytest.mark.parametrize("clip_scale", [0.01, 10.0])
@pytest.mark.parametrize("sparse", [False, True])
def test_fused_adamw_steps_equal_keras_adamw(clip_scale, sparse):
    """Weights and slots (m, v) after 3 steps: within float32 rounding of
    Keras' AdamW, with weight decay (kept off bias and gamma), a warmup
    schedule, global-norm clipping acting (scale 10) or not (0.01), and a
    sparse gradient with a repeated row."""
    def make(cls):
        return cls(learning_rate=WarmupLinearDecay(1e-2, 2, 10), weight_decay=0.01, epsilon=1e-6,
                   global_clipnorm=1.0)

    ours = _steps(make(FusedAdamW), clip_scale, sparse)
    theirs = _steps(make(keras.optimizers.AdamW), clip_scale, sparse)
    assert len(ours) == len(theirs) == 4 + 2 * 4  # the variables, then m and v of each
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    start = _variables(0)
    assert all(np.abs(a - b.numpy()).max() > 1e-4 for a, b in zip(ours, start))  # they moved


def test_create_optimizer_makes_the_fused_adamw_and_it_round_trips():
    optimizer = create_optimizer(OptimizerConfig(learning_rate=1e-3, warmup_steps=10), 100)
    assert isinstance(optimizer, FusedAdamW)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, FusedAdamW)
    assert restored.get_config() == optimizer.get_config()


def test_each_variable_is_updated_by_one_resource_apply_adam():
    """The fused path is the one taken (not Keras' ops): one
    `ResourceApplyAdam` per variable in the traced step, and no `Square`
    (Keras' `v` update and its global norm each square every gradient).
    The step's scalars are made once, not once per variable: two `Pow`
    (beta_1^t and beta_2^t) and the schedule evaluated twice (`FloorDiv`:
    once for the Adam step, once for the weight decay), where Keras' AdamW
    evaluates it again for every decayed variable."""
    variables = _variables(0)
    optimizer = FusedAdamW(learning_rate=WarmupLinearDecay(1e-3, 2, 10), weight_decay=0.01,
                           global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    optimizer.build(variables)

    @tf.function
    def step(grads):
        optimizer.apply(grads, variables)

    graph = step.get_concrete_function([tf.TensorSpec(v.shape) for v in variables]).graph
    types = [op.type for op in graph.get_operations()]
    for function in graph._functions.values():  # branches of conditionals, if any
        types += [node.op for node in function.definition.node_def]
    assert types.count("ResourceApplyAdam") == len(variables), sorted(set(types))
    assert "Square" not in types
    assert types.count("Pow") == 2 and types.count("FloorDiv") == 2, sorted(types)
    # The weight decay still reaches exactly the decayed variables (kernel, embeddings).
    assert types.count("AssignSubVariableOp") == 2, sorted(types)
