"""SavedModel export of an ELMo biLM: raw tokens or text in, bilm-tf's `lm_embeddings` out.

Signatures (both stateless: every sentence starts from zero LSTM states):
- `serving_default`: `tokens` string `(B, T)`, whitespace-free tokens of
  one sentence per row, right-padded with "" (no `<S>` / `</S>`: they are
  added in the graph by `char_ids_from_tokens`, bilm-tf's `Batcher` as
  TensorFlow ops).
- `serving_char_ids`: `char_ids` int32 `(B, T + 2, C)` as `batch_char_ids`
  makes them (boundaries included).
- `serving_text`: `text` string `(B,)`, raw sentences split into words in
  the graph as the fine-tuning entry point splits them (`text_words`);
  also returns those `words` string `(B, T)`, right-padded with "".

All return `lm_embeddings` float32 `(B, L + 1, T, 2P)` (layer 0 `[x; x]`,
then each LSTM layer `[forward; backward]`, the sentence boundaries
removed, 0 on padding: bilm-tf's `BidirectionalLanguageModel` output) and
`mask` int32 `(B, T)`. `char_ids` are checked in the graph
(`checked_char_ids`): a bad request fails with an `InvalidArgumentError`
naming the input and the range. An empty batch returns empty outputs. The
SavedModel needs only `tensorflow` (the word splitting is core string ops).
"""

import keras
import tensorflow as tf

from keras_bert_impl.base.saved_model import save_module_atomic
from keras_bert_impl.base.serving_checks import checked_ids
from keras_bert_impl.base.serving_checks import checked_shape
from keras_bert_impl.base.serving_checks import checked_texts
from keras_bert_impl.elmo.char_ids import char_ids_from_tokens
from keras_bert_impl.elmo.elmo_backbone import INPUT_NAME
from keras_bert_impl.elmo.elmo_backbone import ElmoBackbone
from keras_bert_impl.elmo.elmo_backbone import remove_sentence_boundaries
from keras_bert_impl.elmo.elmo_checkpoint import elmo_hdf5_variables
from keras_bert_impl.tokenizers.graph_basic_tokenizer import basic_tokenize

# B=batch, T=tokens, C=characters per token, L=LSTM layers, P=projection


def text_words(text, name="text", max_words=None):
    """Raw strings `(B,)` -> their words, string `tf.RaggedTensor` `(B, T)`.

    The words ELMo's fine-tuning reads (`training.finetune --model=elmo`
    splits text with `BasicTokenizer(do_lower_case=False)`: ELMo is cased)
    in TF ops: BERT's basic tokenization (`graph_tokenizer.basic_tokenize`)
    without lowercasing, so "Héllo, world!" is "Héllo" "," "world" "!". A
    text of no words (empty, spaces, control characters) gives none.

    Args:
        text: string tensor `(B,)`; `name` names it in the rank check.
        max_words: int or None. Words kept of each text (the entry point
            keeps `max_seq_length - 2`).
    """
    text = checked_shape(text, name, tf.constant([-1]), "(batch,)")
    words = basic_tokenize(text, do_lower_case=False)  # (B, None)
    return words if max_words is None else words[:, :max_words]


def checked_char_ids(char_ids, config, shape):
    """`char_ids` of a served request after the checks of
    `serving_checks.checked_ids`: `shape` (its rank and fixed sizes, the
    last `max_characters_per_token`), ids in `[0, n_characters)`, at least
    one token (the LSTMs set no longest sequence)."""
    return checked_ids({INPUT_NAME: char_ids}, shape,
                       {INPUT_NAME: (config.n_characters, "n_characters; 0 is padding")},
                       length_axis=-2)[INPUT_NAME]


def on_rows(fn, char_ids):
    """`fn(char_ids)` for a batch of any size, an empty one included.

    TensorFlow's CPU convolution rejects an empty batch, so the character
    CNN cannot run on none: an empty batch gets a row of padding (all 0: no
    token; at least 3 of them, `<S>`, one word, `</S>`, so that a task
    model's LSTMs have a step to run), and every output is cut back to the
    batch.
    """
    shape = tf.shape(char_ids)
    empty = tf.cast(tf.equal(shape[0], 0), tf.int32)
    padding = [[0, 0]] * len(char_ids.shape)
    padding[0] = [0, empty]
    padding[-2] = [0, empty * tf.maximum(3 - shape[-2], 0)]  # the token axis
    out = fn(tf.pad(char_ids, padding))  # (max(B, 1), ...) in
    return tf.nest.map_structure(lambda value: value[:shape[0]], out)


def stateless_copy(backbone):
    """An `ElmoBackbone` with `backbone`'s weights and no kept states."""
    if backbone.max_batch_size is None:
        return backbone
    copy = ElmoBackbone.from_config_object(backbone.elmo_config, dtype=backbone.dtype_policy)
    source = elmo_hdf5_variables(backbone)
    for name, variable in elmo_hdf5_variables(copy).items():
        variable.assign(source[name])
    return copy


class _ElmoServing(tf.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.max_chars = backbone.elmo_config.max_characters_per_token
        # Traced once, called by every signature: the text signatures call it
        # rather than tracing the model again each (a shorter export).
        self.outputs = tf.function(self._outputs, autograph=False, input_signature=[
            tf.TensorSpec([None, None, self.max_chars], tf.int32)])

    def _outputs(self, char_ids):
        char_ids = checked_char_ids(char_ids, self.backbone.elmo_config,
                                    [None, None, self.max_chars])
        out = on_rows(lambda x: self.backbone(x, training=False), char_ids)
        layers, mask = [], None
        for layer in out["lm_embeddings"]:  # L + 1 of (B, T + 2, 2P)
            inner, mask = remove_sentence_boundaries(keras.ops.cast(layer, "float32"), out["mask"])
            layers.append(inner)  # (B, T, 2P)
        return {"lm_embeddings": tf.stack(layers, axis=1),  # (B, L + 1, T, 2P)
                "mask": tf.cast(mask, tf.int32)}  # (B, T)

    def text_outputs(self, text):
        words = text_words(text)  # (B, None)
        out = self.outputs(char_ids_from_tokens(words, self.max_chars))  # (B, T + 2, C) in
        return {**out, "words": words.to_tensor("")}  # (B, T)

    def token_outputs(self, tokens):
        ragged = tf.RaggedTensor.from_tensor(tokens, padding="")  # (B, None)
        out = self.outputs(char_ids_from_tokens(ragged, self.max_chars))  # (B, T' + 2, C) in
        pad = tf.shape(tokens)[1] - tf.shape(out["mask"])[1]  # T - T': all-padding columns
        return {"lm_embeddings": tf.pad(out["lm_embeddings"], [[0, 0], [0, 0], [0, pad], [0, 0]]),
                "mask": tf.pad(out["mask"], [[0, 0], [0, pad]])}


def export_elmo_saved_model(backbone, export_dir):
    """Writes a SavedModel of an `ElmoBackbone` with the signatures above.

    A stateful backbone is exported without its states (`stateless_copy`).

    Args:
        backbone: `ElmoBackbone`.
        export_dir: str. Replaced atomically (written beside it, then renamed).

    Returns:
        The names of the signatures written.

    Example:
    >>> export_elmo_saved_model(lm.backbone, "export/saved_model")
    ('serving_default', 'serving_char_ids', 'serving_text')
    """
    if not isinstance(backbone, ElmoBackbone):
        raise ValueError(f"Expected an ElmoBackbone. Received: {type(backbone).__name__}.")
    module = _ElmoServing(stateless_copy(backbone))
    chars = module.max_chars

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None, None], tf.string, name="tokens")])
    def serving_default(tokens):
        return module.token_outputs(checked_texts({"tokens": tokens}, rank=2)["tokens"])

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None, None, chars], tf.int32, name="char_ids")])
    def serving_char_ids(char_ids):
        return module.outputs(char_ids)

    @tf.function(autograph=False,
                 input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serving_text(text):
        return module.text_outputs(checked_texts({"text": text})["text"])

    signatures = {"serving_default": serving_default, "serving_char_ids": serving_char_ids,
                  "serving_text": serving_text}
    save_module_atomic(module, export_dir, signatures)
    return tuple(signatures)
