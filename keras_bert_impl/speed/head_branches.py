"""Head branches: a short request's inference graph that several cores share.

Row branches (`keras_bert_impl.speed.row_branches`) cut a block's positions
into slices; at a few dozen tokens each slice's matmuls are a handful of
rows, and the slices meet in attention. Heads cut the other way: branch g
computes the queries, keys and values of its `N / count` heads, their
attention and their rows' share of the output projection; the feed-forward
layer likewise splits into groups of the intermediate columns and their rows
of the second matmul. Every branch reads all positions and yields a partial
sum of the sublayer's output; the branches join where the partial sums are
added, before each LayerNorm. TensorFlow's inter-op threads run the branches
side by side, as with row branches.

The head groups' columns of the fused query-key-value kernel, and the
intermediate kernel's column groups, are not contiguous: slicing them would
copy the kernels on every request. `HeadBranchWeights` stores them regrouped,
as variables beside the model's (7 of each block's 12 H x H weights again:
an export larger by about 28% for MiniLM, 45% for `base`).

Measured at batch 1 on 2 cores (1 intra-op, 2 inter-op threads), p50 of the
SavedModel: a `base` model (H=768) at 32 tokens 37.5 ms with head
branches, 55.5 with row branches alone (ONNX Runtime 29.6). In a probe of
the two layouts alone, head branches were level with row branches at 128
tokens and behind at 384 (41 against 40 ms, MiniLM), so a request computes
in head branches below `HEAD_BRANCH_ROWS` rows (batch x length) and in row
branches from there: `in_head_branches_when_short` traces the model both
ways under one `cond` per request (a `cond` in each block instead cost 0.3
ms of MiniLM's 5.5 at 32 tokens; an unlowered `cond` cost 2 ms at 128).
Even so the `cond` has a price: the executor walks the branch not taken.
For MiniLM (H=384) the sums came out even: p50 at 32 tokens 5.4-5.6 ms
against 5.8 without head branches, at 128 tokens 11.6-12.1 against
11.4-11.8, for an export 28% larger; so by default only models of at least
`HEAD_BRANCH_MIN_HIDDEN` hidden units export with them.

`TransformerEncoder` computes in head branches in inference calls traced
inside `with traced_in_head_branches(branches):`; the SavedModel exports
trace their models so for short requests
(`keras_bert_impl.bert.bert_serving.export_saved_model`'s `head_branches`). Training
and Keras calls are unchanged.
"""

import contextlib
import threading

import keras
import tensorflow as tf

HEAD_BRANCH_ROWS = 128
HEAD_BRANCH_MIN_HIDDEN = 768
_STATE = threading.local()


def head_branch_count(block, count=None):
    """The number of head branches of `block` (a `TransformerEncoder`):
    `count` if it divides both its heads and its intermediate width (else a
    ValueError naming it); with `None`, 2 (the cores of the machines
    measured) where 2 divides both and the hidden size is at least
    `HEAD_BRANCH_MIN_HIDDEN`, else 1."""
    num_attention_heads, intermediate_size = block.num_attention_heads, block.intermediate_size
    if count is None:
        small = block.hidden_size < HEAD_BRANCH_MIN_HIDDEN
        return 1 if small or num_attention_heads % 2 or intermediate_size % 2 else 2
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"head_branches: the count must be an int >= 1; received {count!r}.")
    if num_attention_heads % count or intermediate_size % count:
        raise ValueError(
            f"head_branches={count} must divide the model's attention heads "
            f"({num_attention_heads}) and intermediate size ({intermediate_size}).")
    return count


class HeadBranchWeights(tf.Module):
    """One block's kernels regrouped by branch: `query_key_value[g]` `(H,
    3 * H / count)` with columns [queries | keys | values] of heads
    `g * N / count` onwards, its bias; `intermediate[g]` `(H, I / count)`
    and its bias. Copies of the block's values when made."""

    def __init__(self, block, count):
        super().__init__()
        h, per = block.hidden_size, block.hidden_size // count
        inter = block.intermediate_size // count
        qkv_kernel, qkv_bias, kernel, bias = (tf.convert_to_tensor(v) for v in (
            block.attention.query_key_value.kernel, block.attention.query_key_value.bias,
            block.intermediate_dense.kernel, block.intermediate_dense.bias))
        self.query_key_value, self.query_key_value_bias = [], []
        self.intermediate, self.intermediate_bias = [], []
        for g in range(count):
            columns = tf.concat([tf.range(part * h + g * per, part * h + (g + 1) * per)
                                 for part in range(3)], axis=0)
            inter_columns = slice(g * inter, (g + 1) * inter)
            self.query_key_value.append(tf.Variable(tf.gather(qkv_kernel, columns, axis=1),
                                                    trainable=False))
            self.query_key_value_bias.append(tf.Variable(tf.gather(qkv_bias, columns),
                                                         trainable=False))
            self.intermediate.append(tf.Variable(kernel[:, inter_columns], trainable=False))
            self.intermediate_bias.append(tf.Variable(bias[inter_columns], trainable=False))


class HeadBranches(tf.Module):
    """`HeadBranchWeights` of each of `blocks` (`TransformerEncoder`s), in
    `count` branches (`head_branch_count`); a count of 1 holds none."""

    def __init__(self, blocks, count=None):
        super().__init__()
        counts = {head_branch_count(b, count) for b in blocks}
        self.count = min(counts, default=1)
        self.blocks = [HeadBranchWeights(b, self.count) for b in blocks] if self.count > 1 else []
        self._ids = tuple(id(b) for b in blocks) if self.count > 1 else ()

    def weights_of(self, block):
        return self.blocks[self._ids.index(id(block))] if id(block) in self._ids else None


@contextlib.contextmanager
def traced_in_head_branches(branches):
    """Inference calls of the blocks of `branches` (`HeadBranches`) traced in
    this block compute in head branches when the request is short."""
    previous = getattr(_STATE, "branches", None)
    _STATE.branches = branches
    try:
        yield
    finally:
        _STATE.branches = previous


def current_head_branch_weights(block):
    """`block`'s `HeadBranchWeights` under `traced_in_head_branches`, else None."""
    branches = getattr(_STATE, "branches", None)
    return None if branches is None else branches.weights_of(block)


def in_head_branches_when_short(branches, rows, compute):
    """`compute()` (a model's outputs, traced) in head branches when `rows`
    (a scalar tensor: batch x length) is below `HEAD_BRANCH_ROWS`, else as
    traced outside them: one `tf.cond`. Plain `compute()` when `branches`
    holds none."""
    if branches is None or not branches.blocks:
        return compute()

    def short():
        with traced_in_head_branches(branches):
            return compute()

    return tf.cond(rows < HEAD_BRANCH_ROWS, short, compute)


def encoder_in_head_branches(block, inputs, input_mask, weights):
    """`TransformerEncoder.call` in inference with each group of heads (and
    of intermediate columns) a graph branch of its own, joined by the sums
    of their output projections; `block` is the `TransformerEncoder`."""
    batch, seq = keras.ops.shape(inputs)[0], keras.ops.shape(inputs)[1]
    count = len(weights.query_key_value)
    h, per = block.hidden_size, block.hidden_size // count
    inter = block.intermediate_size // count

    def cast(w):
        return keras.ops.cast(w, block.compute_dtype)

    attention = block.attention
    x = keras.ops.reshape(cast(inputs), (-1, h))  # (B*S, H)
    kernel = cast(attention.output_dense.kernel)  # (H, H)
    parts = []
    for g in range(count):
        # keras.ops.add, not `+`: with it grappler fuses the bias (and the
        # GELU below) into oneDNN's matmul, as in Dense layers; with `+`
        # neither fused and the GELU ran as separate Neg, Erfc and Mul
        # ops (tests/test_fused_inference_graph.py).
        qkv = keras.ops.add(keras.ops.matmul(x, cast(weights.query_key_value[g])),
                            cast(weights.query_key_value_bias[g]))  # (B*S, 3H / count)
        query, key, value = attention.split_heads(qkv, batch, seq,
                                                  block.num_attention_heads // count)
        context = attention.context(query, key, value, input_mask)  # (B*S, H / count)
        parts.append(keras.ops.matmul(context, kernel[g * per:(g + 1) * per]))
    a = sum(parts[1:], parts[0]) + cast(attention.output_dense.bias)
    x = block.attention_layer_norm(inputs + keras.ops.reshape(a, (batch, seq, h)))
    x = cast(x)
    rows = keras.ops.reshape(x, (-1, h))
    activation = block.intermediate_dense.activation
    kernel = cast(block.output_dense.kernel)  # (I, H)
    parts = [keras.ops.matmul(activation(keras.ops.add(
        keras.ops.matmul(rows, cast(weights.intermediate[g])),
        cast(weights.intermediate_bias[g]))), kernel[g * inter:(g + 1) * inter])
        for g in range(count)]
    f = sum(parts[1:], parts[0]) + cast(block.output_dense.bias)
    x = block.output_layer_norm(x + keras.ops.reshape(f, (batch, seq, h)))
    return cast(x)
