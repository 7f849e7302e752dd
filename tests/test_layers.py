import keras
import numpy as np
import pytest
from helpers import assert_config_round_trip

from keras_bert_impl.bert.bert_embeddings import BertEmbeddings
from keras_bert_impl.bert.bert_pooler import BertPooler
from keras_bert_impl.bert.masked_lm_head import MaskedLMHead
from keras_bert_impl.bert.next_sentence_head import NextSentenceHead
from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.layers.self_attention import SelfAttention
from keras_bert_impl.layers.tied_word_embedding import TiedWordEmbedding
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder
from keras_bert_impl.speed.fast_dropout import FastDropout
from keras_bert_impl.speed.fast_layer_norm import FastLayerNormalization


def test_gelu_exact_and_tanh():
    from math import erf
    from math import pi
    from math import sqrt
    from math import tanh

    x = np.array([-3.0, -0.5, 0.0, 0.7, 2.0], "float32")
    exact = [v * 0.5 * (1 + erf(v / sqrt(2))) for v in x]
    approx = [0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v**3))) for v in x]
    np.testing.assert_allclose(get_activation("gelu")(x), exact, atol=1e-6)
    np.testing.assert_allclose(get_activation("gelu_tanh")(x), approx, atol=1e-6)
    assert np.abs(np.array(exact) - np.array(approx)).max() > 1e-5  # they differ
    with pytest.raises(ValueError, match="swish"):
        get_activation("swish")


def test_embeddings_sum_then_layer_norm():
    layer = BertEmbeddings(16, 2, 12, hidden_dropout_prob=0.0)
    words = np.random.default_rng(0).normal(size=(3, 7, 12)).astype("float32")
    types = np.array([[0] * 4 + [1] * 3] * 3, "int32")
    out = np.asarray(layer(words, types))
    summed = words + np.asarray(layer.token_type_embeddings)[types] + np.asarray(
        layer.position_embeddings)[:7]
    mean, var = summed.mean(-1, keepdims=True), summed.var(-1, keepdims=True)
    np.testing.assert_allclose(out, (summed - mean) / np.sqrt(var + 1e-12), atol=1e-5)
    assert_config_round_trip(layer)


def test_attention_ignores_padded_keys():
    layer = SelfAttention(12, 3, attention_probs_dropout_prob=0.0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 7, 12)).astype("float32")
    mask = np.ones((2, 7), "int32")
    mask[:, 5:] = 0
    y = np.asarray(layer(x, mask))
    x2 = x.copy()
    x2[:, 5:] = rng.normal(size=(2, 2, 12))  # change only padded tokens
    y2 = np.asarray(layer(x2, mask))
    np.testing.assert_allclose(y[:, :5], y2[:, :5], atol=1e-6)
    assert not np.allclose(y[:, 5:], y2[:, 5:])
    assert_config_round_trip(layer)


def test_attention_matches_unfused_reference():
    """Fused QKV equals three separate projections, per-head softmax attention."""
    layer = SelfAttention(12, 3, attention_probs_dropout_prob=0.0)
    x = np.random.default_rng(1).normal(size=(2, 5, 12)).astype("float32")
    y = np.asarray(layer(x, np.ones((2, 5), "int32")))
    kernel = np.asarray(layer.query_key_value.kernel)
    b = np.asarray(layer.query_key_value.bias)
    q, k, v = (x @ kernel[:, i * 12:(i + 1) * 12] + b[i * 12:(i + 1) * 12] for i in range(3))
    heads = []
    for h in range(3):
        s = slice(4 * h, 4 * h + 4)
        scores = q[..., s] @ np.swapaxes(k[..., s], 1, 2) / 2.0
        p = np.exp(scores - scores.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        heads.append(p @ v[..., s])
    context = np.concatenate(heads, -1)
    expected = context @ np.asarray(layer.output_dense.kernel) + np.asarray(layer.output_dense.bias)
    np.testing.assert_allclose(y, expected, atol=1e-5)


def test_transformer_encoder_shapes_and_config():
    layer = TransformerEncoder(12, 3, 37, "gelu_tanh")
    out = layer(np.ones((3, 7, 12), "float32"), np.ones((3, 7), "int32"))
    assert out.shape == (3, 7, 12)
    rebuilt = assert_config_round_trip(layer)
    assert rebuilt.hidden_act == "gelu_tanh"


def test_transformer_encoder_query_positions_equal_rows_of_full_output():
    layer = TransformerEncoder(12, 3, 37, "gelu")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 7, 12)).astype("float32")
    mask = np.ones((2, 7), "int32")
    mask[1, 5:] = 0
    positions = np.array([[0, 3, 3, 6], [0, 4, 1, 0]], "int32")
    full = np.asarray(layer(x, mask))
    some = np.asarray(layer(x, mask, query_positions=positions))
    assert some.shape == (2, 4, 12)
    np.testing.assert_allclose(some, np.take_along_axis(full, positions[..., None], 1),
                               atol=1e-5)
    # Gradients flow to every input row through the keys and values.
    import tensorflow as tf

    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        loss = tf.reduce_sum(layer(xt, mask, query_positions=positions) ** 2)
    grad = tape.gradient(loss, xt).numpy()
    assert (np.abs(grad[0]).sum(-1) > 0).all()
    assert (np.abs(grad[1, 5:]).sum(-1) == 0).all()  # padded keys get no gradient


@pytest.mark.parametrize("causal", [False, True])
def test_row_branches_compute_the_blocks_numbers(causal):
    """`traced_in_row_branches(k)`: an inference call traced in it computes
    the block on k slices of the positions (k attention matmul pairs in the
    graph), with the whole block's numbers: padding masked, causal rows by
    their own positions, more branches than positions; training calls and
    calls outside the block are the plain graph."""
    import tensorflow as tf

    from keras_bert_impl.speed.row_branches import current_row_branches
    from keras_bert_impl.speed.row_branches import traced_in_row_branches

    block = TransformerEncoder(12, 3, 37, "gelu", causal=causal)
    x = np.random.default_rng(0).normal(size=(3, 7, 12)).astype("float32")
    mask = np.ones((3, 7), "int32")
    mask[1, 4:] = 0
    want = np.asarray(block(x, mask))

    def matmuls(function, *args):
        graph = function.get_concrete_function(*args).graph
        return sum(op.type == "BatchMatMulV2" for op in graph.get_operations())

    for count in (1, 2, 3, 9):
        with traced_in_row_branches(count):
            assert current_row_branches() == count
            infer = tf.function(lambda a, m: block(a, m, training=False))
            np.testing.assert_allclose(infer(x, mask), want, atol=1e-6)
            np.testing.assert_allclose(infer(x[:, :1], mask[:, :1]), block(x[:, :1], mask[:, :1]),
                                       atol=1e-6)
            assert matmuls(infer, x, mask) == 2 * count
            train = tf.function(lambda a, m: block(a, m, training=True))
            assert matmuls(train, x, mask) == 2
    assert current_row_branches() == 1
    with pytest.raises(ValueError, match="count must be an int >= 1; received 0"):
        with traced_in_row_branches(0):
            pass


@pytest.mark.parametrize("causal", [False, True])
def test_head_branches_compute_the_blocks_numbers(causal):
    """`traced_in_head_branches`: inference calls compute the block in groups
    of heads from the regrouped copies, with its numbers;
    `in_head_branches_when_short` only below `HEAD_BRANCH_ROWS` rows;
    training never; a count that does not divide the heads is refused."""
    import tensorflow as tf

    from keras_bert_impl.speed.head_branches import HEAD_BRANCH_ROWS
    from keras_bert_impl.speed.head_branches import HeadBranches
    from keras_bert_impl.speed.head_branches import head_branch_count
    from keras_bert_impl.speed.head_branches import in_head_branches_when_short
    from keras_bert_impl.speed.head_branches import traced_in_head_branches

    block = TransformerEncoder(12, 4, 36, "gelu", 0.0, 0.0, causal=causal)
    rng = np.random.default_rng(0)
    long = HEAD_BRANCH_ROWS // 2
    x = rng.normal(size=(2, long, 12)).astype("float32")
    mask = (1 - (np.arange(long) >= 4) * np.array([[0], [1]])).astype("int32")
    short = (x[:, :7], mask[:, :7])
    block(*short)  # built
    spec = [tf.TensorSpec([None, None, 12]), tf.TensorSpec([None, None], tf.int32)]
    for count in (2, 4):
        branches = HeadBranches([block], count)
        assert len(branches.blocks[0].query_key_value) == count

        def heads(a, m, branches=branches):
            with traced_in_head_branches(branches):
                return block(a, m, training=False), block(a, m, training=True)

        def when_short(a, m, branches=branches):
            return in_head_branches_when_short(branches, tf.size(m),
                                               lambda: block(a, m, training=False))

        heads, when_short = (tf.function(f, input_signature=spec) for f in (heads, when_short))
        for a, m in (short, (x, mask)):
            np.testing.assert_allclose(heads(a, m)[0], block(a, m), atol=1e-5)
            np.testing.assert_allclose(when_short(a, m), block(a, m), atol=1e-5)
        copy = branches.blocks[0].intermediate[-1]
        copy.assign_add(rng.normal(size=copy.shape).astype("float32"))
        assert np.abs(heads(x, mask)[0] - block(x, mask)).max() > 0.1
        np.testing.assert_allclose(heads(x, mask)[1], block(x, mask), atol=1e-6)  # training
        assert np.abs(when_short(*short) - block(*short)).max() > 0.1
        np.testing.assert_allclose(when_short(x, mask), block(x, mask), atol=1e-6)
    with pytest.raises(ValueError, match=r"head_branches=3 must divide .* heads \(4\)"):
        HeadBranches([block], 3)
    assert not HeadBranches([block]).blocks and head_branch_count(TransformerEncoder(768, 12, 3072)) == 2


def test_pooler_uses_first_token():
    layer = BertPooler(12)
    x = np.random.default_rng(0).normal(size=(3, 7, 12)).astype("float32")
    y = np.asarray(layer(x))
    x[:, 1:] = 0
    np.testing.assert_allclose(y, np.asarray(layer(x)))
    assert y.shape == (3, 12) and np.abs(y).max() <= 1
    assert_config_round_trip(layer)


def test_masked_lm_head_gathers_and_ties():
    embedding = TiedWordEmbedding(99, 12)
    embedding.build((None, None))
    head = MaskedLMHead(embedding, "gelu")
    x = np.random.default_rng(0).normal(size=(3, 7, 12)).astype("float32")
    positions = np.array([[1, 2], [0, 6], [3, 3]], "int32")
    logits = np.asarray(head(x, positions))
    assert logits.shape == (3, 2, 99) and logits.dtype == np.float32
    gathered = np.take_along_axis(x, positions[..., None], axis=1)
    h = np.asarray(head.layer_norm(head.dense(gathered)))
    expected = h @ np.asarray(embedding.embeddings).T + np.asarray(head.output_bias)
    np.testing.assert_allclose(logits, expected, atol=1e-5)
    rebuilt = assert_config_round_trip(head)
    assert isinstance(rebuilt.word_embedding, TiedWordEmbedding)


def test_next_sentence_head():
    head = NextSentenceHead()
    assert head(np.ones((3, 12), "float32")).shape == (3, 2)
    assert_config_round_trip(head)


def test_layer_norms_run_in_float32_under_mixed_precision():
    keras.config.set_dtype_policy("mixed_bfloat16")
    layer = TransformerEncoder(12, 3, 37)
    out = layer(np.ones((3, 7, 12), "float32"), np.ones((3, 7), "int32"))
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert layer.attention_layer_norm.compute_dtype == "float32"
    assert layer.output_layer_norm.compute_dtype == "float32"
    assert layer.intermediate_dense.compute_dtype == "bfloat16"
    assert layer.intermediate_dense.kernel.dtype == "float32"  # float32 master weights


@pytest.mark.parametrize("name,approximate", [("gelu", False), ("gelu_tanh", True)])
def test_gelu_custom_gradient_matches_autodiff(name, approximate):
    import tensorflow as tf

    x = tf.constant(np.linspace(-6, 6, 101, dtype="float32"))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = get_activation(name)(x)
        reference = tf.nn.gelu(x, approximate=approximate)
    reference_grad = tape.gradient(reference, x)
    np.testing.assert_allclose(ours, reference, atol=1e-6)
    np.testing.assert_allclose(tape.gradient(ours, x), reference_grad, atol=1e-5)
    with tf.GradientTape() as tape:  # the same inside a traced graph
        tape.watch(x)
        y = tf.function(lambda v: get_activation(name)(v) * 3.0)(x)
    np.testing.assert_allclose(tape.gradient(y, x), 3.0 * reference_grad, atol=3e-5)


@pytest.mark.parametrize("name,approximate", [("gelu", False), ("gelu_tanh", True)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_gelu_is_float32_gelu_rounded_once(name, approximate, dtype):
    """Half-precision GELU is computed in float32 and rounded once (exact to
    the last bit against that), keeping its dtype and its gradient."""
    import tensorflow as tf

    x = tf.cast(tf.constant(np.linspace(-6, 6, 1001, dtype="float32")), dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        ours = get_activation(name)(x)
    expected = tf.cast(tf.nn.gelu(tf.cast(x, "float32"), approximate=approximate), dtype)
    assert ours.dtype == dtype
    np.testing.assert_array_equal(ours.numpy().astype("float32"), expected.numpy().astype("float32"))
    x32 = tf.cast(x, "float32")
    with tf.GradientTape() as tape32:
        tape32.watch(x32)
        reference = tf.nn.gelu(x32, approximate=approximate)
    np.testing.assert_allclose(tape.gradient(ours, x).numpy().astype("float32"),
                               tape32.gradient(reference, x32), atol=2e-2)


@pytest.mark.parametrize("shape", [(40, 50, 64), (3, 7, 37)])
def test_fast_dropout_rate_scale_and_inference(shape):
    layer = FastDropout(0.1, seed=3)
    x = np.ones(shape, "float32")
    y = np.asarray(layer(x, training=True))
    dropped = (y == 0).mean()
    tolerance = 4 * np.sqrt(0.1 * 0.9 / y.size)  # 4 standard errors
    assert abs(dropped - 0.1) < tolerance, dropped
    np.testing.assert_allclose(y[y != 0], 1 / 0.9, rtol=1e-6)
    assert not np.array_equal(y, np.asarray(layer(x, training=True)))  # new mask each call
    np.testing.assert_array_equal(layer(x, training=False), x)
    np.testing.assert_array_equal(FastDropout(0.0)(x, training=True), x)
    assert_config_round_trip(layer)
    with pytest.raises(ValueError, match="rate=1.0"):
        FastDropout(1.0)


def test_fast_dropout_masks_are_uncorrelated():
    """The hashed draws behave as independent coin flips: on 4.2M elements
    at rate 0.1, the share dropped, and the share of pairs dropped together
    (neighbours along either axis, the same element, or the next one, in two
    successive calls, in two layers, under seeds 0 and 1), are within 5 standard errors of 0.1
    and 0.01. Measured: 0.10005, pairs 0.00997-0.01005."""
    x = np.ones((32, 8, 128, 128), "float32")
    layer = FastDropout(0.1, seed=3)
    first, second = (np.asarray(layer(x, training=True)) == 0 for _ in range(2))
    others = [np.asarray(FastDropout(0.1, seed=seed)(x, training=True)) == 0
              for seed in (0, 1, 4)]
    n = x.size
    assert abs(first.mean() - 0.1) < 5 * np.sqrt(0.09 / n)
    pairs = {"next in a row": (first[..., 1:], first[..., :-1]),
             "next row": (first[..., 1:, :], first[..., :-1, :]),
             "next call": (first, second), "another layer": (first, others[2]),
             # A draw of hash(index + step) would repeat the last call's
             # mask one element on.
             "next call, one element on": (first.ravel()[1:], second.ravel()[:-1]),
             "seeds 0 and 1": (others[0], others[1])}
    for name, (a, b) in pairs.items():
        both = (a & b).mean()
        assert abs(both - 0.01) < 5 * np.sqrt(0.0099 / a.size), (name, both)


def test_fast_dropout_gradient_is_the_mask():
    import tensorflow as tf

    layer = FastDropout(0.5, seed=1)
    x = tf.ones((8, 16))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
    grad = tape.gradient(y, x).numpy()
    np.testing.assert_array_equal(grad, y.numpy())  # ones in, so grad == output

    # Traced, in bfloat16, for any upstream gradient: the backward pass
    # recomputes the forward pass's mask.
    layer = FastDropout(0.3, seed=2, dtype="mixed_bfloat16")
    dy = tf.constant(np.random.default_rng(0).normal(size=(6, 5, 33)), "float32")

    @tf.function
    def forward_and_grad(v):
        with tf.GradientTape() as tape:
            tape.watch(v)
            out = layer(v, training=True)
        return out, tape.gradient(out, v, output_gradients=tf.cast(dy, out.dtype))

    y, grad = forward_and_grad(tf.ones((6, 5, 33)))
    assert y.dtype == "bfloat16" and 0.2 < (y.numpy() == 0).mean() < 0.4
    kept = y.numpy().astype("float32") != 0
    expected = np.where(kept, dy.numpy() / 0.7, 0.0)
    np.testing.assert_allclose(grad.numpy().astype("float32"), expected, rtol=1e-2)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_fast_layer_norm_equals_keras_in_values_and_gradients(policy):
    """The fused training pass against `keras.layers.LayerNormalization`:
    outputs and the gradients for x, gamma and beta, eagerly and traced, on
    rows far from zero mean and unit variance; inference, plain TensorFlow
    ops (no XLA in an exported graph), gives Keras' values."""
    import tensorflow as tf

    keras.config.set_dtype_policy(policy)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(3.0, 2.0, (4, 7, 12)), "float32")
    dy = tf.constant(rng.normal(size=(4, 7, 12)), "float32")
    reference = keras.layers.LayerNormalization(epsilon=1e-12)
    ours = FastLayerNormalization(epsilon=1e-12)
    reference.build(x.shape)
    ours.build(x.shape)
    reference.set_weights([rng.normal(size=12).astype("float32") for _ in range(2)])
    ours.set_weights(reference.get_weights())

    def values_and_gradients(layer, training, traced):
        def run(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(x, training=training)
                loss = tf.reduce_sum(tf.cast(y, "float32") * dy)
            return [y, *tape.gradient(loss, [x, *layer.trainable_weights])]

        return (tf.function(run) if traced else run)(x)

    for traced in (False, True):
        expected = values_and_gradients(reference, True, traced)
        got = values_and_gradients(ours, True, traced)
        assert got[0].dtype == expected[0].dtype  # the layer's compute dtype, as Keras'
        for name, a, b in zip(("y", "dx", "dgamma", "dbeta"), got, expected):
            np.testing.assert_allclose(tf.cast(a, "float32"), tf.cast(b, "float32"), atol=1e-5,
                                       err_msg=name)
    for traced in (False, True):  # inference: plain TensorFlow ops, Keras' values
        infer = (tf.function if traced else lambda f: f)(lambda v: ours(v, training=False))
        np.testing.assert_allclose(tf.cast(infer(x), "float32"),
                                   tf.cast(reference(x, training=False), "float32"),
                                   **(dict(atol=1e-5) if policy == "float32" else  # 1 bf16 ulp:
                                      dict(rtol=8e-3, atol=1e-2)))
    graph = tf.function(lambda v: ours(v, training=False)).get_concrete_function(x).graph
    assert not any(op.get_attr("_XlaMustCompile") for op in graph.get_operations()
                   if "_XlaMustCompile" in op.node_def.attr)
    assert_config_round_trip(ours)
