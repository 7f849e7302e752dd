"""XLNet's local permutation (`tf_records.xlnet.permutation`): one order per
block, the mask's properties, a full permutation a strict total order."""

import numpy as np
import tensorflow as tf
from xlnet_records_cases import CLS
from xlnet_records_cases import SEP
from xlnet_records_cases import V

from tf_records.xlnet.permutation import local_permutation
from tf_records.xlnet.permutation import permutation_index


def test_permutation_index_one_order_per_block():
    index = permutation_index(12, 4, tf.constant([3, 9])).numpy()
    order = index[:4]
    assert sorted(order) == [0, 1, 2, 3]
    np.testing.assert_array_equal(index.reshape(3, 4), order + 4 * np.arange(3)[:, None])
    others = {tuple(permutation_index(12, 4, tf.constant([3, s])).numpy()[:4]) for s in range(40)}
    assert len(others) > 10  # the seed matters; 24 orders are possible


def test_local_permutation_mask_properties():
    rng = np.random.default_rng(0)
    for trial in range(20):
        n = 12
        inputs = rng.integers(9, V, n)
        inputs[rng.random(n) < 0.15] = SEP
        inputs[rng.random(n) < 0.1] = CLS
        is_masked = rng.random(n) < 0.4
        index = permutation_index(n, 4, tf.constant([0, trial]))
        perm_mask, _, target_mask, _, input_q = (t.numpy() for t in local_permutation(
            tf.constant(inputs, tf.int64), tf.constant(inputs, tf.int64), tf.constant(is_masked),
            index, SEP, CLS))
        functional = (inputs == SEP) | (inputs == CLS)
        target = is_masked & ~functional
        np.testing.assert_array_equal(target_mask, target)
        np.testing.assert_array_equal(input_q, target)
        assert (np.diag(perm_mask)[target] == 1).all()  # a target may not see itself
        assert (np.diag(perm_mask)[~target] == 0).all()
        plain = ~target & ~functional
        assert (perm_mask[np.ix_(plain, target)] == 1).all()  # plain tokens see no target
        assert (perm_mask[:, plain] == 0).all()  # everyone sees the plain tokens
        rank = index.numpy()
        for i in np.flatnonzero(target):  # targets see the targets ranked before them
            np.testing.assert_array_equal(perm_mask[i, target], rank[target] >= rank[i])


def test_full_permutation_is_a_strict_total_order():
    """perm_size = L, every token a target: `perm_mask` is a factorization order."""
    n = 9
    inputs = np.arange(20, 20 + n)
    index = permutation_index(n, n, tf.constant([4, 2]))
    perm_mask = local_permutation(tf.constant(inputs, tf.int64), tf.constant(inputs, tf.int64),
                                  tf.ones([n], tf.bool), index, SEP, CLS)[0].numpy()
    order = np.argsort(index.numpy())  # positions in the order they are predicted
    assert sorted(order) == list(range(n))
    sees = 1 - perm_mask[np.ix_(order, order)]
    np.testing.assert_array_equal(sees, np.tril(np.ones([n, n]), -1))  # acyclic, total, strict
