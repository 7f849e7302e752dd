"""The pretraining TFRecord schema, defined once for writer and reader.

Feature names are the original `create_pretraining_data.py`'s, so records it
wrote are read as they are. `to_model_inputs` is the one mapping from those
names to the model's (`input_ids` -> `input_word_ids`, `segment_ids` ->
`input_type_ids`).
"""

import dataclasses
import hashlib

import tensorflow as tf

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


def encode_example(input_ids, input_mask, segment_ids, positions, label_ids, weights, next_label):
    """One `tf.train.Example`, already padded, as serialized bytes."""

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    features = {
        "input_ids": ints(input_ids),
        "input_mask": ints(input_mask),
        "segment_ids": ints(segment_ids),
        "masked_lm_positions": ints(positions),
        "masked_lm_ids": ints(label_ids),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=list(weights))),
        "next_sentence_labels": ints([next_label]),
    }
    example = tf.train.Example(features=tf.train.Features(feature=features))
    # deterministic: protobuf map order otherwise varies between processes,
    # and shards must be byte-identical whatever the number of workers.
    return example.SerializeToString(deterministic=True)


def to_model_inputs(features):
    """Parsed features -> `(x, y, sample_weight)` for `BertPretrainer.fit`.

    int64 is cast to int32 (what the model and TPUs take).
    """

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
