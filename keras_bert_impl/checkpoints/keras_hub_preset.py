"""keras-hub preset folders (`config.json`, `model.weights.h5`, ...), both ways.

A preset is what `keras_hub.models.BertBackbone(...).save_to_preset(folder)`
writes: `config.json` (the serialized backbone), `model.weights.h5`,
`metadata.json`, and with a tokenizer `tokenizer.json` plus
`assets/tokenizer/vocabulary.txt`; a task's `save_to_preset` adds
`task.json` and `task.weights.h5` (its head). keras-hub itself reads and
writes the files (`from_preset`, `save_to_preset`), so the layout is always
its own; this module only maps variables, by keras-hub's layer structure,
to the original Google names (`google_names`), which our model's variables
already have a map to. XLNet's converter (`keras_bert_impl.xlnet.
xlnet_keras_hub_preset`) uses the folder checks and the atomic write here.

keras-hub's `BertBackbone` computes the tanh form of GELU in every block
(also for the Hugging Face checkpoints it converts) and LayerNorm epsilon
1e-12; its `BertMaskedLM` head computes exact GELU and epsilon 1e-5. A
model read from a preset computes exactly that (`hidden_act="gelu_tanh"`,
the head's own settings), so its outputs equal keras-hub's.

keras-hub is imported inside the functions: it takes seconds to import and
nothing else in the package needs it.
"""

import collections
import os
import shutil
import tempfile

import keras
import numpy as np

from keras_bert_impl.bert_config import BertConfig
from keras_bert_impl.bert_config import read_json_file
from keras_bert_impl.checkpoints import google_names
from keras_bert_impl.file_modes import as_if_created
from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.bert_pretrainer import BertMaskedLMPretrainer
from keras_bert_impl.tokenizers.wordpiece import load_vocab

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
SHARDED_WEIGHTS_FILE = "model.weights.json"
METADATA_FILE = "metadata.json"
TASK_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = os.path.join("assets", "tokenizer", "vocabulary.txt")

BERT_BACKBONE = "keras_hub>BertBackbone"
BERT_MASKED_LM = "keras_hub>BertMaskedLM"
BERT_TOKENIZER = "keras_hub>BertTokenizer"
XLNET_BACKBONE = "keras_hub>XLNetBackbone"

# Which of our loaders reads a preset of each backbone, for the error that
# names the right one.
LOADERS = {
    BERT_BACKBONE: "keras_bert_impl.checkpoints.load_keras_hub_preset",
    XLNET_BACKBONE: "keras_bert_impl.xlnet.load_keras_hub_xlnet_preset",
}

# The keys keras-hub 0.32's `BertBackbone.get_config` writes. Any other key
# is a setting ours may not have (a later keras-hub's), so it is refused.
BERT_CONFIG_KEYS = frozenset((
    "name", "trainable", "dtype", "vocabulary_size", "num_layers", "num_heads",
    "hidden_dim", "intermediate_dim", "dropout", "max_sequence_length", "num_segments"))

# The sizes every keras-hub BERT and XLNet backbone config has (no default).
SIZE_KEYS = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim")

# Files and folders `save_to_preset` of a backbone, tokenizer, preprocessor
# or task writes; an existing folder holding anything else is not replaced.
_PRESET_FILES = frozenset((
    CONFIG_FILE, WEIGHTS_FILE, SHARDED_WEIGHTS_FILE, METADATA_FILE, TASK_FILE,
    TASK_WEIGHTS_FILE, TOKENIZER_FILE, "preprocessor.json", "README.md"))

KerasHubVocab = collections.namedtuple("KerasHubVocab",
                                       ("vocab_file", "lowercase", "strip_accents"))
KerasHubVocab.__doc__ = """The WordPiece vocabulary of a keras-hub BERT preset.

Fields:
    vocab_file: str. `assets/tokenizer/vocabulary.txt`, one token a line.
    lowercase: bool. keras-hub's `BertTokenizer(lowercase=...)`.
    strip_accents: bool. Its `strip_accents` (False unless set).
"""


def _contents(folder):
    """What a folder holds, for an error: "a, b/, c" (folders end in "/")."""
    names = sorted(os.listdir(folder))
    if not names:
        return "nothing (it is empty)"
    shown = [n + "/" if os.path.isdir(os.path.join(folder, n)) else n for n in names[:8]]
    return ", ".join(shown) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def read_preset_config(folder, expected, known_keys):
    """The parsed `config.json` of a keras-hub preset of class `expected`.

    Raises `ValueError` naming the folder and what it holds for a missing
    folder, a folder without `config.json` or weights, a Hugging Face
    folder, or a preset of another backbone (naming our loader for it);
    and naming the keys when the config has settings outside `known_keys`
    or lacks a size (checked before keras-hub sees them: it would fail on
    them less clearly, or a later keras-hub would build what ours cannot).

    Args:
        folder: str. The preset folder.
        expected: str. keras-hub's registered name, e.g.
            "keras_hub>BertBackbone".
        known_keys: the config keys the converter maps.
    """
    if not os.path.isdir(folder):
        what = "is a file" if os.path.exists(folder) else "does not exist"
        raise ValueError(f"{folder} {what}; expected a keras-hub preset folder "
                         f"({CONFIG_FILE}, {WEIGHTS_FILE}, ...).")
    path = os.path.join(folder, CONFIG_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{folder} is not a keras-hub preset: it has no {CONFIG_FILE} "
                         f"(it holds {_contents(folder)}).")
    values = read_json_file(path)
    if not isinstance(values, dict):
        raise ValueError(f"{path} holds no JSON object, so {folder} is not a keras-hub preset.")
    if "registered_name" not in values:
        if "model_type" in values:
            raise ValueError(
                f"{folder} is a Hugging Face model folder ({CONFIG_FILE} has model_type="
                f"{values['model_type']!r}), not a keras-hub preset; read it with "
                "keras_bert_impl.checkpoints.load_hf_checkpoint (BERT) or "
                "keras_bert_impl.xlnet.load_xlnet_checkpoint (XLNet).")
        raise ValueError(f"{folder} is not a keras-hub preset: its {CONFIG_FILE} has no "
                         "`registered_name` (keras-hub writes the serialized backbone there).")
    name = values["registered_name"]
    if name != expected:
        loader = LOADERS.get(name)
        hint = (f"read it with {loader}" if loader else
                f"only {', '.join(sorted(LOADERS))} presets are read")
        raise ValueError(
            f"{folder} holds a keras-hub {name} preset ({CONFIG_FILE} registered_name="
            f"{name!r}), not {expected}; {hint}.")
    if not isinstance(values.get("config"), dict):
        raise ValueError(f"{path} has no `config` object, so {folder} is not a keras-hub preset.")
    short = name.split(">")[-1]
    unknown = sorted(set(values["config"]) - set(known_keys))
    if unknown:
        raise ValueError(f"{path} has {short} settings ours cannot represent: {unknown}.")
    missing = [key for key in SIZE_KEYS if key not in values["config"]]
    if missing:
        raise ValueError(f"{path} lacks the {short} sizes {missing}.")
    weights = (WEIGHTS_FILE, SHARDED_WEIGHTS_FILE)  # one file, or the index of shards
    if not any(os.path.isfile(os.path.join(folder, f)) for f in weights):
        raise ValueError(f"{folder} has a {CONFIG_FILE} but no {WEIGHTS_FILE} (it holds "
                         f"{_contents(folder)}): a keras-hub preset without its weights.")
    return values


def _task_name(folder):
    """The registered name in `task.json`, or None when there is none."""
    path = os.path.join(folder, TASK_FILE)
    if not os.path.isfile(path):
        return None
    values = read_json_file(path)
    if not isinstance(values, dict) or "registered_name" not in values:
        raise ValueError(f"{path} is not a serialized keras-hub task (no `registered_name`).")
    return values["registered_name"]


def activation_name(function, where, names=("gelu", "gelu_tanh", "relu")):
    """Which of our activations `function` computes, by its values.

    keras-hub spells activations as functions, strings or its own helpers
    (`gelu_approximate`); comparing values on [-4, 4] names them whatever
    the spelling. Exact GELU and the tanh form differ by up to 1e-3 there,
    far above float32 rounding. `ValueError` names `where` when none fits.
    """
    x = np.linspace(-4.0, 4.0, 33, dtype=np.float32)
    got = keras.ops.convert_to_numpy(function(keras.ops.convert_to_tensor(x)))
    for name in names:
        want = keras.ops.convert_to_numpy(get_activation(name)(keras.ops.convert_to_tensor(x)))
        if np.allclose(got, want, rtol=0, atol=1e-6):
            return name
    raise ValueError(f"{where} computes an activation ours has not (ours: {list(names)}).")


def _one(values, what):
    """The one value of a per-layer setting; `ValueError` if layers differ."""
    values = list(values)
    if any(v != values[0] for v in values):
        raise ValueError(f"{what} differs between layers ({sorted(set(values))}); ours has one "
                         "value for every layer.")
    return values[0]


# === BERT: keras-hub variables <-> original Google names ===


def _heads_to_original(value):  # (H, N, D) -> (H, N*D); (N, D) -> (N*D,)
    return value.reshape(value.shape[0], -1) if value.ndim == 3 else value.reshape(-1)


def _output_to_original(value):  # (N, D, H) -> (N*D, H)
    return value.reshape(-1, value.shape[-1])


def _hub_bert_slots(hub_backbone, hub_head=None):
    """`[(original name, keras-hub variable, to_original)]` for every variable.

    keras-hub's attention keeps heads on their own axis (query kernel
    `(H, N, D)`, output kernel `(N, D, H)`); the original's are `(H, H)`
    with head n in columns `n*D:(n+1)*D`, which is a plain reshape (the
    layout keras-hub's own Hugging Face converter writes). Everything else
    has the original layout already.
    """
    same = None
    slots = [
        ("bert/embeddings/word_embeddings", hub_backbone.token_embedding.embeddings, same),
        ("bert/embeddings/position_embeddings",
         hub_backbone.position_embedding.position_embeddings, same),
        ("bert/embeddings/token_type_embeddings", hub_backbone.segment_embedding.embeddings, same),
        ("bert/embeddings/LayerNorm/gamma", hub_backbone.embeddings_layer_norm.gamma, same),
        ("bert/embeddings/LayerNorm/beta", hub_backbone.embeddings_layer_norm.beta, same),
    ]
    for i, block in enumerate(hub_backbone.transformer_layers):
        p = f"bert/encoder/layer_{i}/"
        attention = block._self_attention_layer
        for name, dense in (("query", attention.query_dense), ("key", attention.key_dense),
                            ("value", attention.value_dense)):
            slots += [(f"{p}attention/self/{name}/kernel", dense.kernel, _heads_to_original),
                      (f"{p}attention/self/{name}/bias", dense.bias, _heads_to_original)]
        slots += [
            (p + "attention/output/dense/kernel", attention.output_dense.kernel,
             _output_to_original),
            (p + "attention/output/dense/bias", attention.output_dense.bias, same),
            (p + "attention/output/LayerNorm/gamma", block._self_attention_layer_norm.gamma, same),
            (p + "attention/output/LayerNorm/beta", block._self_attention_layer_norm.beta, same),
            (p + "intermediate/dense/kernel", block._feedforward_intermediate_dense.kernel, same),
            (p + "intermediate/dense/bias", block._feedforward_intermediate_dense.bias, same),
            (p + "output/dense/kernel", block._feedforward_output_dense.kernel, same),
            (p + "output/dense/bias", block._feedforward_output_dense.bias, same),
            (p + "output/LayerNorm/gamma", block._feedforward_layer_norm.gamma, same),
            (p + "output/LayerNorm/beta", block._feedforward_layer_norm.beta, same),
        ]
    slots += [("bert/pooler/dense/kernel", hub_backbone.pooled_dense.kernel, same),
              ("bert/pooler/dense/bias", hub_backbone.pooled_dense.bias, same)]
    if hub_head is not None:
        m = google_names.MLM_HEAD_PREFIX
        slots += [
            (m + "transform/dense/kernel", hub_head._intermediate_dense.kernel, same),
            (m + "transform/dense/bias", hub_head._intermediate_dense.bias, same),
            (m + "transform/LayerNorm/gamma", hub_head._intermediate_layer_norm.gamma, same),
            (m + "transform/LayerNorm/beta", hub_head._intermediate_layer_norm.beta, same),
            (m + "output_bias", hub_head._bias, same),
        ]
    return slots


def check_covered(model, variables, source):
    """`ValueError` if `model` has a variable the map leaves out.

    A later keras-hub could add one (a bias, a second table); left out, it
    would keep its random values and the outputs would silently differ.
    """
    mapped = {id(v) for v in variables}
    left = [v.path for v in model.weights if id(v) not in mapped]
    if left:
        raise ValueError(
            f"{source}: keras-hub's {type(model).__name__} holds variable {left[0]!r} "
            f"({len(left)} in all) that has no place in our model; this keras-hub "
            "version's layers differ from the ones this converter maps.")


def _bert_config(hub_backbone, config_values, hub_head, source):
    """Our `BertConfig` (and the MLM head's own settings) for a keras-hub model.

    Sizes come from the preset's `config.json`; the activation, epsilon and
    layout from the built layers, which is where keras-hub fixes them.
    Raises `ValueError` naming the field or layer ours cannot represent.
    """
    fields = config_values["config"]
    blocks = hub_backbone.transformer_layers
    if any(block.normalize_first for block in blocks):
        raise ValueError(f"{source}: normalize_first=True (pre-LN) blocks; BERT's are post-LN.")
    hidden_act = _one((activation_name(b.activation, f"{source}: {b.name}'s feed-forward")
                       for b in blocks), f"{source}: the feed-forward activation")
    norms = [hub_backbone.embeddings_layer_norm]
    for block in blocks:
        norms += [block._self_attention_layer_norm, block._feedforward_layer_norm]
    eps = _one((n.epsilon for n in norms), f"{source}: layer_norm_epsilon")
    probe = np.linspace(-4.0, 4.0, 33, dtype=np.float32)
    if not np.allclose(keras.ops.convert_to_numpy(hub_backbone.pooled_dense.activation(probe)),
                       np.tanh(probe), rtol=0, atol=1e-6):
        raise ValueError(f"{source}: pooled_dense's activation is not tanh (BERT's pooler).")
    try:
        config = BertConfig(
            vocab_size=fields["vocabulary_size"],
            hidden_size=fields["hidden_dim"],
            num_hidden_layers=fields["num_layers"],
            num_attention_heads=fields["num_heads"],
            intermediate_size=fields["intermediate_dim"],
            hidden_act=hidden_act,
            hidden_dropout_prob=fields.get("dropout", 0.1),
            attention_probs_dropout_prob=fields.get("dropout", 0.1),
            max_position_embeddings=fields.get("max_sequence_length", 512),
            type_vocab_size=fields.get("num_segments", 2),
            layer_norm_eps=eps,
        )
    except (ValueError, TypeError) as e:
        raise ValueError(f"{source}: {e}") from None
    head = {}
    if hub_head is not None:
        if not hub_backbone.token_embedding.tie_weights:
            raise ValueError(f"{source}: the masked-LM head has its own output table "
                             "(tie_weights=False); ours is the word-embedding table.")
        # keras.activations.get(None) is `linear`: check the values.
        if hub_head.activation is not None and not np.array_equal(
                keras.ops.convert_to_numpy(hub_head.activation(probe)), probe):
            raise ValueError(f"{source}: the masked-LM head has an output activation; ours "
                             "returns logits.")
        head = dict(
            masked_lm_hidden_act=activation_name(
                hub_head.intermediate_activation, f"{source}: mlm_head's intermediate_dense"),
            masked_lm_layer_norm_eps=hub_head.layer_norm_epsilon)
    return config, head


def load_keras_hub_preset(folder, dtype=None):
    """Our BERT model from a keras-hub `BertBackbone` preset folder.

    keras-hub loads the folder (`Backbone.from_preset`, or
    `BertMaskedLM.from_preset` for a masked-LM task preset), so its files
    are read by their own code; the variables are mapped to the original
    Google names and assigned strictly (`google_names.
    set_original_weights`): every tensor used, every shape checked.

    A `BertMaskedLM` task preset gives a `BertMaskedLMPretrainer` with
    keras-hub's head (exact GELU and epsilon 1e-5 there, as keras-hub
    computes it). A preset of another BERT task (`BertTextClassifier`,
    ...) gives its backbone alone: that task's head (in `task.weights.h5`)
    is not read. The vocabulary is in `keras_hub_preset_vocab(folder)`.

    Args:
        folder: str. A keras-hub preset folder (`config.json`,
            `model.weights.h5`, ...).
        dtype: optional dtype policy for the built model; the weights are
            read in float32.

    Returns:
        `BertBackbone` (`hidden_act="gelu_tanh"`, as keras-hub computes),
        or `BertMaskedLMPretrainer`.

    Raises:
        ValueError: naming the folder and what it holds when it is not a
            keras-hub BERT preset, or the setting ours cannot represent.

    Example:
    >>> backbone = load_keras_hub_preset("bert_tiny_preset")
    >>> vocab = keras_hub_preset_vocab("bert_tiny_preset")
    >>> tokenizer = BertTokenizer(vocab.vocab_file, do_lower_case=vocab.lowercase)
    """
    values = read_preset_config(folder, BERT_BACKBONE, BERT_CONFIG_KEYS)
    source = os.path.join(folder, CONFIG_FILE)
    import keras_hub  # see the module docstring: slow, and only needed here

    # float32 whatever the preset's dtype: the values are copied, and ours
    # gets `dtype`.
    if _task_name(folder) == BERT_MASKED_LM:
        # preprocessor=None: the tokenizer and packer are not needed for the
        # weights (keras_hub_preset_vocab gives the vocabulary).
        task = keras_hub.models.BertMaskedLM.from_preset(folder, preprocessor=None,
                                                         dtype="float32")
        hub_backbone, hub_head = task.backbone, task.masked_lm_head
        hub_model = task
    else:
        hub_backbone = keras_hub.models.Backbone.from_preset(folder, dtype="float32")
        hub_head, hub_model = None, hub_backbone
    if type(hub_backbone) is not keras_hub.models.BertBackbone:
        raise ValueError(f"{folder}: keras-hub built a {type(hub_backbone).__name__}, not a "
                         "BertBackbone.")
    slots = _hub_bert_slots(hub_backbone, hub_head)
    check_covered(hub_model, [variable for _, variable, _ in slots], folder)
    config, head = _bert_config(hub_backbone, values, hub_head, source)
    backbone = BertBackbone.from_bert_config(config, dtype=dtype)
    model = BertMaskedLMPretrainer(backbone, **head) if hub_head is not None else backbone
    originals = {}
    paths = {}
    for name, variable, to_original in slots:
        value = np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)
        originals[name] = to_original(value) if to_original else value
        paths[name] = variable.path
    google_names.set_original_weights(
        model, originals, folder, describe=lambda name: paths.get(name, name))
    return model


def keras_hub_preset_vocab(folder):
    """The vocabulary and case handling of a keras-hub BERT preset's tokenizer.

    For our `BertTokenizer(vocab_file, do_lower_case=lowercase)`. Ours
    follows the original BERT: `do_lower_case` lowercases AND strips
    accents; keras-hub's `BertTokenizer` strips accents only with
    `strip_accents=True` (its default is False). The two agree on text
    without accented letters; `strip_accents` is returned so a caller can
    tell. Settings that change every tokenization (another
    `suffix_indicator` or `oov_token`, `split=False`) are refused.

    Args:
        folder: str. A keras-hub preset folder with `tokenizer.json`.

    Returns:
        `KerasHubVocab(vocab_file, lowercase, strip_accents)`.
    """
    path = os.path.join(folder, TOKENIZER_FILE)
    if not os.path.isfile(path):
        what = _contents(folder) if os.path.isdir(folder) else "nothing: no such folder"
        raise ValueError(f"{folder} has no {TOKENIZER_FILE}, so no keras-hub tokenizer "
                         f"(it holds {what}).")
    values = read_json_file(path)
    name = values.get("registered_name") if isinstance(values, dict) else None
    if name != BERT_TOKENIZER:
        raise ValueError(f"{path} holds a {name or 'non-keras-hub'} tokenizer, not "
                         f"{BERT_TOKENIZER}.")
    fields = values.get("config", {})
    for field, ours in (("suffix_indicator", "##"), ("oov_token", "[UNK]"), ("split", True)):
        if fields.get(field, ours) != ours:
            raise ValueError(f"{path} has {field}={fields[field]!r}; our WordPiece tokenizer "
                             f"has {field}={ours!r}.")
    vocab_file = os.path.join(folder, VOCAB_FILE)
    if not os.path.isfile(vocab_file):
        raise ValueError(f"{folder} has a {TOKENIZER_FILE} but no {VOCAB_FILE}.")
    return KerasHubVocab(vocab_file, bool(fields.get("lowercase", False)),
                         bool(fields.get("strip_accents", False)))


# === Writing ===


def _preset_parts(folder):
    """Entries of `folder` that are not a keras-hub preset's own files."""
    names = os.listdir(folder)
    extra = []
    for name in names:
        path = os.path.join(folder, name)
        if name == "assets" and os.path.isdir(path):
            # keras-hub writes assets/<x>/ beside <x>.json (tokenizer, ...).
            extra += [f"assets/{sub}" for sub in os.listdir(path)
                      if f"{sub}.json" not in names]
        elif name not in _PRESET_FILES and not (
                name.startswith("model") and name.endswith(".weights.h5")):  # shards
            extra.append(name + ("/" if os.path.isdir(path) else ""))
    return sorted(extra)


def is_keras_hub_preset(path):
    """Whether `path` is a folder whose `config.json` is a serialized
    keras-hub object (any architecture): what `save_to_preset` writes."""
    config = os.path.join(path, CONFIG_FILE)
    if not (os.path.isdir(path) and os.path.isfile(config)):
        return False
    try:
        values = read_json_file(config)
    except (ValueError, OSError):
        return False
    return isinstance(values, dict) and str(values.get("registered_name", "")).startswith(
        "keras_hub>")


def check_replaceable(folder):
    """`ValueError` unless `folder` is absent, empty or a keras-hub preset.

    An existing preset is replaced as a whole; a folder holding anything
    else (another format, a preset plus files of the user's) is refused,
    naming what it holds, so nothing the writer did not write is deleted.
    """
    if not os.path.lexists(folder):
        return
    if not os.path.isdir(folder) or os.path.islink(folder):
        raise ValueError(f"{folder} exists and is not a folder; refusing to replace it with a "
                         "keras-hub preset.")
    if not os.listdir(folder):
        return
    if not is_keras_hub_preset(folder):
        raise ValueError(f"{folder} exists and is not a keras-hub preset (it holds "
                         f"{_contents(folder)}); refusing to replace it. Pick another folder.")
    extra = _preset_parts(folder)
    if extra:
        raise ValueError(f"{folder} is a keras-hub preset but also holds {', '.join(extra)}, "
                         "which a preset does not; refusing to replace it.")


def write_preset_atomic(folder, write):
    """Runs `write(tmp)` into a fresh folder beside `folder`, then swaps it in.

    The new preset appears whole or not at all: a crash while writing
    leaves `folder` as it was (and a `.<name>.tmp-*` folder beside it, this
    function's own). An existing preset is moved aside, the new one renamed
    into place, then the old one deleted (put back if the rename fails).
    `check_replaceable` runs before writing and again just before the swap.
    """
    folder = os.path.abspath(folder)
    check_replaceable(folder)
    parent, name = os.path.split(folder)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".{name}.tmp-")
    try:
        write(tmp)
        as_if_created(tmp)  # mkdtemp's 0700 would hide it from other users
        check_replaceable(folder)
        trash = None
        if os.path.lexists(folder):
            # Moved into a fresh folder: a unique name, and one rename.
            trash = tempfile.mkdtemp(dir=parent, prefix=f".{name}.old-")
            os.rename(folder, os.path.join(trash, name))
        try:
            os.rename(tmp, folder)
        except BaseException:
            if trash is not None:
                os.rename(os.path.join(trash, name), folder)
                os.rmdir(trash)
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if trash is not None:
        shutil.rmtree(trash)


def _bert_backbone_of(model):
    """The `BertBackbone` to write: the model itself or its `.backbone`."""
    backbone = model if isinstance(model, BertBackbone) else getattr(model, "backbone", None)
    if not isinstance(backbone, BertBackbone):
        raise ValueError(
            "Expected a BertBackbone or a model with one as `.backbone` (a pretrainer or task "
            f"model). Received: {type(model).__name__} (XLNet models: "
            "keras_bert_impl.xlnet.save_keras_hub_xlnet_preset).")
    if type(backbone) is not BertBackbone:
        raise ValueError(
            f"A {type(backbone).__name__} adds layers keras-hub's BertBackbone has no place for; "
            "pass its `.backbone` to write the BERT encoder alone.")
    return backbone


def _hub_bert_kwargs(backbone, allow_gelu_approximation):
    """keras-hub `BertBackbone` arguments for ours; `ValueError` naming the
    field keras-hub cannot represent."""
    config = backbone.bert_config
    if backbone.causal:
        raise ValueError("This BertBackbone is causal (the LTR ablation); keras-hub's "
                         "BertBackbone attends both ways.")
    if config.hidden_act == "relu" or (config.hidden_act == "gelu"
                                       and not allow_gelu_approximation):
        raise ValueError(
            f"hidden_act={config.hidden_act!r}: keras-hub's BertBackbone always computes the "
            "tanh form of GELU (our 'gelu_tanh'; it does so for the Hugging Face BERT "
            "checkpoints it converts, too)."
            + (" Pass allow_gelu_approximation=True to write this exact-GELU model anyway "
               "(keras-hub's outputs then differ from ours by the approximation, ~1e-3)."
               if config.hidden_act == "gelu" else ""))
    if config.layer_norm_eps != 1e-12:
        raise ValueError(f"layer_norm_eps={config.layer_norm_eps!r}: keras-hub's BertBackbone "
                         "fixes it at 1e-12.")
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        raise ValueError(
            f"hidden_dropout_prob={config.hidden_dropout_prob!r} and "
            f"attention_probs_dropout_prob={config.attention_probs_dropout_prob!r} differ; "
            "keras-hub's BertBackbone has one `dropout` for both.")
    return dict(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)


def assign_checked(variable, value, name, source):
    """`variable.assign(value)` after checking the size (reshaped to fit)."""
    value = np.asarray(value, dtype=np.float32)
    if value.size != int(np.prod(variable.shape)):
        raise ValueError(f"{source}: {name!r} has shape {value.shape}; keras-hub's "
                         f"{variable.path} needs {tuple(variable.shape)}.")
    variable.assign(value.reshape(tuple(variable.shape)))


def save_keras_hub_preset(model, folder, vocab_file, do_lower_case=True,
                          allow_gelu_approximation=False):
    """Writes our BERT backbone as a keras-hub `BertBackbone` preset.

    keras-hub builds its own `BertBackbone` of the same shape, takes our
    weights (through the original Google names) and writes the folder with
    its own `save_to_preset`, so `keras_hub.models.BertBackbone.
    from_preset(folder)` and `keras_hub.models.BertTokenizer.
    from_preset(folder)` load it. Weights are written in float32.

    The folder is written atomically: into a temporary folder beside it,
    then swapped in. An existing keras-hub preset there is replaced; a
    folder holding anything else is refused (`ValueError` naming what it
    holds). A pretrainer's heads are not written (keras-hub's `BertMaskedLM`
    head is another layout: exact GELU, epsilon 1e-5); `initializer_range`
    is not either (keras-hub fixes 0.02; it only seeds new weights).

    Args:
        model: `BertBackbone`, or a pretrainer or task model whose
            `.backbone` is one.
        folder: str. The preset folder to write.
        vocab_file: str or None. `vocab.txt` for the preset's
            `BertTokenizer` (as many tokens as the model's `vocab_size`,
            with [CLS], [SEP], [PAD], [MASK], [UNK]); None writes no
            tokenizer.
        do_lower_case: bool. Written as keras-hub's `lowercase` and
            `strip_accents`, which our `do_lower_case` does together (as
            the original BERT).
        allow_gelu_approximation: bool. keras-hub computes the tanh form of
            GELU; a model with exact `hidden_act="gelu"` is refused unless
            this is True (its outputs in keras-hub then differ by the
            approximation).

    Raises:
        ValueError: naming the setting keras-hub's `BertBackbone` cannot
            represent (`hidden_act`, `layer_norm_eps`, two dropout rates, a
            causal backbone), a vocabulary that does not fit, or a target
            folder that is not a keras-hub preset.

    Example:
    >>> save_keras_hub_preset(backbone, "out/preset", "vocab.txt")
    >>> keras_hub.models.BertBackbone.from_preset("out/preset")
    """
    backbone = _bert_backbone_of(model)
    kwargs = _hub_bert_kwargs(backbone, allow_gelu_approximation)
    check_replaceable(os.path.abspath(folder))  # before the slow part
    if vocab_file is not None:
        if not os.path.isfile(vocab_file):
            raise ValueError(f"{vocab_file}: no such vocabulary file.")
        size = len(load_vocab(vocab_file))
        if size != backbone.bert_config.vocab_size:
            raise ValueError(f"{vocab_file} holds {size} tokens; the model's vocab_size is "
                             f"{backbone.bert_config.vocab_size}.")
    import keras_hub  # see the module docstring

    hub = keras_hub.models.BertBackbone(**kwargs, dtype="float32")
    slots = _hub_bert_slots(hub)
    check_covered(hub, [variable for _, variable, _ in slots], "save_keras_hub_preset")
    originals = google_names.get_original_weights(backbone)
    for name, variable, _ in slots:
        # Every change of layout is a reshape (see `_hub_bert_slots`).
        assign_checked(variable, originals[name], name, "save_keras_hub_preset")
    tokenizer = None
    if vocab_file is not None:
        try:
            tokenizer = keras_hub.models.BertTokenizer(
                vocabulary=vocab_file, lowercase=do_lower_case, strip_accents=do_lower_case)
        except ValueError as e:  # e.g. a special token missing from the vocabulary
            raise ValueError(f"{vocab_file}: keras-hub's BertTokenizer refuses it: {e}") from None

    def write(tmp):
        hub.save_to_preset(tmp)
        if tokenizer is not None:
            tokenizer.save_to_preset(tmp)

    write_preset_atomic(folder, write)
