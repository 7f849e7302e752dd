"""`XLNetPretrainer`: XLNet's permutation language model, for `model.fit`."""

import keras
import tensorflow as tf

from keras_bert_impl.base.backbone import as_backbone
from keras_bert_impl.base.backbone import wrapper_config
from keras_bert_impl.base.saved_compile import compile_from_saved_config
from keras_bert_impl.base.strategy_fixes import KerasStrategyFixes
from keras_bert_impl.losses import MaskedLMLoss
from keras_bert_impl.metrics import SparseAccuracy
from keras_bert_impl.xlnet.xlnet_backbone import MEMORY_INPUT
from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone

# B=batch, L=sequence, P=predictions, V=vocab, M=mem_len, H=d_model,
# n=n_layer

REQUIRED_INPUTS = ("input_word_ids", "input_type_ids", "perm_mask", "target_mapping")
OPTIONAL_INPUTS = ("input_mask",)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class XLNetPretrainer(KerasStrategyFixes, keras.Model):
    """XLNet pretraining: the permutation LM (Yang et al. 2019, Sec. 2.3-2.4).

    A two-stream `XLNetBackbone`; the query stream at each of the P
    predicted positions is scored against the word-embedding table itself
    (tied, as the original `lm_loss(tie_weight=True)`) plus a bias
    (`lm_loss.bias` in Hugging Face folders). `compile()` with no loss sets
    the cross-entropy averaged over the real predictions (sample weight
    `target_mask`, 1 for real ones) and the prediction accuracy, so a
    dataset of `(x, target, target_mask)` trains with a plain `fit`.

    Memory (a backbone with `mem_len`): each row's memory lives in a
    non-trainable float32 variable `mems_state` `(max_batch_size, n, M, H)`,
    zeros at first (as the original train_gpu.py), read before every
    forward pass and overwritten after it with `new_mems` (each layer's
    input, the first `reuse_len` states), so within `fit` batch t + 1
    attends to batch t's states, row by row, with no gradient into them. A
    batch of B < max_batch_size rows uses and updates rows [:B]. Every call
    (predict and evaluate too) advances it; `reset_states()` zeros it. The
    variable is synchronised on read: under `MirroredStrategy` each replica
    keeps its own (`max_batch_size` is then the per-replica batch);
    checkpoints save replica 0's.

    Args:
        backbone: `XLNetBackbone` with `two_stream=True`.
        max_batch_size: int or None. Rows of memory; required with
            `mem_len`, ignored otherwise.

    Call arguments:
        inputs: dict of `input_word_ids`, `input_type_ids` int32 `(B, L)`,
            `perm_mask` float32 `(B, L, L)`, `target_mapping` float32
            `(B, P, L)` and optionally `input_mask` float32 `(B, L)`
            (1 = padding; XLNet pretrains without padding: default zeros).
        training: bool.

    Returns:
        float32 logits `(B, P, V)`.

    Example:
    >>> config = xlnet_preset("xlnet_debug").replace(vocab_size=99, mem_len=8, reuse_len=8)
    >>> backbone = XLNetBackbone.from_config_object(config, two_stream=True)
    >>> model = XLNetPretrainer(backbone, max_batch_size=4)
    >>> model.compile(optimizer=keras.optimizers.Adam(1e-3))
    >>> model.fit(dataset)  # (x, target, target_mask) batches of 4
    """

    def __init__(self, backbone, max_batch_size=None, **kwargs):
        backbone = as_backbone(backbone)
        super().__init__(**kwargs)
        if not isinstance(backbone, XLNetBackbone) or not backbone.two_stream:
            raise ValueError(
                "`backbone` must be an XLNetBackbone with two_stream=True. Received: "
                f"{type(backbone).__name__}"
                f"{'' if not isinstance(backbone, XLNetBackbone) else ' with two_stream=False'}.")
        config = backbone.xlnet_config
        if config.uses_memory and (isinstance(max_batch_size, bool)
                                   or not isinstance(max_batch_size, int) or max_batch_size < 1):
            raise ValueError(
                f"The backbone keeps memory (mem_len={config.mem_len}), so `max_batch_size` must "
                f"be a positive integer (rows of memory). Received: max_batch_size="
                f"{max_batch_size!r}.")
        # === Layers ===
        self.backbone = backbone
        self.max_batch_size = max_batch_size if config.uses_memory else None
        self.lm_bias = self.add_weight(name="lm_bias", shape=(config.vocab_size,),
                                       initializer="zeros", dtype="float32", autocast=False)
        self.mems_state = None
        if config.uses_memory:
            self.mems_state = keras.Variable(
                keras.initializers.Zeros(),
                shape=(max_batch_size, config.n_layer, config.mem_len, config.d_model),
                dtype="float32", trainable=False, autocast=False,
                # One copy per replica, each written by its own replica.
                synchronization="on_read", aggregation="only_first_replica",
                name="mems_state")
        self.dtype_policy = backbone.dtype_policy
        self.built = True

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict) or not set(REQUIRED_INPUTS) <= set(inputs) or (
                set(inputs) - set(REQUIRED_INPUTS) - set(OPTIONAL_INPUTS)):
            received = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(
                f"XLNetPretrainer takes a dict with keys {list(REQUIRED_INPUTS)} (and optionally "
                f"{list(OPTIONAL_INPUTS)}). Received: {received}.")
        x = dict(inputs)
        ids = x["input_word_ids"]
        if "input_mask" not in x:
            x["input_mask"] = keras.ops.zeros(keras.ops.shape(ids), "float32")  # no padding
        batch = keras.ops.shape(ids)[0]
        if self.mems_state is not None:
            if isinstance(batch, int) and batch > self.max_batch_size:
                raise ValueError(
                    f"This XLNetPretrainer keeps memory for max_batch_size={self.max_batch_size}"
                    f" rows. Received a batch of {batch}.")
            x[MEMORY_INPUT] = self.mems_state[:batch]  # (B, n, M, H)
        out = self.backbone(x, training=training)
        if self.mems_state is not None:
            new_mems = keras.ops.cast(out["new_mems"], "float32")  # (B, n, M, H)
            self.mems_state.assign(
                keras.ops.concatenate([new_mems, self.mems_state[batch:]], axis=0))
        logits = self.backbone.word_embedding(out["query_output"], reverse=True)  # (B, P, V)
        return keras.ops.cast(logits, "float32") + self.lm_bias

    def reset_states(self):
        """Zeros the carried memory (no-op without memory)."""
        if self.mems_state is not None:
            self.mems_state.assign(keras.ops.zeros(self.mems_state.shape, "float32"))

    def compile(self, optimizer="adamw", loss=None, weighted_metrics=None, **kwargs):
        """Compiles with the permutation LM loss and accuracy by default."""
        super().compile(
            optimizer=optimizer,
            loss=loss or MaskedLMLoss(name="plm_loss"),
            weighted_metrics=weighted_metrics
            or [SparseAccuracy(name="plm_accuracy")],
            **kwargs,
        )

    def compile_from_config(self, config):
        compile_from_saved_config(self, config)

    def _symbolic_outputs(self):
        """What `call` returns: float32 logits `(B, P, V)` (builds the loss
        and metrics without tracing the model for them)."""
        return keras.KerasTensor((None, None, self.backbone.xlnet_config.vocab_size), "float32")

    def _symbolic_batch(self):
        """`(x, target, target_mask)` specs for building under a strategy."""
        x = {
            "input_word_ids": tf.TensorSpec([None, None], tf.int32),
            "input_type_ids": tf.TensorSpec([None, None], tf.int32),
            "perm_mask": tf.TensorSpec([None, None, None], tf.float32),
            "target_mapping": tf.TensorSpec([None, None, None], tf.float32),
        }
        return x, tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.float32)

    def get_config(self):
        return wrapper_config(self, {"max_batch_size": self.max_batch_size})

    @classmethod
    def from_config(cls, config):
        return cls(**config)
