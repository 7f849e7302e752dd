"""The ELMo TFRecord schema (bilm-tf's training batches), defined once for
writer and reader.

bilm-tf trains its biLM on `unroll_steps`-token windows of B independent
streams of sentences (`bilm.data.BidirectionalLMDataset`): row k of batch
t + 1 continues row k of batch t, so the LSTM states carry from batch to
batch with backpropagation truncated at each window boundary. Each stream
exists twice, position for position: forward, every sentence
`<S> w1 .. wn` predicting `w1 .. wn </S>`; and reverse, the same sentence
reversed in place, `</S> wn .. w1` predicting `wn .. w1 <S>` (the backward
LM reads its own stream left to right, so its carried state never holds
the token it must predict). A sentence of n words fills n + 1 positions in
both, so the two streams stay aligned sentence by sentence.

One record is one window of one row, written in the order the model reads
them (batch after batch, row k of each batch in place k), so a reader
batching `batch_size` records in file order gives bilm-tf's batches. A
record holds, per position, the token itself (UTF-8; its characters are
the model's input, computed in `to_model_inputs` so that a word outside
the vocabulary keeps its own spelling), its vocabulary id, the target id
(bilm-tf's `next_token_id`; in the reverse stream `next_token_id_reverse`,
the token before it in the text) and `target_mask` (0 where the stream
has ended: padding, with token "").

The manifest's `"schema"` says `"kind": "elmo"`; the other readers refuse
these records, and the ELMo reader theirs.
"""

import dataclasses
from typing import ClassVar

import tensorflow as tf

from keras_bert_impl.elmo.char_ids import tf_token_char_ids
from keras_bert_impl.elmo.elmo_language_model import INPUT_NAMES
from tf_records.manifest import KindSchema

# B=batch (streams), T=unroll_steps, C=max_characters_per_token

# Feature-name suffix of each direction: bilm-tf's batch keys.
SUFFIX = {"forward": "", "backward": "_reverse"}


@dataclasses.dataclass(frozen=True)
class ElmoRecordSchema(KindSchema):
    """What every ELMo record holds; written into `manifest.json`.

    Args:
        unroll_steps: int. Tokens per window (T; bilm-tf's default 20).
        batch_size: int. Streams the records are interleaved from (B): a
            reader must batch exactly this many records for rows to
            continue their streams.

    Example:

    >>> ElmoRecordSchema(20, 3).to_manifest()
    {'kind': 'elmo', 'unroll_steps': 20, 'batch_size': 3}
    """

    unroll_steps: int = 20
    batch_size: int = 128
    kind: ClassVar[str] = "elmo"

    def __post_init__(self):
        for name in ("unroll_steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"`{name}` must be a positive integer. Received: {name}={value!r}.")

    def feature_spec(self):
        t = self.unroll_steps
        spec = {"target_mask": tf.io.FixedLenFeature([t], tf.int64)}
        for suffix in SUFFIX.values():
            spec[f"tokens{suffix}"] = tf.io.FixedLenFeature([t], tf.string)
            spec[f"token_ids{suffix}"] = tf.io.FixedLenFeature([t], tf.int64)
            spec[f"next_token_id{suffix}"] = tf.io.FixedLenFeature([t], tf.int64)
        return spec


def encode_elmo_example(window):
    """One window of one row -> a serialized `tf.train.Example`.

    Args:
        window: dict of the feature names of `feature_spec` -> length-T
            sequences (str tokens, int ids, 0/1 `target_mask`).
    """
    feature = {}
    for key, values in window.items():
        if key.startswith("tokens"):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[token.encode("utf-8") for token in values]))
        else:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(
                value=[int(v) for v in values]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True)


def to_model_inputs(features, max_characters_per_token=50):
    """Parsed features `(B, T)` -> `(x, y, sample_weight)` for `ElmoLanguageModel.fit`.

    `x = {"char_ids", "char_ids_reverse"}` int32 `(B, T, C)`: the tokens'
    characters (`tf_token_char_ids`), all 0 on padding tokens; `y =
    {"forward": next_token_id, "backward": next_token_id_reverse}` int32
    `(B, T)`; `sample_weight` float32 `(B, T)` for each, `target_mask`.
    """
    mask = tf.cast(features["target_mask"], tf.int32)  # (B, T)
    x, y, weight = {}, {}, {}
    for direction, suffix in SUFFIX.items():
        chars = tf_token_char_ids(features[f"tokens{suffix}"], max_characters_per_token)
        x[INPUT_NAMES[direction]] = chars * mask[:, :, None]  # (B, T, C), 0: padding token
        y[direction] = tf.cast(features[f"next_token_id{suffix}"], tf.int32)  # (B, T)
        weight[direction] = tf.cast(mask, tf.float32)  # (B, T)
    return x, y, weight
