"""`export_xlnet_task_saved_model`: a fine-tuned XLNet task model as a SavedModel for TF Serving."""

import tensorflow as tf

from keras_bert_impl.base.saved_model import label_outputs
from keras_bert_impl.base.saved_model import save_module_atomic
from keras_bert_impl.base.saved_model import with_labels
from keras_bert_impl.base.serving_checks import checked_texts
from keras_bert_impl.xlnet.graph_xlnet_tokenizer import GraphXLNetTokenizer
from keras_bert_impl.xlnet.xlnet_inputs import INPUT_NAMES
from keras_bert_impl.xlnet.xlnet_serving import checked_xlnet_ids
from keras_bert_impl.xlnet.xlnet_task_models import XLNetTaskModel


def export_xlnet_task_saved_model(model, export_dir, spm_file=None, do_lower_case=False,
                                  max_seq_length=128, labels=None):
    """Writes a SavedModel of a fine-tuned XLNet task model for TF Serving.

    Signatures:
    - `serving_default`: int32 `input_word_ids`, `input_type_ids`,
      `input_mask` (1 on padding) `(B, S)` (`(B, C, S)` for multiple choice)
      in XLNet's layout -> the task's outputs (`logits`, or `start_logits`
      and `end_logits`), float32.
    - With `spm_file`, not for multiple choice: `serving_text` (`text`
      `(B,)`) and `serving_text_pair` (`text_a`, `text_b`), tokenized in the
      graph (`GraphXLNetTokenizer`, the same ids as `XLNetTokenizer`),
      packed as `A <sep> (B <sep>) <cls>`, cut (longest first) and
      left-padded to `max_seq_length`; outputs as above plus the packed
      inputs. For span QA pass the paragraph as `text_a` and the question
      as `text_b` (XLNet's SQuAD layout); one window, no doc stride.

    Requests are checked in the graph (`checked_xlnet_ids`): a bad one fails
    with an `InvalidArgumentError` naming the input and the range.

    Args:
        model: an `XLNetTaskModel`.
        export_dir: str. Replaced atomically (written beside it, then renamed).
        spm_file: str or None. The SentencePiece model; adds the text signatures.
        do_lower_case: bool. For the text signatures.
        max_seq_length: int. Packed length of the text signatures.
        labels: list of str or None. An `XLNetClassifier`'s label per class:
            adds `probabilities` and `label` (strings) to every signature.

    Returns:
        The names of the signatures written.
    """
    if not isinstance(model, XLNetTaskModel):
        raise ValueError(f"Cannot export {type(model).__name__}: expected an XLNet task model "
                         "(XLNetClassifier, XLNetQuestionAnswerer, ...).")
    rank = len(model.input["input_word_ids"].shape)
    module = tf.Module()
    module.model = model
    with_labels(module, model, labels)

    def outputs(inputs):
        inputs = checked_xlnet_ids(inputs, model.backbone.xlnet_config, rank)
        out = model(inputs, training=False)
        out = out if isinstance(out, dict) else {model.output_name: out}
        return label_outputs(module, {name: tf.cast(value, tf.float32)
                                      for name, value in out.items()})

    @tf.function(autograph=False, input_signature=[
        {name: tf.TensorSpec([None] * rank, tf.int32, name=name) for name in INPUT_NAMES}])
    def serving_default(inputs):
        return outputs(inputs)

    signatures = {"serving_default": serving_default}
    if spm_file and rank == 2:
        module.tokenizer = GraphXLNetTokenizer(spm_file, do_lower_case=do_lower_case)
        signatures.update(_text_signatures(module.tokenizer, serving_default, max_seq_length))
    save_module_atomic(module, export_dir, signatures)
    return sorted(signatures)


def _text_signatures(tokenizer, serving_default, max_seq_length):
    """`serving_text` and `serving_text_pair`: the texts tokenized and packed
    in the graph, then `serving_default`'s outputs of the packed ids."""

    def text_outputs(text_a, text_b=None):
        ids_b = None if text_b is None else tokenizer(text_b)
        packed = tokenizer.pack(tokenizer(text_a), ids_b, max_seq_length)
        # serving_default's trace, called: the model is traced once for all.
        return {**packed, **serving_default({name: packed[name] for name in INPUT_NAMES})}

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serving_text(text):
        return text_outputs(checked_texts({"text": text})["text"])

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")])
    def serving_text_pair(text_a, text_b):
        texts = checked_texts({"text_a": text_a, "text_b": text_b})
        return text_outputs(texts["text_a"], texts["text_b"])

    return {"serving_text": serving_text, "serving_text_pair": serving_text_pair}
