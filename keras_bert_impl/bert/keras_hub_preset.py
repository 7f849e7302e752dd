"""keras-hub BERT preset folders (`config.json`, `model.weights.h5`, ...), both ways.

keras-hub itself reads and writes the files (`from_preset`,
`save_to_preset`), so the layout is always its own; this module only
moves the weights between keras-hub's model and ours through the original
Google names (`google_names`), by the map in `keras_hub_bert_layout`. The
folder's files and checks and the atomic write, which XLNet's converter
(`keras_bert_impl.xlnet.xlnet_keras_hub_preset`) uses too, are in
`keras_hub_common`.

keras-hub's `BertBackbone` computes the tanh form of GELU in every block
(also for the Hugging Face checkpoints it converts) and LayerNorm epsilon
1e-12; its `BertMaskedLM` head computes exact GELU and epsilon 1e-5. A
model read from a preset computes exactly that (`hidden_act="gelu_tanh"`,
the head's own settings), so its outputs equal keras-hub's.

keras-hub is imported on a converter's first call (`keras_hub_module`): it
takes seconds to import and nothing else in the package needs it.
"""

import collections
import os

import keras
import numpy as np

from keras_bert_impl.base.json_files import read_json_file
from keras_bert_impl.bert import google_names
from keras_bert_impl.bert.bert_backbone import BertBackbone
from keras_bert_impl.bert.bert_pretrainer import BertMaskedLMPretrainer
from keras_bert_impl.bert.keras_hub_bert_layout import _bert_config
from keras_bert_impl.bert.keras_hub_bert_layout import _hub_bert_kwargs
from keras_bert_impl.bert.keras_hub_bert_layout import _hub_bert_slots
from keras_bert_impl.bert.wordpiece import load_vocab
from keras_bert_impl.checkpoints.keras_hub_common import BERT_BACKBONE
from keras_bert_impl.checkpoints.keras_hub_common import CONFIG_FILE
from keras_bert_impl.checkpoints.keras_hub_common import TASK_FILE
from keras_bert_impl.checkpoints.keras_hub_common import TOKENIZER_FILE
from keras_bert_impl.checkpoints.keras_hub_common import VOCAB_FILE
from keras_bert_impl.checkpoints.keras_hub_common import _contents
from keras_bert_impl.checkpoints.keras_hub_common import assign_checked
from keras_bert_impl.checkpoints.keras_hub_common import check_covered
from keras_bert_impl.checkpoints.keras_hub_common import check_replaceable
from keras_bert_impl.checkpoints.keras_hub_common import keras_hub_module
from keras_bert_impl.checkpoints.keras_hub_common import read_preset_config
from keras_bert_impl.checkpoints.keras_hub_common import write_preset_atomic

BERT_MASKED_LM = "keras_hub>BertMaskedLM"
BERT_TOKENIZER = "keras_hub>BertTokenizer"

# The keys keras-hub 0.32's `BertBackbone.get_config` writes. Any other key
# is a setting ours may not have (a later keras-hub's), so it is refused.
BERT_CONFIG_KEYS = frozenset((
    "name", "trainable", "dtype", "vocabulary_size", "num_layers", "num_heads",
    "hidden_dim", "intermediate_dim", "dropout", "max_sequence_length", "num_segments"))

KerasHubVocab = collections.namedtuple("KerasHubVocab",
                                       ("vocab_file", "lowercase", "strip_accents"))
KerasHubVocab.__doc__ = """The WordPiece vocabulary of a keras-hub BERT preset.

Fields:
    vocab_file: str. `assets/tokenizer/vocabulary.txt`, one token a line.
    lowercase: bool. keras-hub's `BertTokenizer(lowercase=...)`.
    strip_accents: bool. Its `strip_accents` (False unless set).
"""


def _task_name(folder):
    """The registered name in `task.json`, or None when there is none."""
    path = os.path.join(folder, TASK_FILE)
    if not os.path.isfile(path):
        return None
    values = read_json_file(path)
    if not isinstance(values, dict) or "registered_name" not in values:
        raise ValueError(f"{path} is not a serialized keras-hub task (no `registered_name`).")
    return values["registered_name"]


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
    hub_backbone, hub_head, hub_model = _hub_models(keras_hub_module(), folder)
    slots = _hub_bert_slots(hub_backbone, hub_head)
    check_covered(hub_model, [variable for _, variable, _ in slots], folder)
    config, head = _bert_config(hub_backbone, values, hub_head, source)
    backbone = BertBackbone.from_bert_config(config, dtype=dtype)
    model = BertMaskedLMPretrainer(backbone, **head) if hub_head is not None else backbone
    originals, paths = _original_values(slots)
    google_names.set_original_weights(
        model, originals, folder, describe=lambda name: paths.get(name, name))
    return model


def _hub_models(keras_hub, folder):
    """`(hub_backbone, hub_head or None, hub_model)`: keras-hub's models of
    the preset in float32, `hub_model` the task when `task.json` names a
    `BertMaskedLM`, else the backbone."""
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
    return hub_backbone, hub_head, hub_model


def _original_values(slots):
    """`({Google name: float32 value in the original layout}, {Google name:
    keras-hub variable path})` of `_hub_bert_slots`' slots."""
    originals = {}
    paths = {}
    for name, variable, to_original in slots:
        value = np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)
        originals[name] = to_original(value) if to_original else value
        paths[name] = variable.path
    return originals, paths


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
        _check_vocab_size(vocab_file, backbone.bert_config.vocab_size)
    keras_hub = keras_hub_module()

    hub = _hub_backbone_with_weights(keras_hub, kwargs, backbone)
    tokenizer = (None if vocab_file is None
                 else _hub_tokenizer(keras_hub, vocab_file, do_lower_case))

    def write(tmp):
        hub.save_to_preset(tmp)
        if tokenizer is not None:
            tokenizer.save_to_preset(tmp)

    write_preset_atomic(folder, write)


def _check_vocab_size(vocab_file, vocab_size):
    """`ValueError` unless `vocab_file` exists and holds `vocab_size` tokens."""
    if not os.path.isfile(vocab_file):
        raise ValueError(f"{vocab_file}: no such vocabulary file.")
    size = len(load_vocab(vocab_file))
    if size != vocab_size:
        raise ValueError(f"{vocab_file} holds {size} tokens; the model's vocab_size is "
                         f"{vocab_size}.")


def _hub_backbone_with_weights(keras_hub, kwargs, backbone):
    """keras-hub's float32 `BertBackbone(**kwargs)` holding `backbone`'s
    weights, each assigned through its Google name with its shape checked."""
    hub = keras_hub.models.BertBackbone(**kwargs, dtype="float32")
    slots = _hub_bert_slots(hub)
    check_covered(hub, [variable for _, variable, _ in slots], "save_keras_hub_preset")
    originals = google_names.get_original_weights(backbone)
    for name, variable, _ in slots:
        # Every change of layout is a reshape (see `_hub_bert_slots`).
        assign_checked(variable, originals[name], name, "save_keras_hub_preset")
    return hub


def _hub_tokenizer(keras_hub, vocab_file, do_lower_case):
    """keras-hub's `BertTokenizer` of `vocab_file`; its refusal as a
    `ValueError` naming the file."""
    try:
        return keras_hub.models.BertTokenizer(
            vocabulary=vocab_file, lowercase=do_lower_case, strip_accents=do_lower_case)
    except ValueError as e:  # e.g. a special token missing from the vocabulary
        raise ValueError(f"{vocab_file}: keras-hub's BertTokenizer refuses it: {e}") from None
