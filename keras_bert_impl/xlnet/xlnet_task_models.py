"""XLNet's fine-tuning models: classifier, multiple choice, span QA, token tagger.

Over 400 lines: one class per task head, with the layers they share, kept
together so the family's task models read as one list.

As the original `function_builder.py` and transformers' `XLNetFor*` heads,
on the content stream of an `XLNetBackbone` (no memory, no query stream:
fine-tuning reads whole rows, `xlnet_inputs` lays them out):

- `XLNetClassifier`: the sequence summary (the LAST position's state, the
  `<cls>` of a left-padded row, through Dense(d_model) + tanh + dropout,
  `modeling.summarize_sequence` with `summary_type="last"` and
  `use_proj=True`), then Dense(num_classes); `num_classes=1` regresses
  (STS-B, the original `regression_loss`).
- `XLNetMultipleChoice`: the same summary of each choice's row, Dense(1),
  softmax over the choices (the original `get_race_loss`).
- `XLNetQuestionAnswerer`: Dense(2) on every state: start and end logits
  (transformers' `XLNetForQuestionAnsweringSimple`; the original's beam
  head with an answer classifier is not built), padding masked out. The
  last position (`<cls>`) stands for "no answer".
- `XLNetTokenTagger`: Dense(num_labels) on every state
  (`XLNetForTokenClassification`; the backbone already applies dropout to
  its output).

Inputs are three int32 arrays named as the backbone's, `input_mask` 1 on
padding; the task models cast it to the backbone's float mask, so a
SavedModel takes int32 ids only, as BERT's.
"""

import keras

from keras_bert_impl.base.classifier_defaults import ClassifierDefaults
from keras_bert_impl.base.layer_config import NamedConfig
from keras_bert_impl.base.task_defaults import ChoiceDefaults
from keras_bert_impl.base.task_defaults import SpanDefaults
from keras_bert_impl.base.task_defaults import TaggerDefaults
from keras_bert_impl.base.task_model import TaskModel
from keras_bert_impl.layers.choice_rows import FoldRows
from keras_bert_impl.layers.choice_rows import UnfoldScores
from keras_bert_impl.speed.fast_dropout import FastDropout
from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
from keras_bert_impl.xlnet.xlnet_inputs import INPUT_NAMES

# B=batch, C=choices, N=rows the backbone reads (B or B*C), S=sequence,
# H=d_model, K=classes, L=labels

# Added to the span logits of padding positions (float32 logits, as the
# original's p_mask: `logits * (1 - p_mask) - 1e30 * p_mask`).
PADDING_LOGIT = -1e30


def _inputs(rank):
    """The three int32 inputs: `(B, S)`, or `(B, C, S)` when `rank` is 3."""
    shape = (None,) * (rank - 1)
    return {name: keras.Input(shape=shape, dtype="int32", name=name) for name in INPUT_NAMES}


def _backbone_inputs(rows):
    """The backbone's inputs: its `input_mask` is float (1 = padding)."""
    return {**rows, "input_mask": keras.ops.cast(rows["input_mask"], "float32")}


def _head_initializer(backbone):
    """N(0, initializer_range), as the original's `get_initializer()` and transformers'."""
    return keras.initializers.RandomNormal(stddev=backbone.initializer_range)


def _check_backbone(backbone):
    if not isinstance(backbone, XLNetBackbone):
        raise ValueError(f"`backbone` must be an XLNetBackbone. Received: {type(backbone).__name__}.")
    config = backbone.xlnet_config
    if backbone.two_stream or config.uses_memory or config.bi_data:
        raise ValueError(
            "Fine-tuning reads whole rows with the content stream only: the backbone must have "
            "two_stream=False, no memory and bi_data=False (e.g. `load_xlnet_checkpoint(folder, "
            "mem_len=None, reuse_len=None, bi_data=False)`). Received: two_stream="
            f"{backbone.two_stream}, mem_len={config.mem_len}, bi_data={config.bi_data}.")


def _check_dropout(dropout):
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(f"`dropout` must be a number in [0, 1). Received: dropout={dropout!r}.")


def _check_count(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}. Received: {name}={value!r}.")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class XLNetSequenceSummary(NamedConfig, keras.layers.Layer):
    """A row's summary: its last state, Dense(H) + tanh, dropout.

    The original `summarize_sequence(summary_type="last", use_proj=True)`
    and transformers' `XLNetSequenceSummary`: in XLNet's layout (left
    padding, `<cls>` last) the last position is always `<cls>`, which has
    attended to the whole row.

    Args:
        d_model: int. Width of the states (H).
        dropout: float. Dropout after the tanh (`summary_last_dropout`).
        initializer_range: float. Stddev of the Dense kernel's normal init.

    Call arguments:
        sequence_output: float `(N, S, H)`.
        training: bool.

    Returns:
        `(N, H)`.

    Example:
    >>> layer = XLNetSequenceSummary(12)
    >>> layer(np.ones((3, 7, 12))).shape
    TensorShape([3, 12])
    """

    config_names = ("d_model", "dropout", "initializer_range")

    def __init__(self, d_model, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        _check_count("d_model", d_model, 1)
        _check_dropout(dropout)
        self.d_model = d_model
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.summary = keras.layers.Dense(
            d_model, activation="tanh",
            kernel_initializer=keras.initializers.RandomNormal(stddev=initializer_range),
            dtype=self.dtype_policy, name="summary")
        self.summary_dropout = FastDropout(dropout, dtype=self.dtype_policy,
                                           name="summary_dropout")

    def build(self, sequence_output_shape):
        self.summary.build((None, self.d_model))
        self.built = True

    def call(self, sequence_output, training=None):
        last = sequence_output[:, -1]  # (N, H), <cls> in XLNet's layout
        return self.summary_dropout(self.summary(last), training=training)

    def compute_output_shape(self, sequence_output_shape):
        return (sequence_output_shape[0], self.d_model)


class XLNetTaskModel(TaskModel):
    """An `XLNetBackbone` plus a small task layer, as a functional Keras model.

    Subclasses build the graph in `__init__` and keep their constructor
    arguments as attributes of the same names (`get_config` returns them).
    """

    # Constructor arguments besides `backbone`, for `get_config`.
    config_names = ()
    # The SavedModel output name of a single-tensor output.
    output_name = "logits"

    def call(self, inputs, training=None, mask=None):
        rank = len(self.input["input_word_ids"].shape)
        shape = "(batch, choices, seq_length)" if rank == 3 else "(batch, seq_length)"
        if not isinstance(inputs, dict) or sorted(inputs) != sorted(INPUT_NAMES):
            received = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(f"{type(self).__name__} takes a dict with keys {list(INPUT_NAMES)}, "
                             f"each int32 {shape}. Received: {received}.")
        for name in INPUT_NAMES:
            if len(inputs[name].shape) != rank:
                raise ValueError(f"`{name}` must have rank {rank}, {shape}. "
                                 f"Received shape={tuple(inputs[name].shape)}.")
        # The backbone checks dtypes, shapes, id ranges and the 0/1 mask.
        return super().call(inputs, training=training, mask=mask)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class XLNetClassifier(ClassifierDefaults, XLNetTaskModel):
    """Classification and regression from the sequence summary (GLUE).

    As the original `get_classification_loss` / `get_regression_loss` and
    transformers' `XLNetForSequenceClassification`: `XLNetSequenceSummary`
    (last state, Dense(H) + tanh, dropout) and a Dense layer to
    `num_classes` logits; `num_classes=1` is a regressor (STS-B, mean
    squared error).

    Args:
        backbone: `XLNetBackbone` (content stream, no memory).
        num_classes: int. Classes, or 1 for regression.
        dropout: float. Dropout on the summary (the backbone's `dropout`
            when None, as the original's one `FLAGS.dropout`).

    Call arguments:
        inputs: dict of int32 `(B, S)` `input_word_ids`, `input_type_ids`,
            `input_mask` (1 = padding) in XLNet's layout (`xlnet_inputs`).

    Returns:
        float32 logits `(B, K)`, or scores `(B,)` when `num_classes=1`.

    Example:
    >>> backbone = XLNetBackbone.from_config_object(xlnet_preset("xlnet_debug"))
    >>> model = XLNetClassifier(backbone, num_classes=3)
    >>> model.compile()  # cross-entropy + accuracy
    """

    config_names = ("num_classes", "dropout")

    def __init__(self, backbone, num_classes, dropout=None, **kwargs):
        _check_backbone(backbone)
        _check_count("num_classes", num_classes, 1)
        if dropout is None:
            dropout = backbone.dropout
        _check_dropout(dropout)
        # === Layers ===
        self.backbone = backbone
        self.sequence_summary = XLNetSequenceSummary(
            backbone.d_model, dropout, backbone.initializer_range, dtype=backbone.dtype_policy,
            name="sequence_summary")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=_head_initializer(backbone),
            dtype="float32",  # logits in float32 under mixed precision
            name="logits")
        # === Functional graph ===
        inputs = _inputs(2)  # (B, S)
        sequence = backbone(_backbone_inputs(inputs))["sequence_output"]  # (B, S, H)
        logits = self.output_dense(self.sequence_summary(sequence))  # (B, K)
        if num_classes == 1:
            logits = keras.ops.squeeze(logits, axis=-1)  # (B,)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class XLNetMultipleChoice(ChoiceDefaults, XLNetTaskModel):
    """One score per choice, softmax over the choices (SWAG; RACE in the paper).

    Each choice is one row `context <sep> choice_k <sep> <cls>`
    (`xlnet_inputs.multiple_choice_inputs`); its summary and a Dense layer
    to one unit score it, as the original `get_race_loss` and transformers'
    `XLNetForMultipleChoice`. Any number of choices.

    Args:
        backbone: `XLNetBackbone` (content stream, no memory).
        dropout: float. Dropout on the summary (the backbone's when None).

    Call arguments:
        inputs: dict of int32 `(B, C, S)` `input_word_ids`,
            `input_type_ids`, `input_mask`.

    Returns:
        float32 logits `(B, C)`.

    Example:
    >>> model = XLNetMultipleChoice(backbone)
    >>> model.compile()
    """

    config_names = ("dropout",)

    def __init__(self, backbone, dropout=None, **kwargs):
        _check_backbone(backbone)
        if dropout is None:
            dropout = backbone.dropout
        _check_dropout(dropout)
        # === Layers ===
        self.backbone = backbone
        self.fold = FoldRows(name="fold_choices")
        self.unfold = UnfoldScores(name="unfold_choices")
        self.sequence_summary = XLNetSequenceSummary(
            backbone.d_model, dropout, backbone.initializer_range, dtype=backbone.dtype_policy,
            name="sequence_summary")
        self.output_dense = keras.layers.Dense(
            1, kernel_initializer=_head_initializer(backbone), dtype="float32",
            name="choice_score")
        # === Functional graph ===
        inputs = _inputs(3)  # (B, C, S)
        rows = {name: self.fold(x) for name, x in inputs.items()}  # (B*C, S)
        sequence = backbone(_backbone_inputs(rows))["sequence_output"]  # (B*C, S, H)
        scores = self.output_dense(self.sequence_summary(sequence))  # (B*C, 1)
        logits = self.unfold(scores, inputs["input_word_ids"])  # (B, C)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        # === Config ===
        self.dropout = dropout


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class XLNetQuestionAnswerer(SpanDefaults, XLNetTaskModel):
    """Start and end logits over every position (SQuAD).

    Dense(2) on the sequence output, split into start and end logits
    (transformers' `XLNetForQuestionAnsweringSimple`); padding positions
    get -1e30, so neither the loss nor decoding can pick them. Rows are
    `paragraph <sep> question <sep> <cls>` (`xlnet_inputs`); the last
    position, `<cls>`, is the "no answer" target (SQuAD v2.0 and windows
    that miss the answer), as the original `run_squad.py`'s `cls_index`.
    The loss is the mean of the two cross-entropies, as BERT's.

    Args:
        backbone: `XLNetBackbone` (content stream, no memory).

    Call arguments:
        inputs: dict of int32 `(B, S)` `input_word_ids`, `input_type_ids`,
            `input_mask`.

    Returns:
        dict of float32 `start_logits` and `end_logits`, each `(B, S)`.

    Example:
    >>> model = XLNetQuestionAnswerer(backbone)
    >>> model.compile()
    """

    def __init__(self, backbone, **kwargs):
        _check_backbone(backbone)
        # === Layers ===
        self.backbone = backbone
        self.span_dense = keras.layers.Dense(
            2, kernel_initializer=_head_initializer(backbone), dtype="float32",
            name="span_logits")
        # === Functional graph ===
        inputs = _inputs(2)  # (B, S)
        sequence = backbone(_backbone_inputs(inputs))["sequence_output"]  # (B, S, H)
        logits = self.span_dense(sequence)  # (B, S, 2)
        padding = keras.ops.expand_dims(keras.ops.equal(inputs["input_mask"], 1), -1)  # (B, S, 1)
        logits = keras.ops.where(padding, PADDING_LOGIT, logits)  # (B, S, 2)
        outputs = {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}  # (B, S) each
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class XLNetTokenTagger(TaggerDefaults, XLNetTaskModel):
    """Dense on every token's state (CoNLL NER).

    transformers' `XLNetForTokenClassification` (the backbone's output
    dropout is the only dropout). As for BERT (Sec. 5.3), each word's label
    sits on its first piece with sample weight 1 (`training/tasks/conll.py`, moved
    into XLNet's layout by `xlnet_inputs.from_bert_layout`), and the loss is
    the weighted mean over them.

    Args:
        backbone: `XLNetBackbone` (content stream, no memory).
        num_labels: int. Tag set size (L).

    Call arguments:
        inputs: dict of int32 `(B, S)` `input_word_ids`, `input_type_ids`,
            `input_mask`.

    Returns:
        float32 logits `(B, S, L)`.

    Example:
    >>> model = XLNetTokenTagger(backbone, num_labels=9)
    >>> model.compile()
    """

    config_names = ("num_labels",)

    def __init__(self, backbone, num_labels, **kwargs):
        _check_backbone(backbone)
        _check_count("num_labels", num_labels, 2)
        # === Layers ===
        self.backbone = backbone
        self.output_dense = keras.layers.Dense(
            num_labels, kernel_initializer=_head_initializer(backbone), dtype="float32",
            name="logits")
        # === Functional graph ===
        inputs = _inputs(2)  # (B, S)
        sequence = backbone(_backbone_inputs(inputs))["sequence_output"]  # (B, S, H)
        logits = self.output_dense(sequence)  # (B, S, L)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        # === Config ===
        self.num_labels = num_labels
