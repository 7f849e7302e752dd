"""Pretraining models: masked LM + next sentence, and masked LM alone."""

import keras
import tensorflow as tf

from keras_bert_impl.base.backbone import as_backbone
from keras_bert_impl.base.backbone import sequence_inputs
from keras_bert_impl.base.task_defaults import CausalLMDefaults
from keras_bert_impl.base.task_model import TaskModel
from keras_bert_impl.bert.bert_backbone import INPUT_NAMES
from keras_bert_impl.bert.bert_backbone import check_inputs
from keras_bert_impl.bert.masked_lm_head import MaskedLMHead
from keras_bert_impl.bert.next_sentence_head import NextSentenceHead
from keras_bert_impl.losses import MaskedLMLoss
from keras_bert_impl.metrics import SparseAccuracy
from keras_bert_impl.speed.batch_slices import BatchSlices

# B=batch, P=max_predictions_per_seq, V=vocab


def _pretrainer_graph(backbone):
    """Inputs, pooled output `(B, H)` and the masked rows `(B, P, H)`.

    The backbone's own layers, called so that the last block computes only
    the rows the heads read: [CLS] (for the pooler) and the P masked
    positions, attending to every position as usual. Outputs equal running
    the whole backbone and gathering those rows; the last block does
    (1 + P) / S of its usual query-side work (21 of 128 rows at S=128, P=20).
    """
    inputs = sequence_inputs(INPUT_NAMES)
    positions = keras.Input(shape=(None,), dtype="int32", name="masked_lm_positions")
    inputs["masked_lm_positions"] = positions
    x = backbone.embeddings(
        backbone.word_embedding(inputs["input_word_ids"]), inputs["input_type_ids"]
    )  # (B, S, H)
    for layer in backbone.encoder_layers[:-1]:
        x = layer(x, inputs["input_mask"])  # (B, S, H)
    query_positions = keras.ops.concatenate(
        [keras.ops.zeros_like(positions[:, :1]), positions], axis=1
    )  # (B, 1 + P): [CLS], then the masked positions
    x = backbone.encoder_layers[-1](
        x, inputs["input_mask"], query_positions=query_positions
    )  # (B, 1 + P, H)
    return inputs, backbone.pooler(x), x[:, 1:]


def _masked_lm_head(backbone, hidden_act=None, layer_norm_eps=None):
    """The masked-LM head; its activation and epsilon are the backbone's
    (the original) unless given."""
    config = backbone.bert_config
    return MaskedLMHead(
        backbone.word_embedding,
        config.hidden_act if hidden_act is None else hidden_act,
        config.initializer_range,
        config.layer_norm_eps if layer_norm_eps is None else layer_norm_eps,
        dtype=backbone.dtype_policy,
        name="masked_lm_head",
    )


class _Pretrainer(BatchSlices, TaskModel):
    """What the pretrainers share: input checks, training batches sliced over
    CPU cores (`BatchSlices`), and `TaskModel`'s config and compile restore."""

    def call(self, inputs, training=None, mask=None):
        check_inputs(inputs, self.backbone.bert_config, extra_names=("masked_lm_positions",))
        return super().call(inputs, training=training, mask=mask)

    def _symbolic_batch(self):
        """Targets and sample weights for every output (masked-LM weights)."""
        x = {name: tf.TensorSpec([None, None], tf.int32) for name in self.input}
        y, sample_weight = {}, {}
        for name, output in self.output.items():
            shape = [None] * (len(output.shape) - 1)
            y[name] = tf.TensorSpec(shape, tf.int32)
            sample_weight[name] = tf.TensorSpec(shape, tf.float32)
        return x, y, sample_weight


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertPretrainer(_Pretrainer):
    """BERT with both pretraining heads: masked LM and next sentence.

    Paper Sec. 3.1. Inputs are the backbone's three plus
    `masked_lm_positions` `(B, P)`. Outputs are float32 logits
    `masked_lm` `(B, P, V)` and `next_sentence` `(B, 2)`. `compile()` with
    no loss sets the paper's objective (sum of the two losses) and the
    masked-LM and NSP accuracies, so a dataset of
    `(x, {"masked_lm": masked_lm_ids, "next_sentence": next_sentence_labels},
    {"masked_lm": masked_lm_weights})` trains with a plain `fit`.

    Args:
        backbone: `BertBackbone`.

    Example:
    >>> pretrainer = BertPretrainer(BertBackbone.from_bert_config(preset("tiny")))
    >>> pretrainer.compile(optimizer="adamw")
    """

    def __init__(self, backbone, **kwargs):
        backbone = as_backbone(backbone)
        # === Layers ===
        self.backbone = backbone
        self.masked_lm_head = _masked_lm_head(backbone)
        self.next_sentence_head = NextSentenceHead(
            backbone.bert_config.initializer_range, name="next_sentence_head"
        )
        # === Functional graph ===
        inputs, pooled_output, masked_rows = _pretrainer_graph(backbone)
        outputs = {
            "masked_lm": self.masked_lm_head(masked_rows),  # (B, P, V)
            "next_sentence": self.next_sentence_head(pooled_output),  # (B, 2)
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = backbone.dtype_policy

    def compile(
        self,
        optimizer="adamw",
        loss=None,
        metrics=None,
        weighted_metrics=None,
        **kwargs,
    ):
        """Compiles with BERT's pretraining losses and metrics by default.

        Keras' `jit_compile="auto"` leaves XLA off on CPU-only hosts, which
        also measured faster for this model there; pass `jit_compile=True`
        for XLA anywhere (static shapes needed).
        """
        if loss is None:
            loss = {
                "masked_lm": MaskedLMLoss(),
                "next_sentence": keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True, name="next_sentence_loss"
                ),
            }
        if weighted_metrics is None:
            weighted_metrics = {
                "masked_lm": [SparseAccuracy(name="accuracy")]
            }
        if metrics is None:
            metrics = {
                "next_sentence": [SparseAccuracy(name="accuracy")]
            }
        super().compile(
            optimizer=optimizer,
            loss=loss,
            metrics=metrics,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertMaskedLMPretrainer(_Pretrainer):
    """BERT with the masked-LM head only (no NSP), as RoBERTa-style ablations.

    Same inputs as `BertPretrainer`; one output, `masked_lm` float32 logits
    `(B, P, V)`. Targets `{"masked_lm": masked_lm_ids}` with sample weight
    `{"masked_lm": masked_lm_weights}`.

    Args:
        backbone: `BertBackbone`.
        masked_lm_hidden_act: str or None. The head's transform activation;
            None: the backbone's `hidden_act` (the original). keras-hub's
            `BertMaskedLM` computes exact "gelu" there while its encoder
            computes the tanh form, so a model read from its preset sets
            this.
        masked_lm_layer_norm_eps: float or None. The head's LayerNorm
            epsilon; None: the backbone's `layer_norm_eps` (the original).
            keras-hub's `BertMaskedLM` head uses 1e-5.
    """

    def __init__(self, backbone, masked_lm_hidden_act=None, masked_lm_layer_norm_eps=None,
                 **kwargs):
        backbone = as_backbone(backbone)
        # === Layers ===
        self.backbone = backbone
        self.masked_lm_head = _masked_lm_head(
            backbone, masked_lm_hidden_act, masked_lm_layer_norm_eps)
        # === Functional graph ===
        inputs, _, masked_rows = _pretrainer_graph(backbone)
        outputs = {"masked_lm": self.masked_lm_head(masked_rows)}  # (B, P, V)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = backbone.dtype_policy
        self.masked_lm_hidden_act = masked_lm_hidden_act
        self.masked_lm_layer_norm_eps = masked_lm_layer_norm_eps

    def get_config(self):
        config = super().get_config()
        # Only when set: a model with the original head saves the config it
        # always did.
        for name in ("masked_lm_hidden_act", "masked_lm_layer_norm_eps"):
            if getattr(self, name) is not None:
                config[name] = getattr(self, name)
        return config

    def compile(self, optimizer="adamw", loss=None, weighted_metrics=None, **kwargs):
        """Compiles with the masked-LM loss and accuracy by default."""
        super().compile(
            optimizer=optimizer,
            loss=loss or {"masked_lm": MaskedLMLoss()},
            weighted_metrics=weighted_metrics
            # One output: Keras would not prefix the name, so name it fully.
            or {"masked_lm": [SparseAccuracy(name="masked_lm_accuracy")]},
            **kwargs,
        )


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertCausalLMPretrainer(CausalLMDefaults, _Pretrainer):
    """BERT as a left-to-right LM: the paper's "LTR & No NSP" ablation (Sec. 5.1).

    The backbone must be causal (`BertBackbone(..., causal=True)`): every
    position sees only itself and the positions before it. The same
    masked-LM head (transform + tied decoder + output bias) predicts the
    next token at EVERY position; no [MASK] in the input, no NSP. Inputs are
    the backbone's three; one output, `lm` float32 logits `(B, S, V)`.
    Targets `{"lm": next_ids}` with sample weight `{"lm": next_mask}` (1
    where the next token is real); `tf_records.bert.reader` makes them from the
    same records BERT trains on (`left_to_right=True`), so the ablation sees
    the same data.

    Args:
        backbone: `BertBackbone` with `causal=True`.
    """

    def __init__(self, backbone, **kwargs):
        backbone = as_backbone(backbone)
        if not backbone.causal:
            raise ValueError(
                "BertCausalLMPretrainer needs a causal backbone: build it with "
                "`BertBackbone(..., causal=True)`; a bidirectional one would see the "
                "token it predicts.")
        # === Layers ===
        self.backbone = backbone
        self.masked_lm_head = _masked_lm_head(backbone)
        # === Functional graph ===
        inputs = sequence_inputs(INPUT_NAMES)
        sequence_output = backbone(inputs)["sequence_output"]  # (B, S, H)
        outputs = {"lm": self.masked_lm_head(sequence_output)}  # (B, S, V)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = backbone.dtype_policy

    def call(self, inputs, training=None, mask=None):
        check_inputs(inputs, self.backbone.bert_config)
        return super(_Pretrainer, self).call(inputs, training=training, mask=mask)


__all__ = ["BertPretrainer", "BertMaskedLMPretrainer", "BertCausalLMPretrainer"]
