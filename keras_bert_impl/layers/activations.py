"""The `hidden_act` functions a BERT config may name."""

import keras


def gelu(x):
    """Exact GELU, x * Phi(x), as Hugging Face BERT checkpoints compute it."""
    return keras.activations.gelu(x, approximate=False)


def gelu_tanh(x):
    """The tanh approximation of GELU that the original TF code computes."""
    return keras.activations.gelu(x, approximate=True)


_ACTIVATIONS = {"gelu": gelu, "gelu_tanh": gelu_tanh, "relu": keras.activations.relu}


def get_activation(name):
    """The activation function for a config's `hidden_act` string."""
    if name not in _ACTIVATIONS:
        raise ValueError(
            f"`hidden_act` must be one of {sorted(_ACTIVATIONS)}. "
            f"Received: hidden_act={name!r}."
        )
    return _ACTIVATIONS[name]
