"""The language-model TFRecord schema (GPT's pretraining), defined once for
writer and reader.

GPT (Radford et al. 2018) pretrains on contiguous text: every record is one
window of `max_seq_length + 1` consecutive token ids, so that the model
reads the first `max_seq_length` and predicts the last `max_seq_length`
(each position the next token). Only the very last window of the stream can
be short; its tail is padding, 0 in `input_mask`.

The manifest's `"schema"` says `"kind": "lm"`; BERT's manifests name no
kind (they are "bert"), and each reader refuses the other's records.

As in BERT's `bert/schema.py`, TensorFlow is imported only when the functions that
use it run (`tf_records.lazy_tensorflow`), so the writer's encoding needs none.
"""

import dataclasses
from typing import ClassVar

from tf_records.example_bytes import examples
from tf_records.example_bytes import heads
from tf_records.example_bytes import varints
from tf_records.lazy_tensorflow import tensorflow
from tf_records.manifest import KindSchema

# B=batch, S=max_seq_length (tokens the model reads), W=S+1 (tokens a record holds)


@dataclasses.dataclass(frozen=True)
class LmRecordSchema(KindSchema):
    """What every language-model record holds; written into `manifest.json`.

    Args:
        max_seq_length: int. Tokens the model reads per example (S); a
            record holds S + 1 (inputs and, shifted by one, targets).

    Example:

    >>> LmRecordSchema(7).to_manifest()
    {'kind': 'lm', 'max_seq_length': 7}
    """

    max_seq_length: int = 512
    kind: ClassVar[str] = "lm"

    def __post_init__(self):
        value = self.max_seq_length
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"`max_seq_length` must be a positive integer. Received: max_seq_length={value!r}.")

    @property
    def window_length(self):
        """Token ids per record: S + 1."""
        return self.max_seq_length + 1

    def feature_spec(self):
        tf = tensorflow()
        w = self.window_length
        return {
            "input_ids": tf.io.FixedLenFeature([w], tf.int64),
            "input_mask": tf.io.FixedLenFeature([w], tf.int64),
        }


def encode_lm_examples(input_ids, input_mask):
    """Yields serialized language-model `tf.train.Example`s, one per row.

    Args: int arrays `(N, W)`, values >= 0.

    Byte-identical to `tf.train.Example(...).SerializeToString(deterministic=True)`
    (a test compares them), built for the whole block at once with
    `example_bytes.py`'s numpy encoder helpers.
    """
    if not len(input_ids):
        return
    pieces = []
    for key, values in (("input_ids", input_ids), ("input_mask", input_mask)):  # sorted by key
        payload = varints(values)
        pieces += [heads(key, b"\x1a", payload[1]), payload]  # Feature.int64_list
    yield from examples(pieces)


def to_model_inputs(features):
    """Parsed features `(B, W)` -> `(x, y, sample_weight)` for a causal LM's `fit`.

    `x` is the window without its last token, `y` without its first: the
    target at position t is token t + 1, weighted by whether it is real.
    int64 is cast to int32 (what the model and TPUs take).
    """
    tf = tensorflow()
    ids = tf.cast(features["input_ids"], tf.int32)  # (B, W)
    mask = tf.cast(features["input_mask"], tf.int32)  # (B, W)
    x = {"input_word_ids": ids[:, :-1], "input_mask": mask[:, :-1]}  # (B, S) each
    y = {"lm": ids[:, 1:]}  # (B, S)
    sample_weight = {"lm": tf.cast(mask[:, 1:], tf.float32)}  # (B, S)
    return x, y, sample_weight
