"""BERT's pretraining TFRecord schema, defined once for writer and reader.

Feature names are the original `create_pretraining_data.py`'s, so records it
wrote are read as they are. `to_model_inputs` is the one mapping from those
names to the model's (`input_ids` -> `input_word_ids`, `segment_ids` ->
`input_type_ids`).

TensorFlow is imported when the two functions that use it run
(`tf_records.lazy_tensorflow`), so the writer's coordinating process, which
only needs the encoder, never loads it: its worker processes start ~3 s
sooner (measured).
"""

import dataclasses

import numpy as np

from tf_records.example_bytes import examples
from tf_records.example_bytes import heads
from tf_records.example_bytes import varints
from tf_records.lazy_tensorflow import tensorflow


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
        tf = tensorflow()
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
        "input_ids": (b"\x1a", varints(input_ids)),  # Feature.int64_list
        "input_mask": (b"\x1a", varints(input_mask)),
        "masked_lm_ids": (b"\x1a", varints(label_ids)),
        "masked_lm_positions": (b"\x1a", varints(positions)),
        "masked_lm_weights": (b"\x12", (weight_bytes.view(np.uint8).ravel(),  # float_list
                                        np.full(n, weight_bytes.shape[1] * 4, np.int64))),
        "next_sentence_labels": (b"\x1a", varints(np.asarray(next_labels)[:, None])),
        "segment_ids": (b"\x1a", varints(segment_ids)),
    }
    pieces = []
    for key in sorted(columns):
        tag, payload = columns[key]
        pieces += [heads(key, tag, payload[1]), payload]
    yield from examples(pieces)


def to_model_inputs(features):
    """Parsed features -> `(x, y, sample_weight)` for `BertPretrainer.fit`.

    int64 is cast to int32 (what the model and TPUs take).
    """
    tf = tensorflow()
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
