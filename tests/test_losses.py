import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.losses import MaskedLMLoss
from keras_bert_impl.losses import sparse_softmax_cross_entropy


def test_fused_cross_entropy_matches_tensorflow():
    rng = np.random.default_rng(0)
    logits = tf.Variable(rng.normal(scale=5.0, size=(3, 7, 99)).astype("float32"))
    labels = tf.constant(rng.integers(0, 99, (3, 7)))
    upstream = tf.constant(rng.normal(size=(3, 7)).astype("float32"))
    with tf.GradientTape(persistent=True) as tape:
        ours = sparse_softmax_cross_entropy(labels, logits)
        reference = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        ours_sum = tf.reduce_sum(ours * upstream)
        reference_sum = tf.reduce_sum(reference * upstream)
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        tape.gradient(ours_sum, logits), tape.gradient(reference_sum, logits), atol=1e-6
    )


def test_fused_cross_entropy_is_stable_for_large_logits():
    logits = tf.constant([[1000.0, 0.0, -1000.0]])
    np.testing.assert_allclose(sparse_softmax_cross_entropy(tf.constant([1]), logits), [1000.0])


def test_masked_lm_loss_weighted_mean_and_serialization():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 3, 11)).astype("float32")
    labels = rng.integers(0, 11, (2, 3))
    weights = np.array([[1, 1, 0], [1, 0, 0]], "float32")
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits).numpy()
    loss = MaskedLMLoss()
    np.testing.assert_allclose(
        loss(labels, logits, sample_weight=weights), (xent * weights).sum() / 3, rtol=1e-6)
    rebuilt = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(rebuilt, MaskedLMLoss) and rebuilt.name == "masked_lm_loss"


def test_sparse_accuracy_equals_keras_on_every_shape_and_weight():
    """Our argmax accuracy (every model's default metric) gives Keras'
    `SparseCategoricalAccuracy` values: labels of shape (N,) and (N, 1),
    rank-3 logits, sample weights, and bfloat16 logits."""
    from keras_bert_impl.metrics import SparseAccuracy

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 5, 11)).astype("float32")
    labels = rng.integers(0, 11, (4, 5))
    labels[0, :3] = logits[0, :3].argmax(-1)  # some right, most wrong
    weights = rng.random((4, 5)).astype("float32")
    cases = [(labels, logits, None), (labels, logits, weights),
             (labels.reshape(-1, 1), logits.reshape(-1, 11), weights.reshape(-1)),
             (labels, tf.cast(logits, tf.bfloat16), weights)]
    for y_true, y_pred, w in cases:
        ours, theirs = SparseAccuracy(), keras.metrics.SparseCategoricalAccuracy()
        ours.update_state(y_true, y_pred, sample_weight=w)
        theirs.update_state(y_true, y_pred, sample_weight=w)
        assert 0 < float(theirs.result()) < 1
        assert float(ours.result()) == pytest.approx(float(theirs.result()), abs=1e-7)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(
        SparseAccuracy(name="lm_accuracy")))
    assert isinstance(restored, SparseAccuracy) and restored.name == "lm_accuracy"
