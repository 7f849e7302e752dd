"""`export_xlnet_pretrainer_saved_model`: a trained XLNet pretrainer as a SavedModel for TF Serving."""

import tensorflow as tf

from keras_bert_impl.serving import save_module_atomic
from keras_bert_impl.xlnet.graph_xlnet_tokenizer import GraphXLNetTokenizer
from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
from keras_bert_impl.xlnet.xlnet_pretrainer import XLNetPretrainer


def export_xlnet_pretrainer_saved_model(model, export_dir, spm_file=None, do_lower_case=False,
                                        max_seq_length=128):
    """A stateless float32 SavedModel of a trained `XLNetPretrainer`.

    Signatures: `serving_default`: int32 `input_word_ids`, `input_type_ids`
    and `input_mask` `(B, L)` (1 = padding) -> `sequence_output` `(B, L, H)`
    (the content stream) and `last_output` `(B, H)` (its last position,
    where XLNet's `<cls>` sits); `serving_plm`: the same plus float32
    `perm_mask` `(B, L, L)` and `target_mapping` `(B, P, L)` -> `plm_logits`
    `(B, P, V)`; `serving_text` (`text` `(B,)`, given `spm_file`): XLNet's
    tokenizer in the graph, packed `A <sep> <cls>` left-padded to
    `max_seq_length` -> the packed ids and `serving_default`'s outputs. No
    memory: every request starts from none.

    Returns:
        The names of the signatures written.
    """
    config = model.backbone.xlnet_config.replace(mem_len=None, reuse_len=None, dropout=0.0)
    backbone = XLNetBackbone.from_config_object(config, two_stream=True, dtype="float32")
    backbone.set_weights(model.backbone.get_weights())  # memory adds no weights
    plm = XLNetPretrainer(backbone)
    plm.lm_bias.assign(model.lm_bias)
    tokenizer = None
    if spm_file:
        tokenizer = GraphXLNetTokenizer(spm_file, do_lower_case=do_lower_case)
    module = tf.Module()
    module.plm = plm
    module.tokenizer = tokenizer

    def content(inputs):
        batch, length = tf.shape(inputs["input_word_ids"])[0], tf.shape(inputs["input_word_ids"])[1]
        x = {"input_word_ids": inputs["input_word_ids"],
             "input_type_ids": inputs["input_type_ids"],
             "input_mask": tf.cast(inputs["input_mask"], tf.float32),
             "perm_mask": tf.zeros([batch, length, length]),
             # One unused query slot (an all-zero row): the content stream only.
             "target_mapping": tf.zeros([batch, 1, length])}
        out = backbone(x, training=False)["sequence_output"]  # (B, L, H)
        return {"sequence_output": out, "last_output": out[:, -1]}

    ids_spec = {name: tf.TensorSpec([None, None], tf.int32, name=name)
                for name in ("input_word_ids", "input_type_ids", "input_mask")}

    @tf.function(autograph=False, input_signature=[ids_spec])
    def serving_default(inputs):
        return content(inputs)

    @tf.function(autograph=False, input_signature=[
        ids_spec, tf.TensorSpec([None, None, None], tf.float32, name="perm_mask"),
        tf.TensorSpec([None, None, None], tf.float32, name="target_mapping")])
    def serving_plm(inputs, perm_mask, target_mapping):
        x = {"input_word_ids": inputs["input_word_ids"],
             "input_type_ids": inputs["input_type_ids"],
             "input_mask": tf.cast(inputs["input_mask"], tf.float32),
             "perm_mask": perm_mask, "target_mapping": target_mapping}
        return {"plm_logits": plm(x, training=False)}  # (B, P, V)

    signatures = {"serving_default": serving_default, "serving_plm": serving_plm}
    if tokenizer is not None:
        @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serving_text(text):
            packed = tokenizer.pack(tokenizer(text), max_length=max_seq_length)
            return {**packed, **content(packed)}

        signatures["serving_text"] = serving_text
    save_module_atomic(module, export_dir, signatures)
    return sorted(signatures)
