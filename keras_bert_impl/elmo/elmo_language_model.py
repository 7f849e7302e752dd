"""`ElmoLanguageModel`: ELMo's biLM with its training objective, for `model.fit`."""

import keras
import tensorflow as tf

from keras_bert_impl.base.backbone import as_backbone
from keras_bert_impl.base.backbone import wrapper_config
from keras_bert_impl.base.strategy_fixes import KerasStrategyFixes
from keras_bert_impl.elmo.elmo_backbone import ElmoBackbone
from keras_bert_impl.elmo.elmo_backbone import check_char_ids
from keras_bert_impl.elmo.elmo_lstm_stack import reverse_padded
from keras_bert_impl.elmo.elmo_softmax import ElmoSoftmax

# B=batch (streams), T=unroll_steps, C=characters per token, P=projection,
# V=vocabulary

DIRECTIONS = ("forward", "backward")
INPUT_NAMES = {"forward": "char_ids", "backward": "char_ids_reverse"}


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ElmoLanguageModel(KerasStrategyFixes, keras.Model):
    """ELMo pretraining: a forward and a backward LM on one character encoder.

    Peters et al. 2018, Sec. 3.1, as bilm-tf's `LanguageModel` trains it:
    the forward LM reads a window of the forward stream and predicts each
    next token; the backward LM reads the window of the reverse stream
    (every sentence reversed in place: `</S> wn .. w1`) left to right and
    predicts each next token of it, i.e. the word before in the text. Both
    windows come from `tf_records.elmo.reader`. The backbone's character
    encoder embeds both; its `forward_lstm` and `backward_lstm` run them;
    dropout hits the top outputs, then one `ElmoSoftmax` scores both. The
    loss is `0.5 * (CE_forward + CE_backward)`, each the mean over the real
    targets (sample weight 1), with the full softmax or, when
    `n_negative_samples_batch` > 0, a sampled one in training (evaluation
    always uses the full softmax).

    Pass a stateful backbone (`max_batch_size` = the batch) to train as
    bilm-tf: each row's LSTM states carry from one window to the next
    (its stream's continuation), and since they are read from
    non-trainable variables no gradient flows into the previous window
    (backpropagation truncated at every window boundary). `reset_states()`
    zeros them (before evaluating held-out streams, say). The states are
    one set per row: under `MirroredStrategy` or `TPUStrategy` each replica
    would need its own, which this model does not keep, so train it with
    the default strategy (one device) only.

    Args:
        backbone: `ElmoBackbone`.
        vocab_size: int. V, the softmax's rows (bilm-tf's `n_tokens_vocab`).
        n_negative_samples_batch: int. 0: full softmax in training; K > 0
            (K < V): K sampled negatives per batch and direction (bilm-tf:
            8192).

    Call arguments:
        inputs: dict, `char_ids` `(B, T, C)` (forward stream) and
            `char_ids_reverse` `(B, T, C)` (reverse stream), int32; 0 for
            padding tokens.
        training: bool.

    Returns:
        dict `forward`, `backward`: float32 `(B, T, P)`, each direction's
        top output after dropout (the softmax's input; `softmax(...)`
        gives the logits).

    Example:
    >>> backbone = ElmoBackbone.from_config_object(elmo_preset("elmo_tiny"), max_batch_size=2)
    >>> lm = ElmoLanguageModel(backbone, vocab_size=99)
    >>> lm.compile(optimizer=keras.optimizers.Adagrad(0.2, initial_accumulator_value=1.0))
    >>> lm.fit(elmo_dataset("data/", batch_size=2), steps_per_epoch=100)
    """

    def __init__(self, backbone, vocab_size, n_negative_samples_batch=0, **kwargs):
        backbone = as_backbone(backbone)
        super().__init__(**kwargs)
        if not isinstance(backbone, ElmoBackbone):
            raise ValueError(
                f"`backbone` must be an ElmoBackbone. Received: {type(backbone).__name__}.")
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(
                f"`vocab_size` must be an integer >= 2. Received: vocab_size={vocab_size!r}.")
        k = n_negative_samples_batch
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < vocab_size:
            raise ValueError(
                "`n_negative_samples_batch` must be an integer in [0, vocab_size="
                f"{vocab_size}) (0: full softmax). Received: n_negative_samples_batch={k!r}.")
        self.vocab_size = vocab_size
        self.n_negative_samples_batch = n_negative_samples_batch
        # === Layers ===
        self.backbone = backbone
        self.top_dropout = keras.layers.Dropout(
            backbone.dropout, dtype=backbone.dtype_policy, name="top_dropout")
        self.softmax = ElmoSoftmax(vocab_size, name="softmax")
        self.softmax.build((None, None, backbone.projection_dim))
        self.dtype_policy = backbone.dtype_policy
        self.built = True

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict) or set(inputs) != set(INPUT_NAMES.values()):
            received = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(
                f"ElmoLanguageModel takes a dict with keys {sorted(INPUT_NAMES.values())} (the "
                f"forward and reverse streams' windows). Received: {received}.")
        backbone = self.backbone
        outputs = {}
        for direction, stack in (("forward", backbone.forward_lstm),
                                 ("backward", backbone.backward_lstm)):
            char_ids = inputs[INPUT_NAMES[direction]]
            check_char_ids(char_ids, backbone.elmo_config)
            mask = keras.ops.any(keras.ops.not_equal(char_ids, 0), axis=-1)  # (B, T)
            keep = keras.ops.cast(mask, backbone.compute_dtype)[:, :, None]  # (B, T, 1)
            x = backbone.character_encoder(char_ids) * keep  # (B, T, P)
            if direction == "backward":
                # The stack reverses its input; reversed twice, it reads the
                # reverse stream in stream order, carrying its states along it.
                x = reverse_padded(x, mask)
            top = stack(x, mask, training=training)[-1]  # (B, T, P)
            if direction == "backward":
                top = reverse_padded(top, mask)  # back in stream order
            top = self.top_dropout(top, training=training)
            outputs[direction] = keras.ops.cast(top, "float32")
        return outputs

    def token_losses(self, outputs, targets, sampled=False):
        """Per-target cross-entropy of each direction: dict of float32 `(B, T)`.

        Args:
            outputs: the model's outputs.
            targets: dict `forward`, `backward` of int `(B, T)` ids.
            sampled: bool. Sample the softmax (when the model does).
        """
        k = self.n_negative_samples_batch if sampled else 0
        return {d: self.softmax.token_losses(outputs[d], targets[d], k) for d in DIRECTIONS}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """`0.5 * (CE_forward + CE_backward)`, each averaged over its weighted targets."""
        del x
        losses = self.token_losses(y_pred, y, sampled=training)
        total = 0.0
        for direction in DIRECTIONS:
            loss = losses[direction]  # (B, T)
            weight = keras.ops.ones_like(loss) if sample_weight is None else keras.ops.cast(
                sample_weight[direction], "float32")  # (B, T)
            total += keras.ops.sum(loss * weight) / keras.ops.maximum(keras.ops.sum(weight), 1.0)
        total = 0.5 * total
        for extra in self.losses:
            total += keras.ops.cast(keras.ops.sum(extra), "float32")
        return total

    def reset_states(self):
        """Zeros the carried LSTM states (stateful backbone)."""
        self.backbone.reset_states()

    def _symbolic_outputs(self):
        """What `call` returns: each direction's float32 top outputs `(B, T, P)`
        (with `_symbolic_batch`, `fit` builds the optimizer before it traces
        the step, which it then traces once, not again for the variables
        created in it)."""
        return {d: keras.KerasTensor((None, None, self.backbone.projection_dim), "float32")
                for d in DIRECTIONS}

    def _symbolic_batch(self):
        """`(x, y, sample_weight)` specs: `tf_records.elmo.reader`'s batches."""
        chars = self.backbone.elmo_config.max_characters_per_token
        x = {name: tf.TensorSpec([None, None, chars], tf.int32) for name in INPUT_NAMES.values()}
        y = {d: tf.TensorSpec([None, None], tf.int32) for d in DIRECTIONS}
        return x, y, {d: tf.TensorSpec([None, None], tf.float32) for d in DIRECTIONS}

    def get_config(self):
        return wrapper_config(self, {"vocab_size": self.vocab_size,
                                     "n_negative_samples_batch": self.n_negative_samples_batch})

    @classmethod
    def from_config(cls, config):
        return cls(**config)
