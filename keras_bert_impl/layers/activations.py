"""The `hidden_act` functions a BERT config may name.

GELU's forward pass is TensorFlow's own `tf.nn.gelu`, which grappler fuses
with the preceding MatMul + BiasAdd into one oneDNN kernel on CPU. Its
gradient, left to autodiff, is many separate elementwise kernels, each a
full pass over the (B*S, 4H) activations; we give GELU a custom gradient that
XLA compiles into one fused loop (only the backward pass is compiled, so
exported inference graphs need no XLA). Under `jit_compile=True` the whole
step is compiled anyway and this changes nothing.
"""

import math

import keras
import tensorflow as tf

from keras_bert_impl.speed.plain_ops import tracing_plain

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@tf.function(autograph=False, jit_compile=True, reduce_retracing=True)
def _gelu_grad(x, dy):
    """d/dx of x * Phi(x): Phi(x) + x * phi(x)."""
    cdf = 0.5 * (1.0 + tf.math.erf(x * _INV_SQRT_2))
    pdf = _INV_SQRT_2PI * tf.exp(-0.5 * x * x)
    return dy * (cdf + x * pdf)


@tf.function(autograph=False, jit_compile=True, reduce_retracing=True)
def _gelu_tanh_grad(x, dy):
    """d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)."""
    x2 = x * x
    t = tf.tanh(_SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x2))
    du = _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x2)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)


def _gelu_forward(x, approximate):
    """`tf.nn.gelu`; half-precision inputs are computed in float32 and
    rounded once. TensorFlow's CPU kernels evaluate erf/tanh of bfloat16
    element by element: on (4096, 2048) bfloat16 the float32 round trip
    took 19-23 ms against 37-40 ms (2 cores), and is the more exact."""
    if x.dtype in (tf.bfloat16, tf.float16):
        return tf.cast(tf.nn.gelu(tf.cast(x, tf.float32), approximate=approximate), x.dtype)
    return tf.nn.gelu(x, approximate=approximate)


@tf.custom_gradient
def _gelu_exact(x):
    return _gelu_forward(x, approximate=False), lambda dy: _gelu_grad(x, dy)


@tf.custom_gradient
def _gelu_approximate(x):
    return _gelu_forward(x, approximate=True), lambda dy: _gelu_tanh_grad(x, dy)


def _plain_gelu(x):
    """Exact GELU in its erf form: ops every converter takes (`plain_ops`)."""
    return 0.5 * x * (1.0 + tf.math.erf(x * tf.cast(_INV_SQRT_2, x.dtype)))


def gelu(x):
    """Exact GELU, x * Phi(x), as Hugging Face BERT checkpoints compute it."""
    return _plain_gelu(x) if tracing_plain() else _gelu_exact(x)


def gelu_tanh(x):
    """The tanh approximation of GELU that the original TF code computes."""
    return tf.nn.gelu(x, approximate=True) if tracing_plain() else _gelu_approximate(x)


_ACTIVATIONS = {"gelu": gelu, "gelu_tanh": gelu_tanh, "relu": keras.activations.relu}


def get_activation(name):
    """The activation function for a config's `hidden_act` string."""
    if name not in _ACTIVATIONS:
        raise ValueError(
            f"`hidden_act` must be one of {sorted(_ACTIVATIONS)}. "
            f"Received: hidden_act={name!r}."
        )
    return _ACTIVATIONS[name]
