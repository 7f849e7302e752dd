"""`plain_ops()`: trace our fast layers as plain ops, for other runtimes' converters.

GELU and XLNet's head biases wrap their forward pass in `tf.custom_gradient`
so that training runs a hand-written (XLA-fused) backward pass. Traced, a
custom gradient leaves an `IdentityN` of the values its backward pass reads
in the graph, and TensorFlow's `Gelu` op computes `erfc`. TensorFlow
Serving prunes the first and runs the second, but ONNX's converter has no
`Erfc`, and OpenVINO's turns each `IdentityN` into one more model output
(one `(B*S, 4H)` GELU input per block). Inside `plain_ops()` those layers
trace their plain forward instead: the same values (GELU in its erf form,
`0.5 x (1 + erf(x / sqrt 2))`, within 1e-6 of `tf.nn.gelu`) and no
gradient, which inference does not need.
"""

import contextlib
import threading

_STATE = threading.local()


@contextlib.contextmanager
def plain_ops():
    """Within it (on this thread), `tracing_plain()` is True."""
    depth = getattr(_STATE, "depth", 0)
    _STATE.depth = depth + 1
    try:
        yield
    finally:
        _STATE.depth = depth


def tracing_plain():
    """Whether the code runs inside `plain_ops()`: the layers then trace no
    custom gradient."""
    return getattr(_STATE, "depth", 0) > 0
