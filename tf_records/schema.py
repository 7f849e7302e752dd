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


def _packed_varint_rows(values):
    """Int array `(N, L)`, values >= 0 -> per row its packed varints (bytes)."""
    values = np.asarray(values, np.int64)
    if values.size and values.min() < 0:
        raise ValueError(f"Negative value {values.min()} cannot be written.")
    if not values.size or values.max() < 0x80:  # one byte each
        return [row.tobytes() for row in values.astype(np.uint8)]
    sizes = np.ones(values.shape, np.int64)
    for bits in (7, 14, 21, 28, 35, 42, 49, 56, 63):
        sizes += values >= (1 << bits)
    width = int(sizes.max())
    septets = (values[..., None] >> (7 * np.arange(width))) & 0x7F  # (N, L, width)
    septets |= (np.arange(width) < sizes[..., None] - 1) * 0x80  # continuation bits
    flat = septets[np.arange(width) < sizes[..., None]].astype(np.uint8).tobytes()
    ends = np.cumsum(sizes.sum(axis=1)).tolist()
    return [flat[start:end] for start, end in zip([0] + ends[:-1], ends)]


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
    (map entries sorted by key; a test compares them), and several times
    faster: building protobuf objects per record was a third of the writer's
    time. Deterministic bytes are what make shards identical whatever the
    number of workers.
    """
    ints, floats = b"\x1a", b"\x12"  # Feature.int64_list / Feature.float_list
    columns = {
        "input_ids": (ints, _packed_varint_rows(input_ids)),
        "input_mask": (ints, _packed_varint_rows(input_mask)),
        "masked_lm_ids": (ints, _packed_varint_rows(label_ids)),
        "masked_lm_positions": (ints, _packed_varint_rows(positions)),
        "masked_lm_weights": (floats, [row.tobytes() for row in np.asarray(weights, "<f4")]),
        "next_sentence_labels": (ints, _packed_varint_rows(np.asarray(next_labels)[:, None])),
        "segment_ids": (ints, _packed_varint_rows(segment_ids)),
    }
    keys = sorted(columns)
    for row in zip(*(columns[key][1] for key in keys)):
        entries = b"".join(
            _entry_head(key, columns[key][0], len(payload)) + payload
            for key, payload in zip(keys, row))
        yield b"\x0a" + _varint_bytes(len(entries)) + entries  # Example.features


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
