"""GPT's fine-tuning models: classifier, multiple choice, token tagger.

Over 400 lines: one class per task head, with the layers they share, kept
together so the family's task models read as one list.

GPT fine-tuning (Radford et al. 2018, Sec. 3.2-3.3; the original
`finetune-transformer-lm` `train.py`): a linear layer on the final state at
the `_classify_` token, trained on `L3 = L2 + lm_coef * L1`, where L2 is the
task loss and L1 the language-model loss of the same inputs (auxiliary
objective, `lm_coef` 0.5).

How L1 reaches `fit`: the inputs are their own LM targets, so the models
compute L1 inside the graph (an endpoint layer, `GptAuxiliaryLmLoss`) and
hand it to Keras with `add_loss`; Keras adds it to the compiled task loss,
under distribution strategies too. The dataset therefore supplies only the
task label, and each model has ONE output, the task logits, as BERT's task
models: `predict`, the metrics and the prediction writers read it as they
read BERT's. The per-position LM logits are not a model output: over a
40k vocabulary they are `S * V` floats per row (a GLUE dev set predicted in
both similarity orders would be about 17 GB); `backbone(x)["lm_logits"]`
gives them when needed. `evaluate` reports L3 too (the original's
validation cost is L2 alone). `lm_coef=0` builds no LM layer at all, so the
loss is exactly the task loss. The logs show the unweighted L1 as `lm_loss`.
"""

import keras

from keras_bert_impl.base.classifier_defaults import ClassifierDefaults
from keras_bert_impl.base.task_defaults import ChoiceDefaults
from keras_bert_impl.base.task_defaults import TaggerDefaults
from keras_bert_impl.base.task_model import TaskModel
from keras_bert_impl.gpt.gpt_backbone import INPUT_NAMES
from keras_bert_impl.gpt.gpt_backbone import check_gpt_inputs
from keras_bert_impl.layers.choice_rows import FoldRows
from keras_bert_impl.layers.choice_rows import UnfoldRows
from keras_bert_impl.losses import sparse_softmax_cross_entropy
from keras_bert_impl.speed.fast_dropout import FastDropout
from keras_bert_impl.speed.plain_ops import tracing_plain

# B=batch, C=choices (2 for similarity), N=rows the backbone reads (B or B*C),
# S=sequence, H=hidden, V=vocab, K=classes, L=labels


def _inputs(rank, num_choices=None):
    """The two int32 inputs: `(B, S)`, or `(B, C, S)` when `rank` is 3."""
    shape = (None,) if rank == 2 else (num_choices, None)
    return {name: keras.Input(shape=shape, dtype="int32", name=name) for name in INPUT_NAMES}


def _head_initializer(backbone):
    """N(0, initializer_range), as the original's `clf` weights (its bias starts at 0)."""
    return keras.initializers.RandomNormal(stddev=backbone.initializer_range)


def _check_fraction(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"`{name}` must be a number in [0, 1). Received: {name}={value!r}.")


def _check_lm_coef(lm_coef):
    if isinstance(lm_coef, bool) or not isinstance(lm_coef, (int, float)) or lm_coef < 0:
        raise ValueError(
            "`lm_coef` must be a number >= 0 (0: no auxiliary language-model loss; the "
            f"paper's 0.5). Received: lm_coef={lm_coef!r}.")


def _check_classify_id(classify_id, backbone):
    if isinstance(classify_id, bool) or not isinstance(classify_id, int) or not (
            0 <= classify_id < backbone.vocab_size):
        raise ValueError(
            f"`classify_id` must be a token id in [0, vocab_size={backbone.vocab_size}): the "
            "`_classify_` token appended to the vocabulary (grow it with "
            f"`grow_vocabulary(backbone, 3)`). Received: classify_id={classify_id!r}.")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GptClassifyState(keras.layers.Layer):
    """The final state at each row's `_classify_` token.

    The token is found as the original finds it: the argmax of
    `input_word_ids == classify_id`, i.e. its first occurrence (a row
    without one reads position 0).

    Args:
        classify_id: int. The `_classify_` token's id.

    Call arguments:
        sequence_output: float `(N, S, H)`.
        input_word_ids: int `(N, S)`.

    Returns:
        `(N, H)`.

    Example:
    >>> layer = GptClassifyState(12)
    >>> layer(np.ones((3, 7, 5)), np.full((3, 7), 12)).shape
    (3, 5)
    """

    def __init__(self, classify_id, **kwargs):
        super().__init__(**kwargs)
        self.classify_id = classify_id

    def call(self, sequence_output, input_word_ids):
        is_classify = keras.ops.cast(
            keras.ops.equal(input_word_ids, self.classify_id), "int32")  # (N, S)
        position = keras.ops.argmax(is_classify, axis=1)  # (N,), first 1
        index = keras.ops.expand_dims(keras.ops.cast(position, "int32"), (1, 2))  # (N, 1, 1)
        return keras.ops.take_along_axis(sequence_output, index, axis=1)[:, 0]  # (N, H)

    def compute_output_shape(self, sequence_output_shape, input_word_ids_shape):
        return (sequence_output_shape[0], sequence_output_shape[2])

    def get_config(self):
        return {**super().get_config(), "classify_id": self.classify_id}


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GptAuxiliaryLmLoss(keras.layers.Layer):
    """Adds `lm_coef * L1`, GPT's auxiliary LM loss, to the model's losses.

    An endpoint layer: it returns `outputs` unchanged and calls `add_loss`
    with `lm_coef` times L1, the next-token cross-entropy of the inputs
    themselves, computed as the original `train.py`: position t predicts
    token t+1 where `input_mask[:, t+1]` is 1 (`M[:, 1:]`), averaged per
    row, then over the rows (every choice or order is a row):
    `mean(sum(xent * M[:, 1:], 1) / sum(M[:, 1:], 1))`. A row with no
    target counts 0. The unweighted L1 is tracked as the `lm_loss` metric.

    Args:
        lm_coef: float. The weight of L1 (the paper's lambda, 0.5).

    Call arguments:
        outputs: any tensor, returned as it is.
        lm_logits: float32 `(N, S, V)`, the backbone's `lm_logits`.
        input_word_ids: int `(N, S)`.
        input_mask: int `(N, S)`.

    Returns:
        `outputs`.

    Example:
    >>> layer = GptAuxiliaryLmLoss(0.5)
    >>> _ = layer(np.zeros(3), np.zeros((3, 7, 99)), np.ones((3, 7), "int32"),
    ...           np.ones((3, 7), "int32"))
    >>> float(layer.losses[0])  # 0.5 * log(99)
    2.2975...
    """

    def __init__(self, lm_coef=0.5, **kwargs):
        super().__init__(**kwargs)
        _check_lm_coef(lm_coef)
        self.lm_coef = lm_coef
        self.lm_loss_tracker = keras.metrics.Mean(name="lm_loss")

    def call(self, outputs, lm_logits, input_word_ids, input_mask):
        if tracing_plain():  # an export: inference adds no loss
            return outputs
        ops = keras.ops
        # Targets on all S positions (the last one weighted 0): no (N, S-1, V)
        # slice of the logits is copied.
        targets = ops.pad(input_word_ids[:, 1:], [[0, 0], [0, 1]])  # (N, S)
        weights = ops.pad(ops.cast(input_mask[:, 1:], "float32"), [[0, 0], [0, 1]])  # (N, S)
        xent = sparse_softmax_cross_entropy(targets, ops.cast(lm_logits, "float32"))  # (N, S)
        per_row = ops.sum(xent * weights, axis=1) / ops.maximum(
            ops.sum(weights, axis=1), 1.0)  # (N,)
        lm_loss = ops.mean(per_row)
        self.add_loss(self.lm_coef * lm_loss)
        self.lm_loss_tracker.update_state(lm_loss)
        return outputs

    def compute_output_spec(self, outputs, *args):
        return keras.KerasTensor(outputs.shape, dtype=outputs.dtype)

    def get_config(self):
        return {**super().get_config(), "lm_coef": self.lm_coef}


class GptTaskModel(TaskModel):
    """A `GptBackbone` plus a small task layer, as a functional Keras model.

    Subclasses build the graph in `__init__` and keep their constructor
    arguments as attributes of the same names (`get_config` returns them).
    Fine-tuning needs the three appended tokens: build the models on
    `grow_vocabulary(backbone, 3)`.
    """

    # Constructor arguments besides `backbone`, for `get_config`.
    config_names = ()
    # The SavedModel output name of a single-tensor output.
    output_name = "logits"

    def _auxiliary_lm(self, outputs, backbone_outputs, rows):
        """`outputs`, through `GptAuxiliaryLmLoss` when `lm_coef` > 0."""
        if not self.lm_coef:
            return outputs  # lambda = 0: exactly the task loss
        self.auxiliary_lm = GptAuxiliaryLmLoss(
            self.lm_coef,
            dtype="float32",  # the loss and the passed-through logits stay float32
            name="auxiliary_lm")
        return self.auxiliary_lm(
            outputs, backbone_outputs["lm_logits"], rows["input_word_ids"], rows["input_mask"])

    def call(self, inputs, training=None, mask=None):
        if len(self.input["input_word_ids"].shape) == 2:
            check_gpt_inputs(inputs, self.backbone.gpt_config)
        else:
            _check_choice_inputs(inputs)
        return super().call(inputs, training=training, mask=mask)


def _check_choice_inputs(inputs):
    if not isinstance(inputs, dict) or sorted(inputs) != sorted(INPUT_NAMES):
        raise ValueError(f"Inputs must be a dict with keys {list(INPUT_NAMES)}, each int32 "
                         "(batch, choices, seq_length).")
    for name in INPUT_NAMES:
        if len(inputs[name].shape) != 3:
            raise ValueError(f"`{name}` must have rank 3, (batch, choices, seq_length). "
                             f"Received shape={tuple(inputs[name].shape)}.")
    # Keras checks the 2 rows of similarity inputs; the backbone checks dtypes, lengths and id ranges on the folded rows.


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GptClassifier(ClassifierDefaults, GptTaskModel):
    """Classification and regression from the state at `_classify_` (GPT Sec. 3.3).

    The backbone reads `_start_ text _classify_` or `_start_ a _delimiter_
    b _classify_` (`gpt_inputs`); its final state at `_classify_`, dropout
    (0.1, the original's `clf_pdrop`) and a Dense layer give `num_classes`
    logits; `num_classes=1` is a regressor (STS-B, mean squared error).

    With `similarity=True` the inputs hold both orders of each pair, `(B,
    2, S)` (`gpt_inputs.similarity_inputs`), and the two final states are
    added before the Dense layer, so the logits do not depend on the order.

    Training loss: task loss + `lm_coef` * the LM loss of the inputs (see
    the module docstring); `compile()` with no loss sets both.

    Args:
        backbone: `GptBackbone` whose vocabulary holds the `_classify_` token.
        num_classes: int. Classes, or 1 for regression.
        classify_id: int. The `_classify_` token's id (V+2 when the three
            tokens were appended to a vocabulary of V).
        similarity: bool. Inputs are `(B, 2, S)`, both orders of each pair.
        dropout: float. Dropout on the `_classify_` state.
        lm_coef: float. Weight of the auxiliary LM loss (0: none).

    Call arguments:
        inputs: dict of int32 `input_word_ids`, `input_mask`, `(B, S)`
            (`(B, 2, S)` with `similarity=True`).

    Returns:
        float32 logits `(B, K)`, or scores `(B,)` when `num_classes=1`.

    Example:
    >>> backbone = grow_vocabulary(GptBackbone.from_config_object(gpt_preset("gpt_tiny")), 3)
    >>> model = GptClassifier(backbone, num_classes=2, classify_id=8002)
    >>> model.compile()  # cross-entropy + 0.5 * LM loss, accuracy
    """

    config_names = ("num_classes", "classify_id", "similarity", "dropout", "lm_coef")

    def __init__(self, backbone, num_classes, classify_id, similarity=False, dropout=0.1,
                 lm_coef=0.5, **kwargs):
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(
                f"`num_classes` must be an integer >= 1 (1 = regression). Received: {num_classes!r}.")
        _check_classify_id(classify_id, backbone)
        _check_fraction("dropout", dropout)
        _check_lm_coef(lm_coef)
        # === Config ===
        self.num_classes = num_classes
        self.classify_id = classify_id
        self.similarity = bool(similarity)
        self.dropout = dropout
        self.lm_coef = lm_coef
        # === Layers ===
        self.backbone = backbone
        self.classify_state = GptClassifyState(classify_id, name="classify_state")
        self.output_dropout = FastDropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=_head_initializer(backbone),
            dtype="float32",  # logits in float32 under mixed precision
            name="logits")
        # === Functional graph ===
        if self.similarity:
            self.fold = FoldRows(name="fold_orders")
            self.unfold = UnfoldRows(name="unfold_orders")
            inputs = _inputs(3, num_choices=2)  # (B, 2, S)
            rows = {name: self.fold(x) for name, x in inputs.items()}  # (2B, S)
        else:
            inputs = _inputs(2)  # (B, S)
            rows = inputs
        out = backbone(rows)
        state = self.classify_state(out["sequence_output"], rows["input_word_ids"])  # (N, H)
        if self.similarity:
            both = self.unfold(state, inputs["input_word_ids"])  # (B, 2, H)
            state = keras.ops.sum(keras.ops.cast(both, "float32"), axis=1)  # (B, H)
        logits = self.output_dense(self.output_dropout(state))  # (B, K)
        if num_classes == 1:
            logits = keras.ops.squeeze(logits, axis=-1)  # (B,)
        logits = self._auxiliary_lm(logits, out, rows)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GptMultipleChoice(ChoiceDefaults, GptTaskModel):
    """One score per choice, softmax over the choices (GPT Sec. 3.3, SWAG, RACE).

    Each choice is one row `_start_ context _delimiter_ choice_k _classify_`
    (`gpt_inputs.multiple_choice_inputs`); its `_classify_` state, dropout
    and a Dense layer to one unit score it. As the original, the dropout
    mask is shared by the choices of an example (noise shape `(B, 1, H)`),
    so they are compared on the same features. Any number of choices.

    Training loss: cross-entropy over the choices + `lm_coef` * the LM loss
    of every row (see the module docstring).

    Args:
        backbone: `GptBackbone` whose vocabulary holds the `_classify_` token.
        classify_id: int. The `_classify_` token's id.
        dropout: float. Dropout on the `_classify_` states.
        lm_coef: float. Weight of the auxiliary LM loss (0: none).

    Call arguments:
        inputs: dict of int32 `(B, C, S)` `input_word_ids`, `input_mask`.

    Returns:
        float32 logits `(B, C)`.

    Example:
    >>> model = GptMultipleChoice(backbone, classify_id=8002)
    >>> model.compile()
    """

    config_names = ("classify_id", "dropout", "lm_coef")

    def __init__(self, backbone, classify_id, dropout=0.1, lm_coef=0.5, **kwargs):
        _check_classify_id(classify_id, backbone)
        _check_fraction("dropout", dropout)
        _check_lm_coef(lm_coef)
        # === Config ===
        self.classify_id = classify_id
        self.dropout = dropout
        self.lm_coef = lm_coef
        # === Layers ===
        self.backbone = backbone
        self.fold = FoldRows(name="fold_choices")
        self.unfold = UnfoldRows(name="unfold_choices")
        self.classify_state = GptClassifyState(classify_id, name="classify_state")
        self.output_dropout = keras.layers.Dropout(
            dropout, noise_shape=(None, 1, backbone.n_embd),  # one mask per example
            name="output_dropout")
        self.output_dense = keras.layers.Dense(
            1, kernel_initializer=_head_initializer(backbone), dtype="float32",
            name="choice_score")
        # === Functional graph ===
        inputs = _inputs(3)  # (B, C, S)
        rows = {name: self.fold(x) for name, x in inputs.items()}  # (B*C, S)
        out = backbone(rows)
        state = self.classify_state(out["sequence_output"], rows["input_word_ids"])  # (B*C, H)
        state = self.unfold(state, inputs["input_word_ids"])  # (B, C, H)
        scores = self.output_dense(self.output_dropout(state))  # (B, C, 1)
        logits = keras.ops.squeeze(scores, axis=-1)  # (B, C)
        logits = self._auxiliary_lm(logits, out, rows)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GptTokenTagger(TaggerDefaults, GptTaskModel):
    """Dropout + Dense on every token's final state (CoNLL NER).

    Not in the GPT paper; the head is BERT's (Sec. 5.3). Left-to-right
    only: a token's state has seen the tokens before it and none after, so
    a word is tagged without its right context (BERT sees both sides; its
    Sec. 5.1 "LTR & No NSP" ablation measures what that costs). As for BERT,
    `training/tasks/conll.py` puts the labels on each word's first piece with sample
    weight 1 and the loss is the weighted mean over them.

    Training loss: that + `lm_coef` * the LM loss of the inputs (see the
    module docstring).

    Args:
        backbone: `GptBackbone`.
        num_labels: int. Tag set size (L).
        dropout: float. Dropout on the sequence output.
        lm_coef: float. Weight of the auxiliary LM loss (0: none).

    Call arguments:
        inputs: dict of int32 `(B, S)` `input_word_ids`, `input_mask`.

    Returns:
        float32 logits `(B, S, L)`.

    Example:
    >>> model = GptTokenTagger(backbone, num_labels=9)
    >>> model.compile()
    """

    config_names = ("num_labels", "dropout", "lm_coef")

    def __init__(self, backbone, num_labels, dropout=0.1, lm_coef=0.5, **kwargs):
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 2:
            raise ValueError(f"`num_labels` must be an integer >= 2. Received: {num_labels!r}.")
        _check_fraction("dropout", dropout)
        _check_lm_coef(lm_coef)
        # === Config ===
        self.num_labels = num_labels
        self.dropout = dropout
        self.lm_coef = lm_coef
        # === Layers ===
        self.backbone = backbone
        self.output_dropout = FastDropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_labels, kernel_initializer=_head_initializer(backbone), dtype="float32",
            name="logits")
        # === Functional graph ===
        inputs = _inputs(2)  # (B, S)
        out = backbone(inputs)
        logits = self.output_dense(self.output_dropout(out["sequence_output"]))  # (B, S, L)
        logits = self._auxiliary_lm(logits, out, inputs)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
