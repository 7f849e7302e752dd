"""`check_sequence_inputs`: every family's checks of `(B, S)` integer
inputs, with messages naming the input, the bound and where it comes from
(BERT's `check_inputs`, GPT's and XLNet's backbones call it); and
`check_fits_positions`, the one check of a length (a flag's, the records')
against a config's positions."""

import keras
import numpy as np


def check_fits_positions(length, config, subject, owner="the model", source=""):
    """`ValueError` when `length` tokens are more than `config` has
    positions for: its `max_length` (BERT's max_position_embeddings, GPT's
    n_positions; None for any length, as XLNet's relative positions take).

    The message names both values and the config's key: "`subject`=128
    exceeds `owner`'s max_position_embeddings=64 (`source`)." `subject`:
    what holds the length ("--max_seq_length", "The data's max_seq_length");
    `owner`: where the config comes from; `source`: said after, if given.
    """
    limit = getattr(config, "max_length", None)
    if limit is not None and length > limit:
        where = f" ({source})" if source else ""
        raise ValueError(f"{subject}={length} exceeds {owner}'s {config.MAX_LENGTH_FIELD}="
                         f"{limit}{where}.")


def check_sequence_inputs(inputs, names, max_length, max_length_name, limits,
                          extra_names=(), family="BERT"):
    """The checks of `check_inputs` for any family's `(B, S)` int inputs.

    Args:
        inputs: dict of the model's inputs.
        names: the `(B, S)` int inputs every call must have.
        max_length: int. Longest sequence accepted.
        max_length_name: str. The config field holding it, for the message.
        limits: list of `(name, upper bound, what the bound is)`: concrete
            values must lie in `[0, bound)`.
        extra_names: further inputs allowed (and required).
        family: str. The model family, for the messages.
    """
    _check_keys(inputs, names, extra_names, family)
    seq_length = _common_shape(inputs, names, family)[1]
    if seq_length is not None and seq_length > max_length:
        raise ValueError(
            f"Sequence length {seq_length} is longer than {max_length_name}="
            f"{max_length}. Truncate the inputs."
        )
    limits = list(limits)
    if "masked_lm_positions" in inputs and seq_length is not None:
        limits.append(("masked_lm_positions", seq_length, "the sequence length"))
    for name, limit, what in limits:
        _check_range(inputs[name], name, limit, what)


def _check_keys(inputs, names, extra_names, family):
    """`ValueError` unless `inputs` is a dict of exactly `names` and `extra_names`."""
    if not isinstance(inputs, dict):
        raise ValueError(
            f"{family} inputs must be a dict with keys {list(tuple(names) + tuple(extra_names))}. "
            f"Received: {type(inputs).__name__}."
        )
    expected = set(names) | set(extra_names)
    missing = sorted(expected - set(inputs))
    unknown = sorted(set(inputs) - expected)
    if missing or unknown:
        raise ValueError(
            f"{family} inputs must have keys {sorted(expected)}. "
            f"Missing: {missing}. Unexpected: {unknown}."
        )


def _common_shape(inputs, names, family):
    """The `(B, S)` shape of the `names` inputs, after checking each is an
    integer tensor of rank 2 and all agree where their sizes are known."""
    shape = None
    for name in names:
        value = inputs[name]
        dtype = keras.backend.standardize_dtype(value.dtype)
        if "int" not in dtype:
            raise ValueError(
                f"`{name}` must be an integer tensor (int32). Received dtype={dtype}."
            )
        value_shape = tuple(value.shape)
        if len(value_shape) != 2:
            raise ValueError(
                f"`{name}` must have rank 2, shape (batch, seq_length). "
                f"Received shape={value_shape}."
            )
        if shape is None:
            shape = value_shape
        elif any(a is not None and b is not None and a != b for a, b in zip(shape, value_shape)):
            raise ValueError(
                f"All {family} inputs must have the same shape. "
                f"Received `{names[0]}` {shape} and `{name}` {value_shape}."
            )
    return shape


def _check_range(value, name, limit, what):
    """`ValueError` when a concrete `value` holds a number outside `[0, limit)`
    (`what`: where the bound comes from); a symbolic one passes."""
    values = _concrete(value)
    if values is not None and values.size:
        low, high = values.min(), values.max()
        if low < 0 or high >= limit:
            bad = low if low < 0 else high
            raise ValueError(
                f"`{name}` holds {bad}, outside [0, {limit}) where the upper "
                f"bound is {what}."
            )


def _concrete(value):
    """The numpy value of an eager tensor or array, else None (symbolic)."""
    if isinstance(value, np.ndarray):
        return value
    try:
        return value.numpy()
    except (AttributeError, NotImplementedError, ValueError, TypeError):
        return None
