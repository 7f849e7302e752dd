"""The pretraining TFRecord schema, defined once for writer and reader.

Feature names are the original `create_pretraining_data.py`'s, so records it
wrote are read as they are. `to_model_inputs` is the one mapping from those
names to the model's (`input_ids` -> `input_word_ids`, `segment_ids` ->
`input_type_ids`).

TensorFlow is imported inside the two functions that use it, so the
writer's coordinating process, which only needs the encoder, never loads
it: its worker processes start ~3 s sooner (measured).
"""

import dataclasses
import functools
import hashlib

import numpy as np

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1


@dataclasses.dataclass(frozen=True)
class RecordSchema:
    """What every record of a dataset holds; written into `manifest.json`.

    Args:
        max_seq_length: int. Tokens per example (padded).
        max_predictions_per_seq: int. Masked positions per example (padded).
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20

    def feature_spec(self):
        import tensorflow as tf  # here, not at the top: see the module docstring

        s, p = self.max_seq_length, self.max_predictions_per_seq
        return {
            "input_ids": tf.io.FixedLenFeature([s], tf.int64),
            "input_mask": tf.io.FixedLenFeature([s], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([s], tf.int64),
            "masked_lm_positions": tf.io.FixedLenFeature([p], tf.int64),
            "masked_lm_ids": tf.io.FixedLenFeature([p], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([p], tf.float32),
            "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
        }


def file_sha256(path):
    """Hex sha256 of a file, as the manifest records each shard's."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _varint_bytes(value):
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag, payload):
    """A length-delimited protobuf field: tag byte, varint length, payload."""
    return tag + _varint_bytes(len(payload)) + payload


def _varints(values):
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


def _row_bytes(pieces):
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


def _heads(key, feature_tag, payload_lengths):
    """Per row, the bytes before its payload (`_entry_head`), as `_concat_rows` takes."""
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
    inner = _varint_bytes(payload_length)  # list.value (packed): tag 0x0a
    list_length = 1 + len(inner) + payload_length
    feature_length = 1 + len(_varint_bytes(list_length)) + list_length
    key_field = _field(b"\x0a", key.encode())
    entry_length = len(key_field) + 1 + len(_varint_bytes(feature_length)) + feature_length
    return (b"\x0a" + _varint_bytes(entry_length) + key_field
            + b"\x12" + _varint_bytes(feature_length)
            + feature_tag + _varint_bytes(list_length) + b"\x0a" + inner)


def encode_examples(input_ids, input_mask, segment_ids, positions, label_ids, weights,
                    next_labels):
    """Yields serialized pretraining `tf.train.Example`s, one per row.

    Args: int arrays `(N, S)` and `(N, P)` (already padded), float `weights`
    `(N, P)`, `next_labels` `(N,)`; values >= 0.

    Byte-identical to `tf.train.Example(...).SerializeToString(deterministic=True)`
    (map entries sorted by key; a test compares them), built for the whole
    block at once in numpy: building protobuf objects per record was a third
    of the writer's time. Deterministic bytes are what make shards
    identical whatever the number of workers.
    """
    n = len(next_labels)
    weight_bytes = np.asarray(weights, "<f4").reshape(n, -1)
    columns = {  # sorted by key, as deterministic serialization orders the map
        "input_ids": (b"\x1a", _varints(input_ids)),  # Feature.int64_list
        "input_mask": (b"\x1a", _varints(input_mask)),
        "masked_lm_ids": (b"\x1a", _varints(label_ids)),
        "masked_lm_positions": (b"\x1a", _varints(positions)),
        "masked_lm_weights": (b"\x12", (weight_bytes.view(np.uint8).ravel(),  # float_list
                                        np.full(n, weight_bytes.shape[1] * 4, np.int64))),
        "next_sentence_labels": (b"\x1a", _varints(np.asarray(next_labels)[:, None])),
        "segment_ids": (b"\x1a", _varints(segment_ids)),
    }
    pieces = []
    for key in sorted(columns):
        tag, payload = columns[key]
        pieces += [_heads(key, tag, payload[1]), payload]
    sizes = sum(lengths for _, lengths in pieces)  # bytes of each row's map entries
    prefix = {size: b"\x0a" + _varint_bytes(size) for size in np.unique(sizes).tolist()}
    for size, parts in zip(sizes.tolist(), zip(*_row_bytes(pieces))):
        yield prefix[size] + b"".join(parts)  # Example.features: tag, length, entries


def to_model_inputs(features):
    """Parsed features -> `(x, y, sample_weight)` for `BertPretrainer.fit`.

    int64 is cast to int32 (what the model and TPUs take).
    """
    import tensorflow as tf  # here, not at the top: see the module docstring

    def i32(name):
        return tf.cast(features[name], tf.int32)

    x = {
        "input_word_ids": i32("input_ids"),
        "input_mask": i32("input_mask"),
        "input_type_ids": i32("segment_ids"),
        "masked_lm_positions": i32("masked_lm_positions"),
    }
    next_sentence = i32("next_sentence_labels")[..., 0]
    y = {"masked_lm": i32("masked_lm_ids"), "next_sentence": next_sentence}
    sample_weight = {
        "masked_lm": features["masked_lm_weights"],
        "next_sentence": tf.ones_like(next_sentence, tf.float32),
    }
    return x, y, sample_weight
