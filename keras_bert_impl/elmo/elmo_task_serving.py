"""SavedModel export of ELMo task models: character ids, tokens or raw text in.

Signatures (the biLM stateless, every sentence from zero states, as in
training):
- `serving_default`: `char_ids` int32 `(B, T, C)` (`(B, 2, T, C)` for
  `ElmoPairClassifier`), as `batch_char_ids` makes them -> `logits`
  float32, the model's output.
- `serving_tokens`: `tokens` string `(B, W)`, each row one sentence's
  words right-padded with "" (no `<S>` / `</S>`: the graph adds them,
  `char_ids_from_tokens`); for pairs `tokens_a` and `tokens_b`. Returns
  `logits`; a tagger's are per word, laid out as `tokens` `(B, W, K)` (0
  on padding).

- Classifiers, raw text: `serving_text` (`text` string `(B,)`) for
  `ElmoClassifier`, `serving_text_pair` (`text_a`, `text_b`) for
  `ElmoPairClassifier`. Each text is split into words in the graph as the
  fine-tuning entry point splits it (`elmo_serving.text_words`: BERT's basic
  tokenization without lowercasing), cut to `max_seq_length - 2` words as
  it cuts them, then read as `serving_tokens` reads words. They return
  `logits` and the `words` (`words_a`, `words_b`) string `(B, W)` read,
  right-padded with "". A tagger serves words only (`serving_tokens`): its
  labels belong to the words the client gave, as CoNLL's.

Classifiers exported with `labels=` also return `probabilities` and `label`
(strings) from every signature. The SavedModel needs only `tensorflow`.
`char_ids` are checked in the graph (`checked_char_ids`), and `tokens_a`
and `tokens_b` (`text_a` and `text_b`) must be of one batch: a bad request
fails with an `InvalidArgumentError` naming the input. An empty batch
returns empty outputs.
"""

import tensorflow as tf

from keras_bert_impl.base.saved_model import label_outputs
from keras_bert_impl.base.saved_model import save_module_atomic
from keras_bert_impl.base.saved_model import with_labels
from keras_bert_impl.base.serving_checks import checked_texts
from keras_bert_impl.elmo.char_ids import char_ids_from_tokens
from keras_bert_impl.elmo.elmo_backbone import INPUT_NAME
from keras_bert_impl.elmo.elmo_serving import checked_char_ids
from keras_bert_impl.elmo.elmo_serving import on_rows
from keras_bert_impl.elmo.elmo_serving import text_words
from keras_bert_impl.elmo.elmo_task_models import ElmoClassifier
from keras_bert_impl.elmo.elmo_task_models import ElmoPairClassifier
from keras_bert_impl.elmo.elmo_task_models import ElmoTaskModel
from keras_bert_impl.elmo.elmo_task_models import ElmoTokenTagger

# B=batch, W=words, T=tokens (W + 2 with <S> and </S>), C=characters per
# token, K=classes or labels


class _ElmoTaskServing(tf.Module):
    def __init__(self, model, max_words):
        super().__init__()
        self.model = model
        self.max_chars = model.backbone.max_characters_per_token
        self.max_words = max_words
        self.tagger = isinstance(model, ElmoTokenTagger)
        rank = len(model.input[INPUT_NAME].shape)
        # Traced once, called by every signature: the text signatures call it
        # rather than tracing the model again each (a shorter export).
        self.outputs = tf.function(self._outputs, autograph=False, input_signature=[
            tf.TensorSpec([None] * (rank - 1) + [self.max_chars], tf.int32)])

    def _outputs(self, char_ids):
        char_ids = checked_char_ids(char_ids, self.model.backbone.elmo_config,
                                    list(self.model.input[INPUT_NAME].shape))
        logits = on_rows(lambda x: self.model({INPUT_NAME: x}, training=False), char_ids)
        return label_outputs(self, {"logits": tf.cast(logits, tf.float32)})

    def _char_ids(self, tokens):
        ragged = tf.RaggedTensor.from_tensor(tokens, padding="")  # (B, None)
        return char_ids_from_tokens(ragged, self.max_chars)  # (B, W' + 2, C), W' <= W

    def text_outputs(self, text):
        words = text_words(text, "text", self.max_words)  # (B, None)
        out = self.outputs(char_ids_from_tokens(words, self.max_chars))  # (B, W + 2, C) in
        return {**out, "words": words.to_tensor("")}  # (B, W)

    def text_pair_outputs(self, text_a, text_b):
        words_a = text_words(text_a, "text_a", self.max_words)  # (B, None)
        words_b = text_words(text_b, "text_b", self.max_words)  # (B, None)
        out = self.pair_token_outputs(words_a.to_tensor(""), words_b.to_tensor(""))
        return {**out, "words_a": words_a.to_tensor(""), "words_b": words_b.to_tensor("")}

    def token_outputs(self, tokens):
        out = self.outputs(self._char_ids(tokens))
        if self.tagger:  # word j's logits sit at token j + 1
            words = out["logits"][:, 1:-1]  # (B, W', K)
            pad = tf.shape(tokens)[1] - tf.shape(words)[1]  # all-padding columns
            out["logits"] = tf.pad(words, [[0, 0], [0, pad], [0, 0]])  # (B, W, K)
        return out

    def pair_token_outputs(self, tokens_a, tokens_b):
        a, b = self._char_ids(tokens_a), self._char_ids(tokens_b)  # (B, Ta, C), (B, Tb, C)
        length = tf.maximum(tf.shape(a)[1], tf.shape(b)[1])
        a = tf.pad(a, [[0, 0], [0, length - tf.shape(a)[1]], [0, 0]])  # (B, T, C)
        b = tf.pad(b, [[0, 0], [0, length - tf.shape(b)[1]], [0, 0]])  # (B, T, C)
        return self.outputs(tf.stack([a, b], axis=1))  # (B, 2, T, C) in


def export_elmo_task_saved_model(model, export_dir, labels=None, max_seq_length=128):
    """Writes a SavedModel of an ELMo task model with the signatures above.

    Args:
        model: `ElmoClassifier`, `ElmoPairClassifier` or `ElmoTokenTagger`.
        export_dir: str. Replaced atomically (written beside it, then renamed).
        labels: list of str or None. A classifier's label per class: adds
            `probabilities` and `label` (strings) to `logits`.
        max_seq_length: int. The text signatures keep `max_seq_length - 2`
            words of each text, as `training.finetune --max_seq_length`
            (which counts `<S>` and `</S>`).

    Returns:
        The names of the signatures written.

    Example:
    >>> export_elmo_task_saved_model(tagger, "export/saved_model")
    ['serving_default', 'serving_tokens']
    >>> export_elmo_task_saved_model(classifier, "export/saved_model", labels=["neg", "pos"])
    ['serving_default', 'serving_text', 'serving_tokens']
    """
    _check_exported(model, max_seq_length)
    module = _ElmoTaskServing(model, max_seq_length - 2)
    with_labels(module, model, labels)
    rank = len(model.input[INPUT_NAME].shape)
    char_ids = tf.TensorSpec([None] * (rank - 1) + [module.max_chars], tf.int32, name=INPUT_NAME)

    @tf.function(autograph=False, input_signature=[char_ids])
    def serving_default(char_ids):
        return module.outputs(char_ids)

    signatures = {"serving_default": serving_default,
                  "serving_tokens": _tokens_signature(module, rank)}
    if isinstance(model, ElmoClassifier):
        @tf.function(autograph=False,
                     input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serving_text(text):
            return module.text_outputs(checked_texts({"text": text})["text"])

        signatures["serving_text"] = serving_text
    if isinstance(model, ElmoPairClassifier):
        @tf.function(autograph=False,
                     input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                      tf.TensorSpec([None], tf.string, name="text_b")])
        def serving_text_pair(text_a, text_b):
            texts = checked_texts({"text_a": text_a, "text_b": text_b})
            return module.text_pair_outputs(texts["text_a"], texts["text_b"])

        signatures["serving_text_pair"] = serving_text_pair
    save_module_atomic(module, export_dir, signatures)
    return sorted(signatures)


def _check_exported(model, max_seq_length):
    """`ValueError` unless `model` is an ELMo task model and `max_seq_length`
    an integer of at least 3."""
    if not isinstance(model, ElmoTaskModel):
        raise ValueError(f"Cannot export {type(model).__name__}: expected an ELMo task model "
                         "(ElmoClassifier, ElmoPairClassifier, ElmoTokenTagger).")
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or (
            max_seq_length < 3):
        raise ValueError("`max_seq_length` must be an integer >= 3 (<S>, a word, </S>). "
                         f"Received: max_seq_length={max_seq_length!r}.")


def _tokens_signature(module, rank):
    """`serving_tokens`: `tokens` `(B, W)`, or `tokens_a` and `tokens_b` for
    a pair model (`rank` 4, char ids `(B, 2, T, C)`), read as words."""
    if rank == 3:
        @tf.function(autograph=False, input_signature=[tf.TensorSpec([None, None], tf.string, name="tokens")])
        def serving_tokens(tokens):
            return module.token_outputs(checked_texts({"tokens": tokens}, rank=2)["tokens"])
    else:
        @tf.function(autograph=False, input_signature=[tf.TensorSpec([None, None], tf.string, name="tokens_a"),
                                      tf.TensorSpec([None, None], tf.string, name="tokens_b")])
        def serving_tokens(tokens_a, tokens_b):
            tokens = checked_texts({"tokens_a": tokens_a, "tokens_b": tokens_b}, rank=2)
            return module.pair_token_outputs(tokens["tokens_a"], tokens["tokens_b"])
    return serving_tokens
