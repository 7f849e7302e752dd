"""SavedModel export for TF Serving: ids in, and raw text in.

Signatures:
- `serving_default`: int32 `input_word_ids`, `input_mask`, `input_type_ids`
  `(B, S)` (+ `masked_lm_positions` `(B, P)` for pretrainers) ->
  `sequence_output`, `pooled_output` (+ `masked_lm` and `next_sentence`
  logits for pretrainers; + `lm` `(B, S, V)` next-token logits for the
  left-to-right ablation's `BertCausalLMPretrainer`, which takes no
  positions).
- Fine-tuned models (`BertClassifier`, `BertTokenTagger`,
  `BertQuestionAnswerer`, `BertMultipleChoice`): `serving_default` takes the
  same three ids (`(B, C, S)` for multiple choice) and returns the task's
  outputs: `logits` (`start_logits` and `end_logits` for span QA).
- `serving_text` (`text` `(B,)` strings) and `serving_text_pair` (`text_a`,
  `text_b`): tokenized in the graph with the model's vocabulary, packed as
  `[CLS] A [SEP] (B [SEP])` and truncated (longest first, as the original) to
  `max_seq_length`; outputs as `serving_default` without `masked_lm`, plus
  the packed ids (so token-level outputs can be read against them). Not for
  multiple choice (its inputs are sets of pairs). Span QA through
  `serving_text_pair` (question, context) reads one window: contexts longer
  than `max_seq_length` are truncated, not windowed as `training/tasks/squad.py` does.
- Classifiers exported with `labels=` (the sorted label strings, e.g.
  `training.finetune --task=text_classification`): every signature also
  returns `probabilities` `(B, C)` (the softmax of `logits`) and `label`
  `(B,)` (the argmax's label string); the list is kept in the SavedModel as
  the variable `class_labels` (`tf.saved_model.load(dir).class_labels`).
  `with_labels` does the same for the other families' exports.

The SavedModel needs only `tensorflow` and `tensorflow_text` to load.
Every request is checked in the graph (`serving_checks`): word ids in
`[0, vocab_size)`, type ids in `[0, type_vocab_size)`, `input_mask` 0 or 1,
the three inputs of one shape and of the signature's rank, 1 to
`max_position_embeddings` tokens, `masked_lm_positions` of the ids' batch
and in `[0, S)`; a bad request fails with an `InvalidArgumentError` naming
the input and the range, e.g. `input_word_ids: values must be in
[0, 30522) (vocab_size); got min -5 max 17`. An empty batch returns empty
outputs; an empty string is `[CLS] [SEP]`.
"""


import tensorflow as tf

from keras_bert_impl.base.saved_model import label_outputs
from keras_bert_impl.base.saved_model import save_module_atomic
from keras_bert_impl.base.saved_model import with_labels
from keras_bert_impl.base.serving_checks import checked_ids
from keras_bert_impl.base.serving_checks import checked_positions
from keras_bert_impl.base.serving_checks import checked_texts
from keras_bert_impl.bert.bert_backbone import INPUT_NAMES
from keras_bert_impl.bert.bert_backbone import BertBackbone
from keras_bert_impl.bert.bert_multiple_choice import BertMultipleChoice
from keras_bert_impl.bert.bert_pretrainer import BertCausalLMPretrainer
from keras_bert_impl.bert.bert_task_model import BertTaskModel
from keras_bert_impl.bert.graph_bert_tokenizer import GraphBertTokenizer
from keras_bert_impl.layers.transformer_encoder import encoder_blocks
from keras_bert_impl.speed.head_branches import HeadBranches
from keras_bert_impl.speed.head_branches import in_head_branches_when_short
from keras_bert_impl.speed.row_branches import traced_in_row_branches


def _parts(model):
    """(backbone, masked_lm_head or None, next_sentence_head or None).

    The masked-LM head is returned only for models that read
    `masked_lm_positions`; the left-to-right pretrainer scores every
    position through its whole graph instead (`lm`).
    """
    if isinstance(model, BertBackbone):
        return model, None, None
    backbone = getattr(model, "backbone", None)
    if not isinstance(backbone, BertBackbone):
        raise ValueError(
            f"Cannot export {type(model).__name__}: expected a BertBackbone or a model with a "
            "`backbone` attribute (BertPretrainer, BertClassifier, ...).")
    masked_lm_head = getattr(model, "masked_lm_head", None)
    if "masked_lm_positions" not in getattr(model, "input", {}):
        masked_lm_head = None
    return backbone, masked_lm_head, getattr(model, "next_sentence_head", None)


class _Serving(tf.Module):
    def __init__(self, model, tokenizer, max_seq_length, jit_compile=False, head_branches=None):
        super().__init__()
        self.model = model
        self.head_branches = HeadBranches(encoder_blocks(model), head_branches)
        self.backbone, self.masked_lm_head, self.next_sentence_head = _parts(model)
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.max_positions = self.backbone.bert_config.max_position_embeddings
        # The model's numbers as one XLA computation (`export_saved_model`'s
        # `jit_compile`); the request checks and label strings stay outside it.
        self.model_outputs = (tf.function(self._model_outputs, autograph=False, jit_compile=True)
                              if jit_compile else self._model_outputs)

    def checked(self, inputs):
        """`inputs` after the request checks (`serving_checks`)."""
        config = self.backbone.bert_config
        rank = len(self.model.input["input_word_ids"].shape)
        return checked_ids(
            {name: inputs[name] for name in INPUT_NAMES}, [None] * rank,
            {"input_word_ids": (config.vocab_size, "vocab_size"),
             "input_type_ids": (config.type_vocab_size, "type_vocab_size"),
             "input_mask": (2, "0 or 1")},
            self.max_positions, "max_position_embeddings")

    def outputs(self, inputs, masked_lm_positions=None):
        inputs = self.checked(inputs)
        if masked_lm_positions is not None:
            masked_lm_positions = checked_positions(masked_lm_positions, inputs["input_word_ids"])
        out = self.model_outputs(inputs, masked_lm_positions)
        return label_outputs(self, out) if isinstance(self.model, BertTaskModel) else out

    def _model_outputs(self, inputs, masked_lm_positions=None):
        # Short requests in head branches, the others in row branches.
        return in_head_branches_when_short(
            self.head_branches, tf.size(inputs["input_word_ids"]),
            lambda: self._model_numbers(inputs, masked_lm_positions))

    def _model_numbers(self, inputs, masked_lm_positions=None):
        if isinstance(self.model, BertTaskModel):
            out = self.model(inputs, training=False)
            out = out if isinstance(out, dict) else {self.model.output_name: out}
            return {k: tf.cast(v, tf.float32) for k, v in out.items()}
        backbone_out = self.backbone(inputs, training=False)
        out = {"sequence_output": backbone_out["sequence_output"],
               "pooled_output": backbone_out["pooled_output"]}
        if isinstance(self.model, BertCausalLMPretrainer):
            out["lm"] = self.model(inputs, training=False)["lm"]
        if self.next_sentence_head is not None:
            out["next_sentence"] = self.next_sentence_head(out["pooled_output"], training=False)
        if masked_lm_positions is not None:
            # Through the whole pretrainer, as in fit: calling the head alone
            # here reads its float32 bias under the backbone's bfloat16
            # autocast when the policy is mixed.
            predictions = self.model({**inputs, "masked_lm_positions": masked_lm_positions},
                                     training=False)
            out["masked_lm"] = predictions["masked_lm"]
        return {k: tf.cast(v, tf.float32) for k, v in out.items()}

    def text_outputs(self, ids_outputs, text_a, text_b=None):
        """The packed ids of the texts and `ids_outputs` (`outputs`, traced) of them."""
        ids_b = None if text_b is None else self.tokenizer.tokenize(text_b)
        packed = self.tokenizer.pack(self.tokenizer.tokenize(text_a), ids_b, self.max_seq_length)
        return {**packed, **ids_outputs({name: packed[name] for name in INPUT_NAMES})}


def _ids_spec(rank=2):
    return {name: tf.TensorSpec([None] * rank, tf.int32, name=name) for name in INPUT_NAMES}


def export_saved_model(model, export_dir, vocab_file=None, do_lower_case=True, max_seq_length=128,
                       labels=None, jit_compile=False, row_branches=2, head_branches=None):
    """Writes a SavedModel of `model` with the signatures above.

    Args:
        model: `BertBackbone`, a pretrainer or a fine-tuned task model.
        export_dir: str. Replaced atomically (written beside it, then renamed).
        vocab_file: str or None. Adds the text signatures.
        do_lower_case: bool. For the text signatures.
        max_seq_length: int. Packed length of the text signatures.
        labels: list of str or None. A classifier's label per class: adds
            `label` and `probabilities` to its outputs.
        jit_compile: bool. Every signature runs the model as one XLA
            computation. Measured on 2 CPU cores (docs/benchmarks.md):
            MiniLM's batch-1 p50 fell by a fifth at 32 tokens and a tenth at
            128 (the same at 384), its batch-32 throughput by 11-28%, and a
            `base` model was slower with it. Off by default: each new
            request shape (batch size, and length for ids) compiles once,
            about 1 s, and TF Serving runs such a model only with
            `--xla_cpu_compilation_enabled=true` (docs/serving.md).
        row_branches: int. Every Transformer block computes its positions in
            this many slices, independent graph branches that TensorFlow
            runs side by side on its inter-op threads
            (`keras_bert_impl.speed.row_branches`); the numbers are the
            same. Serve with 1 intra-op thread and as many inter-op threads
            as cores (docs/serving.md). 1: one graph, as the Keras model.
        head_branches: int or None. A request of fewer than 128 rows (batch
            x length) computes each block in this many groups of heads side
            by side instead (`keras_bert_impl.speed.head_branches`): at 32
            tokens, batch 1, a `base` model's p50 fell by a third. The
            groups' kernels are stored regrouped beside the model's: the
            export is larger by 45% for `base` (610 against 420 MB). None:
            2 for models of hidden size 768 or more where 2 divides the
            heads and the intermediate size, else 1 (for MiniLM's 384 the
            gain at 32 tokens and the loss at 128 were a few percent each);
            a count that does not divide them is refused. 1: none.
    """
    tokenizer = GraphBertTokenizer(vocab_file, do_lower_case=do_lower_case) if vocab_file else None
    module = _Serving(model, tokenizer, max_seq_length, jit_compile, head_branches)
    with_labels(module, model, labels)
    rank = 3 if isinstance(model, BertMultipleChoice) else 2

    # The ids' outputs, traced once: the text signatures call this function
    # (a call op in their graphs) rather than tracing the model again each.
    @tf.function(autograph=False, input_signature=[_ids_spec(rank)])
    def ids_outputs(inputs):
        return module.outputs(inputs)

    signatures = {"serving_default": _default_signature(module, ids_outputs)}
    if tokenizer is not None and not isinstance(model, BertMultipleChoice):
        signatures.update(_text_signatures(module, ids_outputs))
    with traced_in_row_branches(row_branches):  # the signatures are traced as they are saved
        return save_module_atomic(module, export_dir, signatures)


def _default_signature(module, ids_outputs):
    """`serving_default`: `ids_outputs`, or for a model reading
    `masked_lm_positions` a function of the ids and the positions."""
    if module.masked_lm_head is None:
        return ids_outputs

    @tf.function(autograph=False, input_signature=[
        _ids_spec(), tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions")])
    def serving_default(inputs, masked_lm_positions):
        return module.outputs(inputs, masked_lm_positions)

    return serving_default


def _text_signatures(module, ids_outputs):
    """`serving_text` and `serving_text_pair`: the texts tokenized and packed
    in the graph, then `ids_outputs` of the packed ids."""

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serving_text(text):
        return module.text_outputs(ids_outputs, checked_texts({"text": text})["text"])

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")])
    def serving_text_pair(text_a, text_b):
        texts = checked_texts({"text_a": text_a, "text_b": text_b})
        return module.text_outputs(ids_outputs, texts["text_a"], texts["text_b"])

    return {"serving_text": serving_text, "serving_text_pair": serving_text_pair}
