"""`tf.train.Example` bytes built in numpy, without TensorFlow.

The protobuf encoding every family's `encode_*` functions build a block of
records with: varints, length-delimited fields, the head of a feature map
entry, and per-row byte strings glued from column pieces. Each family's
schema lays out its own features with these.
"""

import functools

import numpy as np


def varint_bytes(value):
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag, payload):
    """A length-delimited protobuf field: tag byte, varint length, payload."""
    return tag + varint_bytes(len(payload)) + payload


def varints(values):
    """Int array `(N, L)`, values >= 0 -> (packed varint bytes of all rows,
    flat uint8 in row order; bytes per row `(N,)`)."""
    values = np.asarray(values, np.int64)
    n = values.shape[0]
    if not values.size:
        return np.zeros(0, np.uint8), np.zeros(n, np.int64)
    if values.min() < 0:
        raise ValueError(f"Negative value {values.min()} cannot be written.")
    if values.max() < 0x80:  # one byte each
        return values.astype(np.uint8).ravel(), np.full(n, values.shape[1], np.int64)
    # Small values (ids, positions): each distinct value's varint once, in
    # a table, then one gather, much cheaper than shifting every element.
    small = values.max() < (1 << 21)
    table_values = np.arange(int(values.max()) + 1, dtype=np.int64) if small else values
    sizes = np.ones(table_values.shape, np.int64)
    for bits in (7, 14, 21, 28, 35, 42, 49, 56, 63):
        sizes += table_values >= (1 << bits)
    width = int(sizes.max())
    septets = (table_values[..., None] >> (7 * np.arange(width))) & 0x7F
    septets |= (np.arange(width) < sizes[..., None] - 1) * 0x80  # continuation bits
    if small:
        septets, sizes = septets.astype(np.uint8)[values], sizes[values]  # (N, L, width)
    flat = septets[np.arange(width) < sizes[..., None]].astype(np.uint8)
    return flat, sizes.sum(axis=1)


def row_bytes(pieces):
    """[(flat uint8, bytes per row `(N,)`), ...] -> per row, its pieces in
    order, as a list of `bytes` per run: consecutive pieces of one length
    for every row are glued in numpy (one `tobytes` per row for the run)."""
    columns, run = [], []

    def flush():
        if run:
            columns.append([row.tobytes() for row in np.concatenate(run, axis=1)])
            run.clear()

    for flat, lengths in pieces:
        if len(lengths) and (lengths == lengths[0]).all():
            run.append(flat.reshape(len(lengths), int(lengths[0])))
        else:
            flush()
            data = flat.tobytes()
            ends = np.cumsum(lengths).tolist()
            columns.append([data[a:b] for a, b in zip([0, *ends[:-1]], ends)])
    flush()
    return columns


def heads(key, feature_tag, payload_lengths):
    """Per row, the bytes before its payload (`_entry_head`), as `row_bytes` takes."""
    unique, inverse = np.unique(payload_lengths, return_inverse=True)
    heads = [_entry_head(key, feature_tag, int(length)) for length in unique]
    width = max(len(h) for h in heads)
    table = np.zeros((len(heads), width), np.uint8)
    for i, head in enumerate(heads):
        table[i, :len(head)] = np.frombuffer(head, np.uint8)
    head_lengths = np.array([len(h) for h in heads], np.int64)[inverse]
    return table[inverse][np.arange(width) < head_lengths[:, None]], head_lengths


@functools.cache
def _entry_head(key, feature_tag, payload_length):
    """Bytes before a packed payload: the map entry of `key` down to the list."""
    inner = varint_bytes(payload_length)  # list.value (packed): tag 0x0a
    list_length = 1 + len(inner) + payload_length
    feature_length = 1 + len(varint_bytes(list_length)) + list_length
    key_field = _field(b"\x0a", key.encode())
    entry_length = len(key_field) + 1 + len(varint_bytes(feature_length)) + feature_length
    return (b"\x0a" + varint_bytes(entry_length) + key_field
            + b"\x12" + varint_bytes(feature_length)
            + feature_tag + varint_bytes(list_length) + b"\x0a" + inner)


def examples(pieces):
    """Yields each row's serialized `tf.train.Example` from its map entries'
    column pieces (`heads` and payloads, in key order): the `features` field
    (tag, length) and the row's entries."""
    sizes = sum(lengths for _, lengths in pieces)  # bytes of each row's map entries
    prefix = {size: b"\x0a" + varint_bytes(size) for size in np.unique(sizes).tolist()}
    for size, parts in zip(sizes.tolist(), zip(*row_bytes(pieces))):
        yield prefix[size] + b"".join(parts)  # Example.features: tag, length, entries
