"""ELMo as features: task models on a frozen biLM (Peters et al. 2018, Sec. 3.3).

Over 400 lines: one class per task head, with the layers they share, kept
together so the family's task models read as one list.

The paper's way of using ELMo: the pretrained biLM is fixed, a task model
reads `ELMo_k = gamma * sum_j s_j h_{k,j}` (a `ScalarMix` over the biLM's
L + 1 layers, learned with the task) and the task's own network does the
rest. The BERT paper compares against it this way (Sec. 5.3: feature-based
NER; GLUE's BiLSTM + ELMo baselines).

- The biLM (`ElmoBackbone`) is frozen (`trainable = False`) and runs in
  inference mode, without its dropout, whatever `fit` says, as bilm-tf's
  inference graph: its layers reach the task model through `_FrozenBiLm`,
  whose call has no `training` argument (Keras passes a functional model's
  `training` to every layer that takes one, a frozen one too).
- `<S>` and `</S>` are dropped (bilm-tf's `lm_embeddings` drop them), then
  `ScalarMix` mixes the L + 1 layers with bilm-tf's `weight_layers`
  defaults as the paper tuned them: no layer norm, `l2_coef` 0.001 on `w`
  (the paper's Table 2: lambda = 0.001 beats lambda = 1; bilm-tf's usage
  example passes 0.0). The L2 term reaches `fit` through `model.losses`.
- The task network is a 2-layer BiLSTM on the mixed vectors (`lstm_units`
  per direction): per word, a Dense layer tags (`ElmoTokenTagger`, the
  BERT paper's feature-based CoNLL setup: two BiLSTM layers, then the
  classifier); max-pooled over the words, an MLP with one tanh hidden
  layer classifies one sentence (`ElmoClassifier`) or a pair encoded
  sentence by sentence and combined as `[u; v; |u - v|; u * v]`
  (`ElmoPairClassifier`, the GLUE paper's BiLSTM baselines, Wang et al.
  2018, Sec. 5, after InferSent).

Inputs are ELMo character ids of whole words (`batch_char_ids`: each row
`<S> words </S>`, right-padded with all-zero tokens): `char_ids`
`(B, T, C)`, or `(B, 2, T, C)` for pairs.
"""

import keras

from keras_bert_impl.base.classifier_defaults import ClassifierDefaults
from keras_bert_impl.base.task_defaults import TaggerDefaults
from keras_bert_impl.base.task_model import TaskModel
from keras_bert_impl.elmo.elmo_backbone import INPUT_NAME
from keras_bert_impl.elmo.elmo_backbone import ElmoBackbone
from keras_bert_impl.elmo.elmo_backbone import remove_sentence_boundaries
from keras_bert_impl.layers.scalar_mix import ScalarMix

# B=batch, T=tokens of a row (<S> and </S> included), W=T-2 words, C=characters
# per token, J=biLM layers mixed (L + 1), D=2P (ELMo's width), U=head LSTM units
# per direction, K=classes or labels

# bilm-tf's `weight_layers` options, as the paper tuned them (see above).
DEFAULT_L2_COEF = 0.001
DEFAULT_LSTM_UNITS = 128  # CPU-sized; the BERT paper's feature-based NER: 768
DEFAULT_HIDDEN_UNITS = 512  # the GLUE baselines' MLP


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}.")


def _check_head(backbone, lstm_units, dropout, l2_coef):
    if not isinstance(backbone, ElmoBackbone):
        raise ValueError(
            f"`backbone` must be an `ElmoBackbone`. Received: {type(backbone).__name__}.")
    if backbone.max_batch_size is not None:
        raise ValueError(
            "ELMo task models read a stateless biLM (each sentence from zero states); this "
            f"backbone is stateful (max_batch_size={backbone.max_batch_size}). Build it with "
            "max_batch_size=None.")
    _positive_int("lstm_units", lstm_units)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(f"`dropout` must be a number in [0, 1). Received: dropout={dropout!r}.")
    if isinstance(l2_coef, bool) or not isinstance(l2_coef, (int, float)) or l2_coef < 0:
        raise ValueError(f"`l2_coef` must be a number >= 0. Received: l2_coef={l2_coef!r}.")


class _FrozenBiLm(keras.layers.Layer):
    """The biLM's J layers for each row's words, in inference mode.

    Its `call` has no `training` argument, so a fit's `training=True` never
    reaches the biLM (its LSTM input dropout stays off); the outputs carry
    no gradient. Not serialized on its own: the task model rebuilds it from
    its `backbone`.

    Call arguments:
        char_ids: int32 `(B, T, C)`.

    Returns:
        `(layers, mask)`: J float `(B, W, D)` (bilm-tf's `lm_embeddings`,
        `<S>` / `</S>` dropped, 0 after each row's words) and bool `(B, W)`.
    """

    def __init__(self, backbone, **kwargs):
        super().__init__(**kwargs)
        self.backbone = backbone

    def call(self, char_ids):
        out = self.backbone(char_ids, training=False)
        layers = []
        for layer in out["lm_embeddings"]:  # (B, T, D) each
            words, mask = remove_sentence_boundaries(layer, out["mask"])  # (B, W, D), (B, W)
            layers.append(keras.ops.stop_gradient(words))
        return layers, mask


class _FoldPairs(keras.layers.Layer):
    """`(B, 2, T, C)` -> `(2B, T, C)`: rows a_0, b_0, a_1, b_1, ..."""

    def call(self, x):
        shape = keras.ops.shape(x)
        return keras.ops.reshape(x, (-1, shape[2], shape[3]))  # (2B, T, C)

    def compute_output_spec(self, x):
        return keras.KerasTensor((None, *x.shape[2:]), dtype=x.dtype)  # int ids stay int


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MaskedMaxPooling(keras.layers.Layer):
    """The maximum of each feature over a row's real positions.

    Padding never wins the max; a row with no real position (an empty
    text) gives zeros.

    Call arguments:
        x: float `(B, W, H)`.
        mask: bool `(B, W)`.

    Returns:
        `(B, H)`.

    Example:
    >>> MaskedMaxPooling()(np.ones((3, 7, 5)), np.ones((3, 7), bool)).shape
    TensorShape([3, 5])
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True  # reads the mask; its output has none

    def call(self, x, mask):
        keep = keras.ops.cast(mask, "bool")  # (B, W)
        lowest = keras.ops.full_like(x, float("-inf"))
        pooled = keras.ops.max(keras.ops.where(keep[:, :, None], x, lowest), axis=1)  # (B, H)
        any_word = keras.ops.any(keep, axis=1)[:, None]  # (B, 1)
        return keras.ops.where(any_word, pooled, keras.ops.zeros_like(pooled))

    def compute_output_shape(self, x_shape, mask_shape=None):
        return (x_shape[0], x_shape[2])

    def compute_mask(self, x, mask=None):
        return None


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class SentencePairFeatures(keras.layers.Layer):
    """`[u; v; |u - v|; u * v]` of each pair's two sentence vectors.

    The GLUE paper's sentence-pair baselines (Wang et al. 2018, Sec. 5),
    after InferSent (Conneau et al. 2017): both sentences encoded alone,
    then compared feature by feature.

    Call arguments:
        vectors: float `(2B, H)`, rows a_0, b_0, a_1, b_1, ... (as
            `(B, 2, ...)` inputs fold).

    Returns:
        `(B, 4H)`.

    Example:
    >>> SentencePairFeatures()(np.ones((6, 5))).shape
    TensorShape([3, 20])
    """

    def call(self, vectors):
        pairs = keras.ops.reshape(vectors, (-1, 2, vectors.shape[-1]))  # (B, 2, H)
        u, v = pairs[:, 0], pairs[:, 1]  # (B, H) each
        return keras.ops.concatenate([u, v, keras.ops.abs(u - v), u * v], axis=-1)  # (B, 4H)

    def compute_output_shape(self, vectors_shape):
        return (None, 4 * vectors_shape[-1])


def _char_ids_input(backbone, rank):
    """`{"char_ids": (B, T, C)}`, or `(B, 2, T, C)` when `rank` is 4."""
    shape = (None, backbone.max_characters_per_token) if rank == 3 else (
        2, None, backbone.max_characters_per_token)
    return {INPUT_NAME: keras.Input(shape=shape, dtype="int32", name=INPUT_NAME)}


class ElmoTaskModel(TaskModel):
    """A frozen `ElmoBackbone`, a `ScalarMix` and a BiLSTM task network.

    Subclasses build the graph in `__init__` (the shared part with
    `_build_encoder` / `_encode`) and keep their constructor arguments as
    attributes of the same names (`get_config` returns them). Only the
    mix and the task network train.
    """

    # Constructor arguments besides `backbone`, for `get_config`.
    config_names = ()
    # The SavedModel output name.
    output_name = "logits"

    def _build_encoder(self, backbone, lstm_units, dropout, l2_coef, do_layer_norm):
        backbone.trainable = False  # feature-based: the biLM's weights stay fixed
        self.backbone = backbone
        self.frozen_bilm = _FrozenBiLm(backbone, name="frozen_bilm")
        self.scalar_mix = ScalarMix(backbone.n_layers + 1, l2_coef=l2_coef,
                                    do_layer_norm=do_layer_norm, name="scalar_mix")
        self.elmo_dropout = keras.layers.Dropout(dropout, name="elmo_dropout")
        self.bilstms = [
            keras.layers.Bidirectional(
                keras.layers.LSTM(lstm_units, return_sequences=True), name=f"bilstm_{i}")
            for i in range(2)]
        self.bilstm_dropouts = [keras.layers.Dropout(dropout, name=f"bilstm_{i}_dropout")
                                for i in range(2)]

    def _encode(self, char_ids):
        """`(N, T, C)` char ids -> `(N, W, 2U)` BiLSTM states and their bool `(N, W)` mask."""
        layers, mask = self.frozen_bilm(char_ids)  # J x (N, W, D), (N, W)
        x = self.elmo_dropout(self.scalar_mix(layers, mask=mask))  # (N, W, D)
        for bilstm, dropout in zip(self.bilstms, self.bilstm_dropouts):
            x = dropout(bilstm(x, mask=mask))  # (N, W, 2U)
        return x, mask

    def call(self, inputs, training=None, mask=None):
        if not isinstance(inputs, dict):
            inputs = {INPUT_NAME: inputs}
        _check_char_ids(inputs, len(self.input[INPUT_NAME].shape),
                        self.backbone.max_characters_per_token)
        return super().call(inputs, training=training, mask=mask)


def _check_char_ids(inputs, rank, max_chars):
    if sorted(inputs) != [INPUT_NAME]:
        raise ValueError(f"ELMo task models take one input, {INPUT_NAME!r}. Received keys: "
                         f"{sorted(inputs)}.")
    char_ids = inputs[INPUT_NAME]
    layout = "(batch, tokens, chars)" if rank == 3 else "(batch, 2, tokens, chars)"
    if len(char_ids.shape) != rank or char_ids.shape[-1] not in (None, max_chars):
        raise ValueError(
            f"`{INPUT_NAME}` must have shape {layout} with chars = max_characters_per_token = "
            f"{max_chars}. Received shape={tuple(char_ids.shape)}.")
    # The backbone checks dtype and id ranges on the rows it reads.


def _classifier_head(model, num_classes, hidden_units, dropout):
    model.hidden = keras.layers.Dense(hidden_units, activation="tanh", name="hidden")
    model.hidden_dropout = keras.layers.Dropout(dropout, name="hidden_dropout")
    model.output_dense = keras.layers.Dense(
        num_classes, dtype="float32",  # logits in float32 under mixed precision
        name="logits")


def _check_num_classes(num_classes):
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(
            f"`num_classes` must be an integer >= 1 (1 = regression). Received: {num_classes!r}.")


class _ElmoClassifierBase(ClassifierDefaults, ElmoTaskModel):
    """The head both ELMo classifiers share; they train with Adam, as AllenNLP's configs."""

    config_names = ("num_classes", "lstm_units", "hidden_units", "dropout", "l2_coef",
                    "do_layer_norm")

    def _keep_config(self, backbone, num_classes, lstm_units, hidden_units, dropout, l2_coef,
                     do_layer_norm):
        """Checks the constructor arguments both classifiers take and keeps them."""
        _check_head(backbone, lstm_units, dropout, l2_coef)
        _check_num_classes(num_classes)
        _positive_int("hidden_units", hidden_units)
        self.num_classes = num_classes
        self.lstm_units = lstm_units
        self.hidden_units = hidden_units
        self.dropout = dropout
        self.l2_coef = l2_coef
        self.do_layer_norm = bool(do_layer_norm)

    def _logits(self, features):
        logits = self.output_dense(self.hidden_dropout(self.hidden(features)))  # (B, K)
        if self.num_classes == 1:
            logits = keras.ops.squeeze(logits, axis=-1)  # (B,)
        return logits

    default_optimizer = "adam"


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ElmoClassifier(_ElmoClassifierBase):
    """One sentence -> classes or a score, from frozen ELMo features.

    ELMo mix -> 2-layer BiLSTM -> max over the words -> tanh hidden layer
    -> Dense (the GLUE paper's single-sentence BiLSTM baseline with ELMo).

    Args:
        backbone: `ElmoBackbone` (stateless). Frozen by this model.
        num_classes: int. Classes, or 1 for regression.
        lstm_units: int. Units per direction of each BiLSTM layer (U).
        hidden_units: int. Width of the MLP's hidden layer.
        dropout: float. On the ELMo vectors, each BiLSTM's output and the
            hidden layer.
        l2_coef: float. `ScalarMix`'s L2 on its layer weights.
        do_layer_norm: bool. `ScalarMix` normalises each layer first.

    Call arguments:
        inputs: `{"char_ids": int32 (B, T, C)}` (`batch_char_ids`).

    Returns:
        float32 logits `(B, K)`, or scores `(B,)` when `num_classes=1`.

    Example:
    >>> backbone = ElmoBackbone.from_config_object(elmo_preset("elmo_tiny"))
    >>> model = ElmoClassifier(backbone, num_classes=2)
    >>> model.compile()  # cross-entropy + accuracy; the biLM does not train
    >>> model({"char_ids": batch_char_ids([["A", "fine", "film", "."]])}).shape
    TensorShape([1, 2])
    """

    def __init__(self, backbone, num_classes, lstm_units=DEFAULT_LSTM_UNITS,
                 hidden_units=DEFAULT_HIDDEN_UNITS, dropout=0.1, l2_coef=DEFAULT_L2_COEF,
                 do_layer_norm=False, **kwargs):
        # === Config ===
        self._keep_config(backbone, num_classes, lstm_units, hidden_units, dropout, l2_coef,
                          do_layer_norm)
        # === Layers ===
        self._build_encoder(backbone, lstm_units, dropout, l2_coef, do_layer_norm)
        self.pooling = MaskedMaxPooling(name="max_pooling")
        _classifier_head(self, num_classes, hidden_units, dropout)
        # === Functional graph ===
        inputs = _char_ids_input(backbone, 3)  # (B, T, C)
        states, mask = self._encode(inputs[INPUT_NAME])  # (B, W, 2U), (B, W)
        logits = self._logits(self.pooling(states, mask))  # (B, K)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ElmoPairClassifier(_ElmoClassifierBase):
    """A sentence pair -> classes or a score, from frozen ELMo features.

    Each sentence alone: ELMo mix -> 2-layer BiLSTM -> max over its words,
    giving u and v (the same weights for both); `[u; v; |u - v|; u * v]`
    -> tanh hidden layer -> Dense (the GLUE paper's sentence-pair BiLSTM
    baseline with ELMo, without its attention variant).

    Args: as `ElmoClassifier`'s (`num_classes=1` for regression, as STS-B).

    Call arguments:
        inputs: `{"char_ids": int32 (B, 2, T, C)}`: sentence a at `[:, 0]`,
            b at `[:, 1]`, each `<S> words </S>` padded to the same T.

    Returns:
        float32 logits `(B, K)`, or scores `(B,)` when `num_classes=1`.

    Example:
    >>> model = ElmoPairClassifier(backbone, num_classes=3)
    >>> a, b = batch_char_ids([["It", "rains", "."], ["It", "is", "dry", "."]])  # (6, 50) each
    >>> model({"char_ids": np.stack([a, b])[None]}).shape  # (1, 2, 6, 50)
    TensorShape([1, 3])
    """

    def __init__(self, backbone, num_classes, lstm_units=DEFAULT_LSTM_UNITS,
                 hidden_units=DEFAULT_HIDDEN_UNITS, dropout=0.1, l2_coef=DEFAULT_L2_COEF,
                 do_layer_norm=False, **kwargs):
        # === Config ===
        self._keep_config(backbone, num_classes, lstm_units, hidden_units, dropout, l2_coef,
                          do_layer_norm)
        # === Layers ===
        self.fold = _FoldPairs(name="fold_pairs")
        self._build_encoder(backbone, lstm_units, dropout, l2_coef, do_layer_norm)
        self.pooling = MaskedMaxPooling(name="max_pooling")
        self.pair_features = SentencePairFeatures(name="pair_features")
        _classifier_head(self, num_classes, hidden_units, dropout)
        # === Functional graph ===
        inputs = _char_ids_input(backbone, 4)  # (B, 2, T, C)
        rows = self.fold(inputs[INPUT_NAME])  # (2B, T, C)
        states, mask = self._encode(rows)  # (2B, W, 2U), (2B, W)
        features = self.pair_features(self.pooling(states, mask))  # (B, 8U)
        logits = self._logits(features)  # (B, K)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ElmoTokenTagger(TaggerDefaults, ElmoTaskModel):
    """One label per word (CoNLL NER) from frozen ELMo features.

    ELMo mix -> 2-layer BiLSTM -> Dense on every word: the BERT paper's
    feature-based CoNLL setup (Sec. 5.3: two BiLSTM layers before the
    classification layer; no CRF). The logits are laid out as the input's
    tokens, `(B, T, K)`, so that word j of a row (input position j + 1)
    has its logits at position j + 1: `<S>`, `</S>` and padding hold
    zeros, as `[CLS]` / `[SEP]` hold labels nobody reads in BERT's tagging
    layout (`training/tasks/conll.py` gives them sample weight 0).

    Args:
        backbone: `ElmoBackbone` (stateless). Frozen by this model.
        num_labels: int. Tag set size (K).
        lstm_units: int. Units per direction of each BiLSTM layer (U).
        dropout: float. On the ELMo vectors and each BiLSTM's output.
        l2_coef: float. `ScalarMix`'s L2 on its layer weights.
        do_layer_norm: bool. `ScalarMix` normalises each layer first.

    Call arguments:
        inputs: `{"char_ids": int32 (B, T, C)}` (`batch_char_ids`).

    Returns:
        float32 logits `(B, T, K)`.

    Example:
    >>> model = ElmoTokenTagger(backbone, num_labels=9)
    >>> model({"char_ids": batch_char_ids([["EU", "rejects", "German", "call"]])}).shape
    TensorShape([1, 6, 9])
    """

    config_names = ("num_labels", "lstm_units", "dropout", "l2_coef", "do_layer_norm")
    default_optimizer = "adam"

    def __init__(self, backbone, num_labels, lstm_units=DEFAULT_LSTM_UNITS, dropout=0.1,
                 l2_coef=DEFAULT_L2_COEF, do_layer_norm=False, **kwargs):
        _check_head(backbone, lstm_units, dropout, l2_coef)
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 2:
            raise ValueError(f"`num_labels` must be an integer >= 2. Received: {num_labels!r}.")
        # === Config ===
        self.num_labels = num_labels
        self.lstm_units = lstm_units
        self.dropout = dropout
        self.l2_coef = l2_coef
        self.do_layer_norm = bool(do_layer_norm)
        # === Layers ===
        self._build_encoder(backbone, lstm_units, dropout, l2_coef, do_layer_norm)
        self.output_dense = keras.layers.Dense(num_labels, dtype="float32", name="logits")
        # === Functional graph ===
        inputs = _char_ids_input(backbone, 3)  # (B, T, C)
        states, mask = self._encode(inputs[INPUT_NAME])  # (B, W, 2U), (B, W)
        logits = self.output_dense(states)  # (B, W, K)
        logits = logits * keras.ops.cast(mask, "float32")[:, :, None]  # 0 past the words
        logits = keras.ops.pad(logits, [[0, 0], [1, 1], [0, 0]])  # (B, T, K): <S> .. </S>
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
