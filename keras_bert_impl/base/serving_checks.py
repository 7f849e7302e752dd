"""In-graph checks of every served request, shared by each family's SavedModel.

Keras checks a model's inputs when it can see their values
(`check_sequence_inputs`, `check_xlnet_inputs`, `check_char_ids`); a serving
signature is traced once on symbolic tensors, so those checks see shapes of
`None` and no values. Without the checks here a served model reads word id
-5 as `vocab_size - 5` (`keras.ops.take` wraps negative indices), runs on an
`input_mask` one token shorter than `input_word_ids`, or on a rank-1 request
(a loaded signature does not enforce its declared shapes). Each check is a
TensorFlow op that runs on every request, before the model reads its
inputs; a bad request fails with `tf.errors.InvalidArgumentError` naming
the input and what it may hold:

    input_word_ids: values must be in [0, 30522) (vocab_size); got min -5 max 17
    input_mask: shape [2 7] does not match the shape of input_word_ids [2 8]
    input_word_ids: sequences must be 1 to max_position_embeddings=512 tokens long; got 600
    Shape of tensor input_word_ids [8] is not compatible with expected shape [?,?].

An empty batch passes the checks and returns empty outputs (as an empty
list of texts does); an empty sequence in a batch of some does not pass. The cost is a
min and a max over each int input (`benchmarks/serving_speed.py` measures
it against the same export without checks).

Functions trace under `tf.function(autograph=False)`, as every serving
signature here: plain `tf.debugging.Assert` ops, and the inputs returned
through `tf.identity` under `tf.control_dependencies` so that nothing reads
an input before every check on it has passed.
"""

import contextlib

import tensorflow as tf

# B=batch, S=sequence

# Bounds of one request to a text signature: rows, and UTF-8 bytes of one
# text or token. Without them a 1 MB text took ELMo's serving_text 67 s and
# a 20,000-text request 6.9 GB; a served model must fail such a request
# fast and say why, and a client splits big jobs into requests this size.
MAX_REQUEST_ROWS = 1024
MAX_TEXT_BYTES = 65_536
_BOUNDS = {"max_rows": MAX_REQUEST_ROWS, "max_bytes": MAX_TEXT_BYTES}  # of the export being traced


@contextlib.contextmanager
def request_bounds(max_rows=MAX_REQUEST_ROWS, max_bytes=MAX_TEXT_BYTES):
    """The bounds the text signatures of exports made inside get, e.g.

        with request_bounds(max_rows=64, max_bytes=8192):
            export_saved_model(model, "saved_model", "vocab.txt")

    (they are traced into the graph at export, for every family)."""
    if max_rows < 1 or max_bytes < 1:
        raise ValueError(f"Request bounds must be >= 1. Received: max_rows={max_rows}, "
                         f"max_bytes={max_bytes}.")
    saved = dict(_BOUNDS)
    _BOUNDS.update(max_rows=max_rows, max_bytes=max_bytes)
    try:
        yield
    finally:
        _BOUNDS.update(saved)


def checked_texts(texts, rank=1, max_rows=None, max_bytes=None):
    """`texts` (string tensors) after the checks of a text request.

    Checks: each has `rank` (1: a batch of texts; 2: of token lists) — a
    scalar or a matrix of texts is refused, not read as another number of
    rows; all have the first's number of rows (a pair of texts); at most
    `max_rows` rows; no string longer than `max_bytes` UTF-8 bytes.

    Args:
        texts: dict of name -> string tensor; the first is the reference.
        rank: int.
        max_rows, max_bytes: int or None. The bounds (None: those of
            `request_bounds`, by default `MAX_REQUEST_ROWS`, `MAX_TEXT_BYTES`).

    Returns:
        dict of the same names: the tensors, each read only once every
        check has passed.
    """
    max_rows = _BOUNDS["max_rows"] if max_rows is None else max_rows
    max_bytes = _BOUNDS["max_bytes"] if max_bytes is None else max_bytes
    texts = {name: _ensure_rank(name, value, [None] * rank) for name, value in texts.items()}
    first = next(iter(texts))
    rows = tf.shape(texts[first])[0]
    checks = []
    for name, value in texts.items():
        if name != first:
            checks.append(tf.debugging.Assert(tf.shape(value)[0] == rows, [tf.strings.format(
                f"{name}: {{}} rows, but {first} has {{}}: a pair request needs as many of each",
                [tf.shape(value)[0], rows])]))
        longest = tf.reduce_max(tf.concat([tf.reshape(tf.strings.length(value), [-1]), [0]], 0))
        checks.append(tf.debugging.Assert(longest <= max_bytes, [tf.strings.format(
            f"{name}: a string of {{}} bytes; at most {max_bytes} per string ("
            "serving_checks.request_bounds at export)", [longest])]))
    checks.append(tf.debugging.Assert(rows <= max_rows, [tf.strings.format(
        f"{first}: {{}} rows in one request; at most {max_rows} ("
        "serving_checks.request_bounds at export): send them in several requests",
        [rows])]))
    return _after(checks, texts)


def checked_ids(inputs, shape, limits, max_length=None, max_length_name=None, length_axis=-1):
    """`inputs` (int tensors of one shape) after the checks of a request.

    Checks: every input has `shape`'s rank and fixed sizes; all have the
    shape of the first (named in the message); each input in `limits` lies
    in `[0, bound)`; the sequence axis holds 1 to `max_length` entries (0
    too in an empty batch).

    Args:
        inputs: dict of name -> int tensor; the first is the reference.
        shape: list of int or None. The shape every input must have (None:
            any size), e.g. `[None, None]` for `(B, S)`.
        limits: dict of name -> `(bound, what)`: values must lie in
            `[0, bound)`; `what` (str) says where the bound comes from, e.g.
            `"vocab_size"`.
        max_length: int or None. Most entries along `length_axis` (None: no
            limit, at least 1 all the same).
        max_length_name: str. The config field holding `max_length`.
        length_axis: int. The sequence axis.

    Returns:
        dict of the same names: the tensors, each read only once every
        check has passed.

    Example:
    >>> ids = checked_ids({"input_word_ids": word_ids, "input_mask": mask},
    ...                   [None, None], {"input_word_ids": (30522, "vocab_size"),
    ...                                  "input_mask": (2, "0 or 1")},
    ...                   512, "max_position_embeddings")
    """
    inputs = {name: _ensure_rank(name, value, shape) for name, value in inputs.items()}
    first = next(iter(inputs))
    reference = tf.shape(inputs[first])
    checks = [_shape_check(name, value, reference, f"the shape of {first}")
              for name, value in inputs.items() if name != first]
    checks += [_range_check(name, inputs[name], bound, what)
               for name, (bound, what) in limits.items()]
    checks.append(_length_check(first, reference[0], reference[length_axis], max_length,
                                max_length_name))
    return _after(checks, inputs)


def checked_positions(positions, ids, name="masked_lm_positions", ids_name="input_word_ids"):
    """`positions` `(B, P)` after checking they index the rows of `ids` `(B, S)`:
    the same batch, values in `[0, S)`."""
    positions = _ensure_rank(name, positions, [None, None])
    ids_shape = tf.shape(ids)  # (2,): B, S
    expected = tf.stack([ids_shape[0], -1])
    checks = [_shape_check(name, positions, expected, f"(batch of {ids_name}, any)"),
              _range_check(name, positions, ids_shape[1], f"the sequence length of {ids_name}")]
    return _after(checks, {name: positions})[name]


def checked_shape(value, name, expected, what):
    """`value` after checking its shape is `expected`.

    Args:
        value: tensor.
        name: str. The input's name, for the message.
        expected: int32 `(R,)` tensor: the shape, -1 where any size goes.
        what: str. Where `expected` comes from, for the message, e.g.
            `"(batch, length, length) of input_word_ids"`.
    """
    value = _ensure_rank(name, value, [None] * int(expected.shape[0]))
    return _after([_shape_check(name, value, expected, what)], {name: value})[name]


def checked_zero_one(value, name, one_per_row=False):
    """`value` after checking every entry is 0 or 1 (XLNet's `perm_mask`,
    1 = may not attend) and, with `one_per_row`, that each row along the
    last axis holds at most one 1 (`target_mapping`: a one-hot position, or
    an unused all-zero slot).

    A mask of other values would scale attention logits or mix positions'
    outputs without an error; this names the input and what it held.
    """
    ones_or_zeros = tf.reduce_all((value == 0) | (value == 1))
    checks = [tf.debugging.Assert(ones_or_zeros, [tf.strings.format(
        f"{name}: values must be 0 or 1; got min {{}} max {{}}",
        [tf.reduce_min(value), tf.reduce_max(value)])])]
    if one_per_row:
        most = tf.reduce_max(tf.reduce_sum(value, axis=-1))  # empty: -inf, passes
        checks.append(tf.debugging.Assert(most <= 1, [tf.strings.format(
            f"{name}: each row must be one-hot or all zeros; a row holds {{}} ones", [most])]))
    return _after(checks, {name: value})[name]


def _ensure_rank(name, value, shape):
    # `tf.ensure_shape` stays in the served graph: a loaded signature passes
    # a tensor of any rank through, and Grappler folds `tf.rank` of an input
    # to the rank the signature declares, so an `Assert` on it never fires.
    return tf.ensure_shape(value, shape, name=f"{name}_shape")


def _shape_check(name, value, expected, what):
    shape = tf.shape(value)
    ok = tf.reduce_all((shape == expected) | (expected < 0))
    return tf.debugging.Assert(ok, [tf.strings.format(
        f"{name}: shape {{}} does not match {what} {{}}", [shape, expected])])


def _range_check(name, value, bound, what):
    low, high = tf.reduce_min(value), tf.reduce_max(value)  # empty: int max, int min: passes
    ok = (low >= 0) & (high < tf.cast(bound, value.dtype))
    return tf.debugging.Assert(ok, [tf.strings.format(
        f"{name}: values must be in [0, {{}}) ({what}); got min {{}} max {{}}",
        [bound, low, high])])


def _length_check(name, batch, length, max_length, max_length_name):
    some = (length >= 1) | (batch == 0)  # an empty batch may hold empty sequences
    if max_length is None:
        return tf.debugging.Assert(some, [tf.strings.format(
            f"{name}: sequences must hold at least 1 token; got length {{}}", [length])])
    ok = some & (length <= max_length)
    return tf.debugging.Assert(ok, [tf.strings.format(
        f"{name}: sequences must be 1 to {max_length_name}={max_length} tokens long; "
        "got {}", [length])])


def _after(checks, tensors):
    with tf.control_dependencies(checks):
        return {name: tf.identity(value) for name, value in tensors.items()}
