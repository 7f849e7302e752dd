"""Row branches: an inference graph that several cores share at batch 1.

A Transformer block reads each position's own row everywhere but in
attention's keys and values: the projections, the output projection, the
feed-forward layers and both LayerNorms are per row. Cut the sequence into
`count` slices of rows and each slice is a branch of its own graph, joined
only where every slice's keys and values are concatenated for attention.
TensorFlow's executor runs independent branches side by side on its inter-op
threads, so one request keeps `count` cores busy with single-threaded
kernels.

Why not intra-op threads: at batch 1 each op is small (a `(128, 384) x
(384, 1536)` matmul), and spreading every op over TensorFlow's intra-op pool
costs more than it saves. Measured on 2 cores (a MiniLM-shaped encoder,
128 tokens, p50): 19.3 ms with 2 intra-op threads, 23 ms with 1, 12.6 ms in
2 row branches with 1 intra-op and 2 inter-op threads. The same numbers
come out: each slice's matmuls are the whole layer's rows.

`TransformerEncoder` computes in row branches in inference calls traced
inside `with traced_in_row_branches(count):`; the SavedModel exports trace their
signatures so (`keras_bert_impl.bert.bert_serving.export_saved_model`'s
`row_branches`). Training and Keras calls are unchanged.
"""

import contextlib
import threading

import keras

_STATE = threading.local()


@contextlib.contextmanager
def traced_in_row_branches(count):
    """Inference calls of `TransformerEncoder` traced in this block compute in
    `count` row branches (1: as one graph)."""
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"row_branches: the count must be an int >= 1; received {count!r}.")
    previous = current_row_branches()
    _STATE.count = count
    try:
        yield
    finally:
        _STATE.count = previous


def current_row_branches():
    """The `traced_in_row_branches` count in force on this thread (1 outside one)."""
    return getattr(_STATE, "count", 1)


def encoder_in_row_branches(block, inputs, input_mask, count):
    """`TransformerEncoder.call` in inference on `count` slices of the
    positions, one graph branch each, joined only by attention's keys and
    values; `block` is the `TransformerEncoder` (its `_feed_forward` is the
    second sublayer)."""
    length = keras.ops.shape(inputs)[1]
    bounds = [length * b // count for b in range(count + 1)]
    rows = [inputs[:, bounds[b]:bounds[b + 1]] for b in range(count)]  # (B, S_b, H)
    projected = [block.attention.project(x) for x in rows]  # (B, N, S_b, D) each
    key = keras.ops.concatenate([k for _, k, _ in projected], axis=2)  # (B, N, S, D)
    value = keras.ops.concatenate([v for _, _, v in projected], axis=2)
    outputs = []
    for start, x, (query, _, _) in zip(bounds, rows, projected):
        a = block.attention.attend(query, key, value, input_mask, query_offset=start)
        outputs.append(block._feed_forward(block.attention_layer_norm(x + a)))
    return keras.ops.concatenate(outputs, axis=1)  # (B, S, H)
