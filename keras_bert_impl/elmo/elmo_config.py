"""`ElmoConfig`: ELMo's hyper-parameters, as bilm-tf's `options.json`.

Fields are the keys of bilm-tf's `options.json`, flattened: `char_cnn`'s
`embedding.dim` becomes `char_embedding_dim`, `lstm.dim` becomes
`lstm_dim`, every other key keeps its name. `from_options` / `to_options`
convert between the two, so a released `options.json` loads without
translation and ours loads in bilm-tf.
"""

import dataclasses

from keras_bert_impl.base.json_files import read_json_file
from keras_bert_impl.base.json_files import write_json_atomic
from keras_bert_impl.base.model_config import ModelConfig

# The activation after each char CNN filter's max-over-time. (The highway
# layers always use relu, whatever this says: bilm-tf's `high()` does.)
ACTIVATIONS = ("relu", "tanh")

# bilm-tf's inference models read 262 character ids: the 261 of training
# (256 UTF-8 bytes + 5 specials) shifted by one so that 0 is padding.
N_CHARACTERS = 262

# Keys of a bilm-tf training `options.json` that only its training loop
# reads (batching, softmax sampling, schedule). Dropped on load.
_TRAINING_KEYS = ("bidirectional", "batch_size", "unroll_steps", "n_epochs", "n_train_tokens",
                  "all_clip_norm_val", "n_negative_samples_batch", "sample_softmax",
                  "share_embedding_softmax")
_CHAR_CNN_KEYS = ("embedding", "filters", "n_highway", "activation", "max_characters_per_token",
                  "n_characters")
_LSTM_KEYS = ("dim", "projection_dim", "n_layers", "cell_clip", "proj_clip",
              "use_skip_connections")

# The char CNN of every published ELMo (2048 filters in all).
PUBLISHED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


def _checked_filters(filters):
    """`filters` as a tuple of `(width, count)` integer pairs, both >= 1."""
    try:
        checked = tuple((int(w), int(n)) for w, n in filters)
    except (TypeError, ValueError) as e:
        raise ValueError(
            "`filters` must be a sequence of (width, count) pairs of integers. "
            f"Received: filters={filters!r}.") from e
    if not checked or any(w < 1 or n < 1 for w, n in checked):
        raise ValueError(
            "`filters` must be a non-empty sequence of (width, count) pairs, both >= 1. "
            f"Received: filters={filters!r}.")
    return checked


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}.")


@dataclasses.dataclass(frozen=True)
class ElmoConfig(ModelConfig):
    """Hyper-parameters of an ELMo biLM (Peters et al. 2018), as bilm-tf.

    Args:
        filters: sequence of `(width, count)` pairs. One valid 1-D
            convolution over a token's characters per pair (F = sum of
            the counts).
        n_highway: int. Highway layers after the char CNN (0 for none).
        projection_dim: int. Width of the token embedding and of every
            LSTM output (P); the char CNN is projected to it when F != P.
        lstm_dim: int. LSTM cell size (U); h is projected to P when P < U.
        n_layers: int. LSTM layers per direction.
        char_embedding_dim: int. Width of a character's embedding.
        activation: str. "relu" or "tanh", after each filter's max.
        max_characters_per_token: int. Characters per token (C), the
            begin/end-of-word marks included.
        n_characters: int. Rows of the character table; 262 (bilm-tf's
            inference layout, 0 = padding).
        cell_clip: float or None. Cell state clipped to [-clip, clip].
        proj_clip: float or None. Projected h clipped likewise (only when
            there is a projection, as TF1's `LSTMCell`).
        use_skip_connections: bool. Residual around every LSTM layer but
            the first.
        dropout: float. Dropout on every LSTM layer's input in training
            (and, in the LM loss, on the top outputs).
        n_tokens_vocab: int or None. Rows of the LM softmax (the backbone
            has no softmax; the LM head reads this).
    """

    filters: tuple = PUBLISHED_FILTERS
    n_highway: int = 2
    projection_dim: int = 512
    lstm_dim: int = 4096
    n_layers: int = 2
    char_embedding_dim: int = 16
    activation: str = "relu"
    max_characters_per_token: int = 50
    n_characters: int = N_CHARACTERS
    cell_clip: float = 3.0
    proj_clip: float = 3.0
    use_skip_connections: bool = True
    dropout: float = 0.1
    n_tokens_vocab: int = None

    def __post_init__(self):
        filters = _checked_filters(self.filters)
        object.__setattr__(self, "filters", filters)
        for name in ("projection_dim", "lstm_dim", "n_layers", "char_embedding_dim",
                     "max_characters_per_token"):
            _positive_int(name, getattr(self, name))
        if isinstance(self.n_highway, bool) or not isinstance(self.n_highway, int) \
                or self.n_highway < 0:
            raise ValueError(
                f"`n_highway` must be an integer >= 0. Received: n_highway={self.n_highway!r}.")
        if self.n_tokens_vocab is not None:
            _positive_int("n_tokens_vocab", self.n_tokens_vocab)
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"`activation` must be one of {ACTIVATIONS}. Received: "
                f"activation={self.activation!r}.")
        if self.n_characters != N_CHARACTERS:
            raise ValueError(
                f"`n_characters` must be {N_CHARACTERS} (bilm-tf's inference layout: id 0 is "
                f"padding). Received: n_characters={self.n_characters!r}. A training "
                "options.json says 261; set 262 after training, as bilm-tf's README says.")
        widest = max(w for w, _ in filters)
        if widest > self.max_characters_per_token:
            raise ValueError(
                f"The widest filter ({widest}) exceeds `max_characters_per_token` "
                f"({self.max_characters_per_token}); a valid convolution needs at least "
                "as many characters as its width.")
        if self.max_characters_per_token < 3:
            raise ValueError(
                "`max_characters_per_token` must be >= 3 (begin-of-word, one character, "
                f"end-of-word). Received: {self.max_characters_per_token}.")
        if self.num_filters < self.projection_dim:
            raise ValueError(
                f"The char CNN's {self.num_filters} filters are fewer than "
                f"`projection_dim`={self.projection_dim}; bilm-tf only projects down.")
        if self.projection_dim > self.lstm_dim:
            raise ValueError(
                f"`projection_dim` ({self.projection_dim}) must be <= `lstm_dim` "
                f"({self.lstm_dim}); equal means no projection.")
        for name in ("cell_clip", "proj_clip"):
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                    raise ValueError(
                        f"`{name}` must be a positive number or None. Received: "
                        f"{name}={value!r}.")
                object.__setattr__(self, name, float(value))
        if not isinstance(self.use_skip_connections, bool):
            raise ValueError(
                "`use_skip_connections` must be a bool. Received: "
                f"use_skip_connections={self.use_skip_connections!r}.")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={self.dropout!r}.")

    @property
    def num_filters(self):
        """F: the width of the char CNN's output (sum of the filter counts)."""
        return sum(n for _, n in self.filters)

    @property
    def uses_lstm_projection(self):
        """True when h is projected from U to P (bilm-tf: P < U)."""
        return self.projection_dim < self.lstm_dim

    @property
    def uses_cnn_projection(self):
        """True when the char CNN output (F) is projected to P."""
        return self.num_filters != self.projection_dim

    def to_dict(self):
        """Plain, JSON-ready fields (filters as lists)."""
        values = dataclasses.asdict(self)
        values["filters"] = [list(f) for f in self.filters]
        return values

    @classmethod
    def from_dict(cls, values):
        return cls(**values)

    def backbone_kwargs(self):
        """The `ElmoBackbone` arguments: every field but `n_tokens_vocab`
        (the backbone reads characters and has no softmax)."""
        values = self.to_dict()
        del values["n_tokens_vocab"]
        return values

    @classmethod
    def from_options(cls, options, source="options"):
        """Builds a config from a bilm-tf `options.json` dict.

        Keys bilm-tf's training loop alone reads (`batch_size`,
        `unroll_steps`, `n_negative_samples_batch`, ...) are dropped;
        anything else unknown is an error naming it. Missing optional keys
        take bilm-tf's defaults (no highway, one layer, no clipping, no
        skip connections, dropout 0.1).
        """
        if not isinstance(options, dict):
            raise ValueError(f"{source} must be a JSON object. Received: {type(options).__name__}.")
        known = {"char_cnn", "lstm", "dropout", "n_tokens_vocab", *_TRAINING_KEYS}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"Unknown ELMo option keys in {source}: {unknown}.")
        if "char_cnn" not in options:
            raise ValueError(
                f"{source} has no `char_cnn`: a token-input biLM, which ElmoBackbone (a "
                "character-input model) cannot build.")
        if "lstm" not in options:
            raise ValueError(f"{source} has no `lstm` section.")
        cnn, lstm = options["char_cnn"], options["lstm"]
        for section, keys, name in ((cnn, _CHAR_CNN_KEYS, "char_cnn"),
                                    (lstm, _LSTM_KEYS, "lstm")):
            unknown = sorted(set(section) - set(keys))
            if unknown:
                raise ValueError(f"Unknown `{name}` keys in {source}: {unknown}.")
        for key in ("embedding", "filters", "max_characters_per_token", "n_characters"):
            if key not in cnn:
                raise ValueError(f"{source}: `char_cnn` lacks {key!r}.")
        for key in ("dim", "projection_dim"):
            if key not in lstm:
                raise ValueError(f"{source}: `lstm` lacks {key!r}.")
        return cls(
            filters=cnn["filters"],
            n_highway=cnn.get("n_highway") or 0,
            projection_dim=lstm["projection_dim"],
            lstm_dim=lstm["dim"],
            n_layers=lstm.get("n_layers", 1),
            char_embedding_dim=cnn["embedding"]["dim"],
            activation=cnn.get("activation", "relu"),
            max_characters_per_token=cnn["max_characters_per_token"],
            n_characters=cnn["n_characters"],
            cell_clip=lstm.get("cell_clip"),
            proj_clip=lstm.get("proj_clip"),
            use_skip_connections=bool(lstm.get("use_skip_connections", False)),
            dropout=options.get("dropout", 0.1),
            n_tokens_vocab=options.get("n_tokens_vocab"),
        )

    def to_options(self):
        """The bilm-tf `options.json` dict of this config."""
        options = {
            "char_cnn": {
                "activation": self.activation,
                "embedding": {"dim": self.char_embedding_dim},
                "filters": [list(f) for f in self.filters],
                "max_characters_per_token": self.max_characters_per_token,
                "n_characters": self.n_characters,
                "n_highway": self.n_highway,
            },
            "lstm": {
                "cell_clip": self.cell_clip,
                "dim": self.lstm_dim,
                "n_layers": self.n_layers,
                "proj_clip": self.proj_clip,
                "projection_dim": self.projection_dim,
                "use_skip_connections": self.use_skip_connections,
            },
            "dropout": self.dropout,
        }
        if self.n_tokens_vocab is not None:
            options["n_tokens_vocab"] = self.n_tokens_vocab
        return options

    @classmethod
    def from_options_file(cls, path):
        """Loads a bilm-tf `options.json`."""
        return cls.from_options(read_json_file(path), source=str(path))

    def to_options_file(self, path):
        """Writes a bilm-tf `options.json` atomically."""
        write_json_atomic(path, self.to_options())


ELMO_PRESETS = {
    # bilm-tf's published models (its README): 13.6M, 28.0M and 93.6M
    # parameters without the softmax.
    "elmo_small": ElmoConfig(n_highway=1, projection_dim=128, lstm_dim=1024),
    "elmo_medium": ElmoConfig(n_highway=1, projection_dim=256, lstm_dim=2048),
    "elmo_original": ElmoConfig(n_highway=2, projection_dim=512, lstm_dim=4096),
    # CPU-sized, same shape (256 filters, 1 highway, 256 -> 64 LSTMP).
    "elmo_tiny": ElmoConfig(filters=((1, 16), (2, 16), (3, 32), (4, 64), (5, 128)),
                            n_highway=1, projection_dim=64, lstm_dim=256),
}


def elmo_preset(name):
    """The `ElmoConfig` of a named preset (see `ELMO_PRESETS`)."""
    if name not in ELMO_PRESETS:
        raise ValueError(f"Unknown ELMo preset {name!r}. Available: {sorted(ELMO_PRESETS)}.")
    return ELMO_PRESETS[name]


def elmo_num_parameters(config):
    """Parameters of the biLM without its softmax (the backbone's weights).

    Counts the 262-row character table as bilm-tf's published numbers do:
    elmo_small 13,593,312, elmo_medium 28,027,744, elmo_original
    93,600,864.
    """
    e, f, p, u = config.char_embedding_dim, config.num_filters, config.projection_dim, \
        config.lstm_dim
    chars = config.n_characters * e
    cnn = sum(w * e * n + n for w, n in config.filters)
    highway = config.n_highway * 2 * (f * f + f)  # carry and transform
    cnn_projection = f * p + p if config.uses_cnn_projection else 0
    h = p if config.uses_lstm_projection else u  # width of the LSTM's h
    lstm_layer = (p + h) * 4 * u + 4 * u + (u * p if config.uses_lstm_projection else 0)
    return chars + cnn + highway + cnn_projection + 2 * config.n_layers * lstm_layer
