"""`ElmoSoftmax`: the biLM's softmax over the word vocabulary (bilm-tf's `softmax/W`, `b`)."""

import keras
import numpy as np
import tensorflow as tf  # sampled softmax is TensorFlow's

from keras_bert_impl.base.layer_config import NamedConfig

# B=batch, T=tokens, P=projection, V=vocabulary, N=B*T, K=negative samples


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ElmoSoftmax(NamedConfig, keras.layers.Layer):
    """Next-word scores `h W^T + b` from a biLM direction's top output.

    Peters et al. 2018, Sec. 3.1: one softmax shared by the forward and
    the backward LM (bilm-tf's `softmax/W` `(V, P)` and `softmax/b` `(V,)`,
    here `kernel` and `bias`; W starts N(0, 1/P), b at 0, as bilm-tf's).
    Training on a large vocabulary samples it instead
    (`token_losses(..., n_negative_samples=K)`: TensorFlow's
    `sampled_softmax_loss` with its log-uniform sampler, which assumes ids
    sorted by falling frequency, as bilm-tf's vocabularies are). Runs in
    float32 whatever the dtype policy.

    Args:
        vocab_size: int. V.

    Call arguments:
        hidden: float `(..., P)`.

    Returns:
        float32 logits `(..., V)`.

    Example:
    >>> softmax = ElmoSoftmax(99)
    >>> softmax(np.ones((3, 7, 12), "float32")).shape
    TensorShape([3, 7, 99])
    """

    config_names = ("vocab_size",)

    def __init__(self, vocab_size, **kwargs):
        kwargs.setdefault("dtype", "float32")  # the loss is numerically sensitive
        super().__init__(**kwargs)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(
                f"`vocab_size` must be an integer >= 2. Received: vocab_size={vocab_size!r}.")
        self.vocab_size = vocab_size

    def build(self, hidden_shape):
        width = hidden_shape[-1]
        self.kernel = self.add_weight(
            name="kernel", shape=(self.vocab_size, width),
            initializer=keras.initializers.RandomNormal(stddev=1.0 / np.sqrt(width)))
        self.bias = self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, hidden):
        hidden = keras.ops.cast(hidden, self.compute_dtype)
        leading = keras.ops.shape(hidden)[:-1]
        flat = keras.ops.reshape(hidden, (-1, hidden.shape[-1]))  # (N, P)
        # A 2-D matmul: einsum("...p,vp->...v") trains ~30x slower on CPU (measured).
        logits = keras.ops.matmul(flat, keras.ops.transpose(self.kernel)) + self.bias  # (N, V)
        return keras.ops.reshape(logits, (*leading, self.vocab_size))  # (..., V)

    def token_losses(self, hidden, labels, n_negative_samples=0):
        """Cross-entropy of each target `(B, T)` float32.

        Args:
            hidden: float `(B, T, P)`.
            labels: int `(B, T)` target ids in [0, V).
            n_negative_samples: int. 0: the full softmax; K > 0: K
                negatives sampled for the whole batch (K < V), an estimate
                for training only.
        """
        if not n_negative_samples:
            logits = self(hidden)  # (B, T, V)
            return keras.ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        shape = tf.shape(labels)
        flat = tf.reshape(tf.cast(hidden, self.compute_dtype), [-1, self.kernel.shape[1]])  # (N, P)
        losses = tf.nn.sampled_softmax_loss(
            weights=self.kernel.value, biases=self.bias.value,
            labels=tf.reshape(tf.cast(labels, tf.int64), [-1, 1]),  # (N, 1)
            inputs=flat, num_sampled=n_negative_samples, num_classes=self.vocab_size)  # (N,)
        return tf.reshape(losses, shape)  # (B, T)

    def compute_output_shape(self, hidden_shape):
        return (*hidden_shape[:-1], self.vocab_size)
