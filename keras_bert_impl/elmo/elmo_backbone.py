"""`ElmoBackbone`: ELMo's biLM (char CNN + forward and backward LSTMP stacks)."""

import keras
import numpy as np

from keras_bert_impl.base.backbone import backbone_config
from keras_bert_impl.base.backbone import dtype_policy_of
from keras_bert_impl.base.backbone import keep_config
from keras_bert_impl.elmo.character_encoder import CharacterEncoder
from keras_bert_impl.elmo.elmo_config import ElmoConfig
from keras_bert_impl.elmo.elmo_lstm_stack import ElmoLstmStack

# B=batch, T=tokens (boundaries included), C=characters per token,
# P=projection, L=LSTM layers

INPUT_NAME = "char_ids"


def check_char_ids(char_ids, config):
    """Clear `ValueError`s for character ids ELMo would get silently wrong:
    an integer dtype, rank 3 `(B, T, C)` with C = `max_characters_per_token`,
    and concrete ids in `[0, n_characters)`."""
    dtype = keras.backend.standardize_dtype(char_ids.dtype)
    if "int" not in dtype:
        raise ValueError(
            f"`{INPUT_NAME}` must be an integer tensor (int32). Received dtype={dtype}.")
    shape = tuple(char_ids.shape)
    if len(shape) != 3 or shape[-1] not in (None, config.max_characters_per_token):
        raise ValueError(
            f"`{INPUT_NAME}` must have shape (batch, tokens, {config.max_characters_per_token}) "
            f"(max_characters_per_token). Received shape={shape}.")
    if isinstance(char_ids, np.ndarray) or hasattr(char_ids, "numpy"):
        values = np.asarray(char_ids)
        if values.size and (values.min() < 0 or values.max() >= config.n_characters):
            raise ValueError(
                f"`{INPUT_NAME}` must lie in [0, {config.n_characters}) (n_characters; 0 is "
                f"padding). Received values in [{values.min()}, {values.max()}]; build them "
                "with `batch_char_ids`.")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ElmoBackbone(keras.Model):
    """ELMo's bidirectional language model (Peters et al. 2018), as bilm-tf.

    A `CharacterEncoder` turns each token's character ids into a vector x
    (`token_embedding`); two separate `ElmoLstmStack`s of L LSTMP layers
    read it left to right (`forward_lstm`) and right to left
    (`backward_lstm`). A token is real when any of its ids is nonzero;
    rows are right-padded with all-zero tokens, which never reach the
    backward direction first and give zero outputs. Inputs are whole
    sentences with `<S>` / `</S>` (as `batch_char_ids` makes them); the
    outputs keep those boundary tokens (`remove_sentence_boundaries` drops
    them, as bilm-tf's `lm_embeddings`).

    For LM training, `forward_output[t]` predicts token t + 1 and
    `backward_output[t]` token t - 1 through one shared softmax (bilm-tf
    also applies `dropout` to both before it: the LM head's job). In
    training the stacks drop `dropout` of each LSTM layer's input.

    Stateful mode (`max_batch_size=N`), for bilm-tf's inference protocol:
    each batch row b < N carries its LSTM states (both directions, every
    layer) from one call to the next, as bilm-tf's `BidirectionalLanguageModel(
    max_batch_size=N)`; a call with B < N rows leaves rows B.. untouched;
    `reset_states()` zeros them all. The states are non-trainable
    variables of the stacks (so they appear in `weights`, not in
    `trainable_weights`). Default `None`: stateless, every call starts
    from zero states (sentence at a time).

    Arguments are `ElmoConfig`'s fields (bilm-tf's `options.json`);
    build one from a config with `ElmoBackbone.from_config_object(config)`.

    Args:
        filters: list of `(width, count)` char CNN filters.
        n_highway: int. Highway layers.
        projection_dim: int. Token embedding and LSTM output width (P).
        lstm_dim: int. LSTM cell size.
        n_layers: int. LSTM layers per direction (L).
        char_embedding_dim: int. Character embedding width.
        activation: str. "relu" or "tanh" (char CNN).
        max_characters_per_token: int. C.
        n_characters: int. 262.
        cell_clip: float or None.
        proj_clip: float or None.
        use_skip_connections: bool. Residual on LSTM layers 2.. .
        dropout: float. Dropout on each LSTM layer's input in training.
        max_batch_size: int or None. Stateful rows; None: stateless.
        dtype: str or `keras.DTypePolicy`.

    Call arguments:
        char_ids: int32 `(B, T, C)` (or a dict with that one key).

    Returns:
        dict: `token_embedding` `(B, T, P)`; `lstm_outputs` list of L
        `(B, T, 2P)` `[forward; backward]`; `lm_embeddings` list of L + 1
        `(B, T, 2P)`, layer 0 `[x; x]` then `lstm_outputs` (ELMo's layers
        for a `ScalarMix`); `forward_output`, `backward_output` `(B, T, P)`
        (the top layer of each direction); `mask` bool `(B, T)`. Padded
        tokens are 0 everywhere.

    Example:
    >>> backbone = ElmoBackbone.from_config_object(elmo_preset("elmo_tiny"))
    >>> out = backbone(batch_char_ids([["Hello", "world", "!"]]))
    >>> out["lm_embeddings"][2].shape
    TensorShape([1, 5, 128])
    """

    def __init__(
        self,
        filters,
        n_highway,
        projection_dim,
        lstm_dim,
        n_layers,
        char_embedding_dim=16,
        activation="relu",
        max_characters_per_token=50,
        n_characters=262,
        cell_clip=None,
        proj_clip=None,
        use_skip_connections=False,
        dropout=0.1,
        max_batch_size=None,
        dtype=None,
        **kwargs,
    ):
        config = ElmoConfig(
            filters=filters,
            n_highway=n_highway,
            projection_dim=projection_dim,
            lstm_dim=lstm_dim,
            n_layers=n_layers,
            char_embedding_dim=char_embedding_dim,
            activation=activation,
            max_characters_per_token=max_characters_per_token,
            n_characters=n_characters,
            cell_clip=cell_clip,
            proj_clip=proj_clip,
            use_skip_connections=use_skip_connections,
            dropout=dropout,
        )  # validates every value
        policy = dtype_policy_of(dtype)
        self._create_layers(config, max_batch_size, policy)
        char_ids = keras.Input(
            shape=(None, max_characters_per_token), dtype="int32", name=INPUT_NAME)
        super().__init__(inputs=char_ids, outputs=self._graph_outputs(char_ids, policy), **kwargs)
        keep_config(self, policy, "elmo_config", config,
                    {"max_batch_size": max_batch_size, **config.backbone_kwargs()})

    def _create_layers(self, config, max_batch_size, policy):
        self.character_encoder = CharacterEncoder(
            config.filters,
            config.n_highway,
            config.projection_dim,
            char_embedding_dim=config.char_embedding_dim,
            activation=config.activation,
            n_characters=config.n_characters,
            dtype=policy,
            name="character_encoder",
        )
        stacks = {}
        for direction in ("forward", "backward"):
            stacks[direction] = ElmoLstmStack(
                config.n_layers,
                config.lstm_dim,
                config.projection_dim,
                cell_clip=config.cell_clip,
                proj_clip=config.proj_clip,
                use_skip_connections=config.use_skip_connections,
                dropout=config.dropout,
                go_backwards=direction == "backward",
                max_batch_size=max_batch_size,
                dtype=policy,
                name=f"{direction}_lstm",
            )
        self.forward_lstm = stacks["forward"]
        self.backward_lstm = stacks["backward"]

    def _graph_outputs(self, char_ids, policy):
        """The functional graph: the char CNN, then both LSTM stacks."""
        mask = keras.ops.any(keras.ops.not_equal(char_ids, 0), axis=-1)  # (B, T)
        keep = keras.ops.cast(mask, policy.compute_dtype)[:, :, None]  # (B, T, 1)
        x = self.character_encoder(char_ids) * keep  # (B, T, P)
        forward = self.forward_lstm(x, mask)  # L x (B, T, P)
        backward = self.backward_lstm(x, mask)  # L x (B, T, P)
        lstm_outputs = [keras.ops.concatenate([f, b], axis=-1)  # (B, T, 2P)
                        for f, b in zip(forward, backward)]
        return {
            "token_embedding": x,
            "lstm_outputs": lstm_outputs,
            "lm_embeddings": [keras.ops.concatenate([x, x], axis=-1), *lstm_outputs],
            "forward_output": forward[-1],
            "backward_output": backward[-1],
            "mask": mask,
        }

    @classmethod
    def from_config_object(cls, config, **kwargs):
        """A backbone of the shape an `ElmoConfig` describes."""
        return cls(**config.backbone_kwargs(), **kwargs)

    def reset_states(self):
        """Zeros the kept LSTM states (stateful mode; no-op when stateless)."""
        self.forward_lstm.reset_states()
        self.backward_lstm.reset_states()

    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict):
            if set(inputs) != {INPUT_NAME}:
                raise ValueError(
                    f"ELMo inputs must be a tensor or a dict with the one key {INPUT_NAME!r}. "
                    f"Received keys: {sorted(inputs)}.")
            inputs = inputs[INPUT_NAME]
        check_char_ids(inputs, self.elmo_config)
        return super().call(inputs, training=training, mask=mask)

    def get_config(self):
        return backbone_config(self, {**self.elmo_config.backbone_kwargs(),
                                      "max_batch_size": self.max_batch_size})

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def remove_sentence_boundaries(tensor, mask):
    """Drops each row's `<S>` and `</S>` (first and last real token).

    bilm-tf's `lm_embeddings` are computed this way: sentence k of the
    batch, n_k real tokens including both boundaries, gives n_k - 2 rows.

    Args:
        tensor: `(B, T, ...)` backbone output.
        mask: bool `(B, T)`, the backbone's `mask`.

    Returns:
        `(tensor (B, T - 2, ...), mask (B, T - 2))`; 0 where the new mask
        is False.
    """
    lengths = keras.ops.sum(keras.ops.cast(mask, "int32"), axis=1)[:, None] - 2  # (B, 1)
    steps = keras.ops.arange(keras.ops.shape(tensor)[1] - 2, dtype="int32")[None, :]  # (1, T-2)
    new_mask = steps < lengths  # (B, T - 2)
    inner = tensor[:, 1:-1]  # (B, T - 2, ...)
    keep = keras.ops.reshape(keras.ops.cast(new_mask, inner.dtype),
                             (*keras.ops.shape(new_mask), *([1] * (len(inner.shape) - 2))))
    return inner * keep, new_mask
