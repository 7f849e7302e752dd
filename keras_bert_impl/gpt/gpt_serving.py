"""SavedModel export of GPT models for TF Serving: ids in, and raw text in.

Signatures:
- `serving_default`: int32 `input_word_ids`, `input_mask` `(B, S)` ->
  `lm_logits` `(B, S, V)` (next-token scores at every position) and
  `sequence_output` `(B, S, H)`, float32.
- Fine-tuned task models (`GptClassifier`, `GptMultipleChoice`,
  `GptTokenTagger`): `serving_default` takes the same ids (`(B, 2, S)` for a
  similarity classifier, `(B, C, S)` for multiple choice, already in the
  input transformation's layout, see `gpt_inputs`) and returns `logits`.
- `serving_text` (`text` `(B,)` strings), when the vocabulary is given:
  byte-pair encoded in the graph (`GraphGptTokenizer`, the same ids as
  `GptTokenizer`), a longer text cut to its last `max_seq_length` tokens
  (the window the next token follows), right-padded; outputs as
  `serving_default` plus the packed `input_word_ids`, `input_mask` and
  `next_token_id` (the greedy next token after each text).
- A `GptClassifier` exported with the vocabulary gets raw-text signatures
  that build in the graph the ids `gpt_inputs` builds in Python for the
  fine-tuning entry point (`FineTuningIds.appended_to(vocab_size)`, rows of
  exactly `max_seq_length`, the longer part cut first): `serving_text`
  (`text`: `_start_ text _classify_`) and `serving_text_pair` (`text_a`,
  `text_b`: `_start_ a _delimiter_ b _classify_`). A similarity classifier
  (`similarity=True`, trained on both orders of each pair) gets
  `serving_text_pair` only, which packs both orders, `(B, 2, S)`, so its
  logits, the sum over the orders, are the model's own. They return
  `logits` (+ `label` and `probabilities` with `labels=`) and the packed
  `input_word_ids`, `input_mask`. `GptMultipleChoice` (sets of pairs) and
  `GptTokenTagger` (labels per BPE piece of given words) serve ids only.

Every request is checked in the graph (`serving_checks`): ids in
`[0, vocab_size)`, `input_mask` 0 or 1, both inputs of one shape and rank,
1 to `n_positions` tokens; a bad one fails with an `InvalidArgumentError`
naming the input and the range. An empty batch returns empty outputs. The
SavedModel needs only `tensorflow` and `tensorflow_text`.
"""

import keras
import tensorflow as tf

from keras_bert_impl.base.saved_model import label_outputs
from keras_bert_impl.base.saved_model import save_module_atomic
from keras_bert_impl.base.saved_model import with_labels
from keras_bert_impl.base.serving_checks import checked_ids
from keras_bert_impl.base.serving_checks import checked_texts
from keras_bert_impl.gpt.gpt_backbone import INPUT_NAMES
from keras_bert_impl.gpt.gpt_backbone import GptBackbone
from keras_bert_impl.gpt.gpt_inputs import FineTuningIds
from keras_bert_impl.gpt.gpt_task_models import GptClassifier
from keras_bert_impl.gpt.gpt_task_models import GptTaskModel
from keras_bert_impl.gpt.graph_gpt_tokenizer import GraphGptTokenizer
from keras_bert_impl.layers.transformer_encoder import encoder_blocks
from keras_bert_impl.speed.head_branches import HeadBranches
from keras_bert_impl.speed.head_branches import in_head_branches_when_short
from keras_bert_impl.speed.row_branches import traced_in_row_branches

# B=batch, S=sequence


def _backbone_of(model):
    if isinstance(model, GptBackbone):
        return model
    backbone = getattr(model, "backbone", None)
    if not isinstance(backbone, GptBackbone):
        raise ValueError(
            f"Cannot export {type(model).__name__}: expected a GptBackbone or a model with a "
            "GptBackbone `backbone` (GptCausalLM, ...).")
    return backbone


def _without_auxiliary_lm(model):
    """The task model's graph up to its logits, without `GptAuxiliaryLmLoss`.

    That endpoint layer only adds the training loss L1 (and updates its
    metric, whose variable a SavedModel could not capture); serving needs
    the logits it passes through, not the `(N, S, V)` cross-entropy.
    """
    auxiliary = getattr(model, "auxiliary_lm", None)
    if auxiliary is None:
        return model
    logits = auxiliary._inbound_nodes[0].arguments.args[0]  # the layer's `outputs` input
    return keras.Model(model.input, logits)


class _GptServing(tf.Module):
    def __init__(self, model, backbone, tokenizer, max_seq_length, special=None,
                 head_branches=None):
        super().__init__()
        self.head_branches = HeadBranches(encoder_blocks(backbone), head_branches)
        self.task = isinstance(model, GptTaskModel)
        self.special = special  # FineTuningIds of a classifier's text signatures
        self.similarity = getattr(model, "similarity", False)
        self.model = _without_auxiliary_lm(model) if self.task else model
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.max_positions = backbone.gpt_config.n_positions
        self.rank = len(model.input["input_word_ids"].shape)
        # Traced once, called by every signature: the text signatures call it
        # rather than tracing the model again each (a shorter export).
        self.outputs = tf.function(self._outputs, autograph=False, input_signature=[
            {name: tf.TensorSpec([None] * self.rank, tf.int32) for name in INPUT_NAMES}])

    def _outputs(self, inputs):
        inputs = checked_ids(
            {name: inputs[name] for name in INPUT_NAMES}, [None] * self.rank,
            {"input_word_ids": (self.backbone.gpt_config.vocab_size, "vocab_size"),
             "input_mask": (2, "0 or 1")},
            self.max_positions, "n_positions")
        # Short requests in head branches, the others in row branches.
        out = in_head_branches_when_short(self.head_branches, tf.size(inputs["input_word_ids"]),
                                          lambda: self._model_numbers(inputs))
        return label_outputs(self, out) if self.task else out

    def _model_numbers(self, inputs):
        if self.task:
            return {"logits": tf.cast(self.model(inputs, training=False), tf.float32)}
        out = self.backbone(inputs, training=False)
        return {"lm_logits": tf.cast(out["lm_logits"], tf.float32),
                "sequence_output": tf.cast(out["sequence_output"], tf.float32)}

    def text_outputs(self, text):
        # The text's last tokens: the next token continues its end, not its start.
        ids = self.tokenizer(text)[:, -self.max_seq_length:]  # ragged (B, <=S)
        packed = {"input_word_ids": ids.to_tensor(0),  # right padding
                  "input_mask": tf.ones_like(ids).to_tensor(0)}
        packed = {k: tf.cast(v, tf.int32) for k, v in packed.items()}
        out = self.outputs(packed)
        last = tf.maximum(tf.reduce_sum(packed["input_mask"], axis=1) - 1, 0)  # (B,)
        next_scores = tf.gather(out["lm_logits"], last, axis=1, batch_dims=1)  # (B, V)
        return {**packed, **out,
                "next_token_id": tf.argmax(next_scores, axis=-1, output_type=tf.int32)}

    def classifier_text_outputs(self, text_a, text_b=None):
        """A classifier's outputs on raw text (checked by `checked_texts` in
        the signatures), packed as `gpt_inputs` packs it."""
        ids_a = self.tokenizer(text_a)  # ragged (B, None)
        if text_b is None:
            packed = self.tokenizer.pack(ids_a, None, self.max_seq_length, self.special)
        else:
            ids_b = self.tokenizer(text_b)
            packed = self.tokenizer.pack(ids_a, ids_b, self.max_seq_length, self.special)
            if self.similarity:  # row 1: the other order, as `similarity_inputs`
                swapped = self.tokenizer.pack(ids_b, ids_a, self.max_seq_length, self.special)
                packed = {name: tf.stack([packed[name], swapped[name]], axis=1)  # (B, 2, S)
                          for name in packed}
        return {**packed, **self.outputs({name: packed[name] for name in INPUT_NAMES})}


def _classifier_tokenizer(model, vocab_file, merges_file, max_seq_length):
    """`(GraphGptTokenizer, FineTuningIds)` for a classifier's text signatures,
    after checking that they give the ids the model was fine-tuned on."""
    tokenizer = GraphGptTokenizer(vocab_file, merges_file)
    special = FineTuningIds.appended_to(tokenizer.vocab_size)  # as `training.gpt.finetune`
    if special.classify != model.classify_id:
        raise ValueError(
            f"{vocab_file} holds {tokenizer.vocab_size} tokens, so its `_classify_` token "
            f"is id {special.classify}, but the classifier reads classify_id="
            f"{model.classify_id}: pass the vocab.json and merges.txt it was fine-tuned with.")
    limit = model.backbone.gpt_config.n_positions
    if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or not (
            3 <= max_seq_length <= limit):  # 3: `_start_ _delimiter_ _classify_`
        raise ValueError(
            f"`max_seq_length` must be an integer in [3, n_positions={limit}]: the text "
            f"signatures pack every row to it. Received: max_seq_length={max_seq_length!r}.")
    return tokenizer, special


def export_gpt_saved_model(model, export_dir, vocab_file=None, merges_file=None,
                           max_seq_length=128, labels=None, row_branches=2,
                           head_branches=None):
    """Writes a SavedModel of a GPT model with the signatures above.

    Args:
        model: `GptBackbone` or a model with one as `backbone` (`GptCausalLM`,
            the task models).
        export_dir: str. Replaced atomically (written beside it, then renamed).
        vocab_file, merges_file: str or None. `vocab.json` and `merges.txt`;
            both add the text signatures: `serving_text` for a backbone or
            LM, `serving_text` and `serving_text_pair` for a `GptClassifier`
            (a similarity one: `serving_text_pair` only); none for the other
            task models.
        max_seq_length: int. Tokens kept of each text; a classifier's rows
            are this long, special tokens included (the entry point's
            `--max_seq_length`), at most `n_positions`.
        labels: list of str or None. A `GptClassifier`'s label per class:
            adds `probabilities` and `label` (strings) to `logits`.
        row_branches: int. Each block in this many slices of positions side
            by side, as `keras_bert_impl.bert.bert_serving.export_saved_model`'s.
        head_branches: int or None. Short requests' blocks in this many
            groups of heads side by side, as `export_saved_model`'s (None:
            2 from hidden size 768).

    Returns:
        The names of the signatures written.
    """
    backbone = _backbone_of(model)
    tokenizer, special = _text_tokenizer(model, vocab_file, merges_file, max_seq_length)
    rank = len(model.input["input_word_ids"].shape)
    module = _GptServing(model, backbone, tokenizer, max_seq_length, special, head_branches)
    with_labels(module, model, labels)

    @tf.function(autograph=False, input_signature=[
        {name: tf.TensorSpec([None] * rank, tf.int32, name=name) for name in INPUT_NAMES}])
    def serving_default(inputs):
        return module.outputs(inputs)

    signatures = {"serving_default": serving_default, **_text_signatures(module)}
    with traced_in_row_branches(row_branches):  # the signatures are traced as they are saved
        save_module_atomic(module, export_dir, signatures)
    return sorted(signatures)


def _text_tokenizer(model, vocab_file, merges_file, max_seq_length):
    """`(GraphGptTokenizer or None, FineTuningIds or None)` of the text
    signatures: both for a classifier (`_classifier_tokenizer`), the
    tokenizer alone for a backbone or LM, neither for the other task models
    or without both files."""
    if vocab_file and merges_file and isinstance(model, GptClassifier):
        return _classifier_tokenizer(model, vocab_file, merges_file, max_seq_length)
    if vocab_file and merges_file and not isinstance(model, GptTaskModel):
        return GraphGptTokenizer(vocab_file, merges_file), None
    return None, None


def _text_signatures(module):
    """The text signatures of `module` (`{name: tf.function}`, maybe empty):
    an LM's `serving_text`, a classifier's `serving_text` (not for a
    similarity one) and `serving_text_pair`."""
    signatures = {}
    text_spec = tf.TensorSpec([None], tf.string, name="text")
    if module.tokenizer is not None and module.special is None:
        @tf.function(autograph=False, input_signature=[text_spec])
        def serving_text(text):
            return module.text_outputs(checked_texts({"text": text})["text"])

        signatures["serving_text"] = serving_text
    if module.special is not None and not module.similarity:
        @tf.function(autograph=False, input_signature=[text_spec])
        def classifier_text(text):
            return module.classifier_text_outputs(checked_texts({"text": text})["text"])

        signatures["serving_text"] = classifier_text
    if module.special is not None:
        @tf.function(autograph=False, input_signature=[
            tf.TensorSpec([None], tf.string, name="text_a"),
            tf.TensorSpec([None], tf.string, name="text_b")])
        def serving_text_pair(text_a, text_b):
            texts = checked_texts({"text_a": text_a, "text_b": text_b})
            return module.classifier_text_outputs(texts["text_a"], texts["text_b"])

        signatures["serving_text_pair"] = serving_text_pair
    return signatures
