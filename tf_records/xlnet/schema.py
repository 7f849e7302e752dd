"""The XLNet TFRecord schema (permutation-LM pretraining), defined once for
writer and reader.

XLNet (Yang et al. 2019) pretrains on B streams of text, as Transformer-XL:
row k of batch t + 1 continues row k of batch t, so the memory a layer
caches from batch t precedes what it reads at t + 1. Every record is the
original `data_utils.py`'s, feature for feature, so records written by
either writer are read by either reader:

- `input` (L): `reuse_len` tokens of the row's stream, then
  `A <sep> B <sep> <cls>`. The next record of the row starts `reuse_len`
  tokens later, where A began: the first `reuse_len` tokens are what the
  model caches as memory.
- `seg_id` (L): 0 for the reuse part, A and its `<sep>`; 1 for B and its
  `<sep>`; 2 for `<cls>`.
- `target` (L): the token after each input token in the text (the original
  stores next tokens; the reader shifts them back, so a predicted token's
  target is itself).
- `is_masked` (L): the positions to predict, `num_predict` of them:
  `ceil(num_predict / 2)` in the reuse part, the rest in `A <sep> B <sep> <cls>`.
- `label` (1): 1 if B continues A in the text, 0 if B was drawn from
  elsewhere (XLNet's loss ignores it; kept as the original keeps it).

The manifest's `"schema"` says `"kind": "xlnet"`; the other readers refuse
these records, and the XLNet reader theirs.

TensorFlow is imported only when the functions that use it run
(`tf_records.lazy_tensorflow`), so the writer's encoding needs none.
"""

import dataclasses
from typing import ClassVar

from tf_records.example_bytes import examples
from tf_records.example_bytes import heads
from tf_records.example_bytes import varints
from tf_records.lazy_tensorflow import tensorflow
from tf_records.manifest import KindSchema

# B=batch (streams), L=seq_len, R=reuse_len, P=num_predict

FEATURE_NAMES = ("input", "is_masked", "label", "seg_id", "target")  # sorted, as serialized
SEGMENT_A, SEGMENT_B, SEGMENT_CLS = 0, 1, 2  # the original's seg_id values


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}.")


@dataclasses.dataclass(frozen=True)
class XLNetRecordSchema(KindSchema):
    """What every XLNet record holds; written into `manifest.json`.

    The defaults are for CPU-scale pretraining; XLNet-Large used
    seq_len 512, reuse_len 256, num_predict 85, bi_data True.

    Args:
        seq_len: int. Tokens per record (L).
        reuse_len: int. Tokens at the start of a record that the next record
            of its row follows on from (R; the memory the model caches).
            Must leave room for A, B, two `<sep>` and `<cls>`: R < L - 3.
        batch_size: int. Streams the records are interleaved from (B): a
            reader must batch exactly this many records for rows to
            continue their streams.
        num_predict: int. Positions to predict per record (P): `ceil(P / 2)`
            among the R reuse tokens, `P // 2` among the other L - R.
        mask_alpha: int. Span-masking context: a span of n tokens is chosen
            in a context of `n * mask_alpha // mask_beta` tokens.
        mask_beta: int. See `mask_alpha` (about `mask_beta` of every
            `mask_alpha` context tokens are predicted).
        bi_data: bool. Half of each replica's rows read their stream
            backwards (the original's `bi_data`; the model negates those
            rows' relative positions).
        num_cores: int. Replicas the batch is split between (the original's
            `num_core_per_host`): with `bi_data`, each replica's first half
            of rows is forward and its second half the same streams reversed.
        sep_id: int. The `<sep>` id (XLNet's SentencePiece: 4).
        cls_id: int. The `<cls>` id (XLNet's SentencePiece: 3).

    Example:

    >>> schema = XLNetRecordSchema(seq_len=16, reuse_len=8, batch_size=3, num_predict=3)
    >>> schema.num_predict_reuse, schema.num_predict_rest
    (2, 1)
    """

    seq_len: int = 128
    reuse_len: int = 64
    batch_size: int = 32
    num_predict: int = 21
    mask_alpha: int = 6
    mask_beta: int = 1
    bi_data: bool = False
    num_cores: int = 1
    sep_id: int = 4
    cls_id: int = 3
    kind: ClassVar[str] = "xlnet"

    def __post_init__(self):
        for name in ("seq_len", "reuse_len", "batch_size", "num_predict", "mask_alpha",
                     "mask_beta", "num_cores"):
            _positive_int(name, getattr(self, name))
        if self.seq_len <= self.reuse_len + 3:
            raise ValueError(
                "`seq_len` must exceed `reuse_len + 3` (room for A, B, two <sep> and <cls>). "
                f"Received: seq_len={self.seq_len}, reuse_len={self.reuse_len}.")
        if self.num_predict_reuse > self.reuse_len or (
                self.num_predict_rest > self.seq_len - self.reuse_len):
            raise ValueError(
                f"`num_predict` puts ceil(num_predict / 2)={self.num_predict_reuse} targets among "
                f"the reuse_len={self.reuse_len} reuse tokens and {self.num_predict_rest} among "
                f"the other {self.seq_len - self.reuse_len}: too many. Received: "
                f"num_predict={self.num_predict}.")
        if self.mask_alpha < self.mask_beta:
            raise ValueError(
                "`mask_alpha` must be at least `mask_beta` (a span's context holds the span). "
                f"Received: mask_alpha={self.mask_alpha}, mask_beta={self.mask_beta}.")
        if not isinstance(self.bi_data, bool):
            raise ValueError(f"`bi_data` must be a bool. Received: bi_data={self.bi_data!r}.")
        rows_per_core = 2 * self.num_cores if self.bi_data else self.num_cores
        if self.batch_size % rows_per_core:
            raise ValueError(
                f"`batch_size` must be a multiple of {rows_per_core} (num_cores={self.num_cores}"
                f"{', times 2 for bi_data' if self.bi_data else ''}). Received: "
                f"batch_size={self.batch_size}.")
        for name in ("sep_id", "cls_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"`{name}` must be an id >= 0. Received: {name}={value!r}.")
        if self.sep_id == self.cls_id:
            raise ValueError(f"`sep_id` and `cls_id` must differ. Received: both {self.sep_id}.")

    @property
    def num_predict_reuse(self):
        """Targets among the reuse tokens: the original's `num_predict_0`."""
        return self.num_predict - self.num_predict // 2

    @property
    def num_predict_rest(self):
        """Targets among `A <sep> B <sep> <cls>`: the original's `num_predict_1`."""
        return self.num_predict // 2

    def feature_spec(self):
        tf = tensorflow()
        length = self.seq_len
        return {
            "input": tf.io.FixedLenFeature([length], tf.int64),
            "is_masked": tf.io.FixedLenFeature([length], tf.int64),
            "label": tf.io.FixedLenFeature([1], tf.int64),
            "seg_id": tf.io.FixedLenFeature([length], tf.int64),
            "target": tf.io.FixedLenFeature([length], tf.int64),
        }


def encode_xlnet_examples(features):
    """Yields serialized XLNet `tf.train.Example`s, one per row.

    Args:
        features: dict of `FEATURE_NAMES` -> int arrays `(N, L)` (`label`:
            `(N, 1)`), values >= 0.

    Byte-identical to `tf.train.Example(...).SerializeToString(deterministic=True)`
    (a test compares them), built for the whole block at once with
    `example_bytes.py`'s numpy encoder helpers.
    """
    if sorted(features) != list(FEATURE_NAMES):
        raise ValueError(f"Features must be {FEATURE_NAMES}. Received: {sorted(features)}.")
    if not len(features["input"]):
        return
    pieces = []
    for key in FEATURE_NAMES:  # sorted by key, as deterministic serialization orders the map
        payload = varints(features[key])
        pieces += [heads(key, b"\x1a", payload[1]), payload]  # Feature.int64_list
    yield from examples(pieces)


def to_model_inputs(features):
    """Batched reader features -> `(x, y, sample_weight)` for the permutation LM's `fit`.

    Args:
        features: dict from `xlnet.permutation.permute_record`, batched:
            `input_k`, `seg_id` `(B, L)`, `perm_mask` `(B, L, L)`,
            `target_mapping` `(B, P, L)`, `target`, `target_mask` `(B, P)`.

    Returns:
        `x = {"input_word_ids", "input_type_ids"}` int32 `(B, L)`,
        `"perm_mask"` float32 `(B, L, L)` (1: row i may not attend to j) and
        `"target_mapping"` float32 `(B, P, L)` (one-hot rows, all 0 on
        padding); `y` int32 `(B, P)` the predicted tokens; `sample_weight`
        float32 `(B, P)`, 0 on padding.
    """
    tf = tensorflow()
    x = {
        "input_word_ids": tf.cast(features["input_k"], tf.int32),  # (B, L)
        "input_type_ids": tf.cast(features["seg_id"], tf.int32),  # (B, L)
        "perm_mask": tf.cast(features["perm_mask"], tf.float32),  # (B, L, L)
        "target_mapping": tf.cast(features["target_mapping"], tf.float32),  # (B, P, L)
    }
    y = tf.cast(features["target"], tf.int32)  # (B, P)
    sample_weight = tf.cast(features["target_mask"], tf.float32)  # (B, P)
    return x, y, sample_weight
