"""The XLNet model tests' shared cases: `ODD` (odd sizes, no dropout),
random weights and inputs, the outputs without the per-block list, a
permutation's mask, a small pretrainer with memory. Also imported by a
forked test's script (`test_xlnet_pretrainer.py`)."""

import numpy as np

from keras_bert_impl.xlnet import XLNetBackbone
from keras_bert_impl.xlnet import XLNetConfig
from keras_bert_impl.xlnet import XLNetPretrainer

ODD = XLNetConfig(vocab_size=99, d_model=12, n_layer=2, n_head=3, d_head=4, d_inner=37,
                  dropout=0.0)


def randomize(model, seed=0, stddev=0.3):
    """Every weight N(0, stddev): order-one scores, so that any leak of
    information between positions shows far above round-off."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(0.0, stddev, w.shape).astype("float32"))
    return model


def xlnet_inputs(batch=3, length=7, seed=0, predict=None, perm=None, mems=None):
    """Random ids, two segments, no padding; with `predict`, a random
    perm mask and that many one-hot target rows; with `mems`, that memory."""
    rng = np.random.default_rng(seed)
    x = {"input_word_ids": rng.integers(0, 99, (batch, length)).astype("int32"),
         "input_type_ids": (np.arange(length) >= length // 2).astype("int32")[None].repeat(
             batch, 0),
         "input_mask": np.zeros((batch, length), "float32")}
    if predict:
        x["perm_mask"] = (rng.random((batch, length, length)) < 0.5).astype("float32")
        x["target_mapping"] = np.eye(length, dtype="float32")[
            np.stack([rng.choice(length, predict, replace=False) for _ in range(batch)])]
    if perm is not None:
        x["perm_mask"] = perm
    if mems is not None:
        x["mems"] = np.asarray(mems, "float32")
    return x


def outputs_of(model, x):
    """The inference outputs as arrays, without the per-block list."""
    return {k: np.asarray(v) for k, v in model(x, training=False).items()
            if k != "encoder_outputs"}


def permutation_mask(order):
    """All positions targets: i cannot see j when rank(i) <= rank(j)."""
    rank = np.argsort(order)
    return (rank[:, None] <= rank[None, :]).astype("float32")


def pretrainer_with_memory(mem_len=4, reuse_len=3, batch=3, **changes):
    """A pretrainer on a random two-stream `ODD` backbone keeping `mem_len`
    positions of memory for `batch` rows."""
    config = ODD.replace(mem_len=mem_len, reuse_len=reuse_len, **changes)
    backbone = randomize(XLNetBackbone.from_config_object(config, two_stream=True))
    return XLNetPretrainer(backbone, max_batch_size=batch)
