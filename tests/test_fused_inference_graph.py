"""The served blocks' matmuls keep oneDNN's fusions.

On CPU, TensorFlow's graph optimizer (grappler's remapper) fuses MatMul +
BiasAdd (+ GELU) into one `_FusedMatMul`, which oneDNN runs as a single
kernel; an unfused exact GELU costs Neg, Erfc and Mul ops on every
request. The fusion depends on how the graph is written (a `+` where
`keras.ops.add` was needed once cost the head branches every fusion), so
this reads the optimized graph of each inference layout.

The remapper fuses only where oneDNN has the kernel for the CPU (an AVX2
AMD EPYC here kept MatMul, AddV2 and the GELU's Erfc apart even for one
plain `tf.nn.gelu(bias_add(x @ w, b))`): the test holds each layout to what the
remapper does with that plain reference on the machine it runs on.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.grappler import tf_optimizer
from tensorflow.python.training import saver

from keras_bert_impl.layers.transformer_encoder import TransformerEncoder
from keras_bert_impl.speed.head_branches import HeadBranches
from keras_bert_impl.speed.head_branches import traced_in_head_branches
from keras_bert_impl.speed.row_branches import traced_in_row_branches

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"  # the remapper fuses placed nodes only


def optimized_ops(function):
    """(op type, fused ops) of every node of `function`'s graph after grappler."""
    graph = function.get_concrete_function().graph
    meta = saver.export_meta_graph(graph_def=graph.as_graph_def(), graph=graph)
    meta.collection_def["train_op"].node_list.value.extend(
        t.name.split(":")[0] for t in function.get_concrete_function().outputs)
    optimized = tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), meta)
    nodes = list(optimized.node) + [n for f in optimized.library.function for n in f.node_def]
    return [(n.op, [s.decode() for s in n.attr["fused_ops"].list.s]) for n in nodes]


def _cpu_fuses_gelu():
    """Whether grappler fuses a plain `tf.nn.gelu(bias_add(x @ w, b))` into one
    `_FusedMatMul` on this CPU. The weights are inputs: constant ones would
    be folded (a zero bias is dropped before the remapper sees it)."""
    spec = [tf.TensorSpec([None, 12]), tf.TensorSpec([12, 36]), tf.TensorSpec([36])]

    @tf.function(input_signature=spec)
    def plain(x, w, b):
        with tf.device(CPU):
            return tf.nn.gelu(tf.nn.bias_add(tf.matmul(x, w), b), approximate=False)

    return ["BiasAdd", "GeluExact"] in [f for op, f in optimized_ops(plain) if op == "_FusedMatMul"]


def _summary(ops):
    """The op counts and the fused ops, for a failure's message."""
    return collections.Counter(op for op, _ in ops), [f for _, f in ops if f]


@pytest.mark.parametrize("layout", ["one_graph", "row_branches", "head_branches"])
def test_inference_blocks_fuse_bias_and_gelu_into_their_matmuls(layout):
    block = TransformerEncoder(12, 4, 36, "gelu", 0.0, 0.0)
    block(np.zeros((1, 5, 12), "float32"), np.ones((1, 5), "int32"))
    branches = HeadBranches([block], 2)
    spec = [tf.TensorSpec([None, None, 12]), tf.TensorSpec([None, None], tf.int32)]

    @tf.function(input_signature=spec)
    def infer(x, mask):
        with tf.device(CPU):
            if layout == "head_branches":
                with traced_in_head_branches(branches):
                    return block(x, mask, training=False)
            with traced_in_row_branches(2 if layout == "row_branches" else 1):
                return block(x, mask, training=False)

    ops = optimized_ops(infer)
    count = 1 if layout == "one_graph" else 2
    if not _cpu_fuses_gelu():  # each branch computes its GELU once, fused or not
        gelus = sum(op == "Erfc" for op, _ in ops) + sum(
            op == "_FusedMatMul" and "GeluExact" in f for op, f in ops)
        assert gelus == count, _summary(ops)
        return
    assert not [op for op, _ in ops if op in ("Erf", "Erfc")], _summary(ops)
    fused = [f for op, f in ops if op == "_FusedMatMul"]
    assert fused.count(["BiasAdd", "GeluExact"]) == count, _summary(ops)
    # The query-key-value projections (one per branch) carry their bias.
    assert fused.count(["BiasAdd"]) >= count, _summary(ops)
