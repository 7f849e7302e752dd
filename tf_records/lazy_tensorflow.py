"""TensorFlow for the schemas, imported at the first call that needs it.

The BERT, GPT and XLNet schemas (`bert/schema.py`, `gpt/schema.py`,
`xlnet/schema.py`) hold both the writers' encoders (numpy, no TensorFlow)
and the readers' feature specs and model-input mappings (TensorFlow). The
writers' processes import the schemas and never TensorFlow: the BERT
writer's worker processes start ~3 s sooner (measured). So the schemas'
TensorFlow functions take it from `tensorflow()` when they run.
"""


def tensorflow():
    """The `tensorflow` module, imported on the first call."""
    # lazy: a writer's processes import the schemas and no TensorFlow (see the module docstring)
    import tensorflow as tf

    return tf
